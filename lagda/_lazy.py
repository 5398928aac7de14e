"""Lazy re-exports for package `__init__` modules (PEP 562), so importing a package stays cheap."""

import importlib


def lazy_getattr(package: str, exports: dict):
    """Returns a module `__getattr__` that imports `package.<exports[name]>` on first access to `name`."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
