"""lagda: Lagrangian data assimilation by contrastive learning.

From Python, one call returns an `xarray.Dataset` (lagda.api):

    import lagda

    maps = lagda.map(lagda.examples.path("gdp_like"), period=("2025-03-01", "2025-03-31"))
    result = lagda.assimilate(lagda.examples.path("gdp_like"))

`map`, `assimilate` and `examples` are loaded on first use (PEP 562), so `import lagda` imports nothing else.
"""

import importlib

from lagda._lazy import lazy_getattr
from lagda.version import __version__ as __version__  # the package's version, re-exported

_LAZY = {"map": "api", "assimilate": "api"}
_SUBMODULES = ("examples",)

__all__ = sorted([*_LAZY, *_SUBMODULES, "__version__"])

_functions = lazy_getattr(__name__, _LAZY)


def __getattr__(name: str):
    if name in _SUBMODULES:  # a module of the package, imported on first use
        return importlib.import_module(f"{__name__}.{name}")
    return _functions(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
