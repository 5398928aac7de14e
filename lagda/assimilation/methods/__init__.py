"""Assimilation methods: tracks of one field in, weighted coefficient samples out.

`config` (AssimConfig, METHODS) imports no JAX, so the CLI can read the method list at
start-up; the method functions are loaded on first access (PEP 562 module __getattr__).
"""

import importlib

_LAZY = {
    "FieldEstimate": "_common", "FlowModel": "_common", "METHODS": "config", "AssimConfig": "config",
    "assimilate_enkf": "ensemble", "assimilate_linear": "linear", "assimilate_var": "variational",
    "assimilate_hybrid": "hybrid",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
