"""Assimilation methods: tracks of one field in, weighted coefficient samples out.

`config` (AssimConfig, METHODS) imports no JAX, so the CLI can read the method list at
start-up; the method functions are loaded on first access (PEP 562 module __getattr__).
"""

from lagda._lazy import lazy_getattr

_LAZY = {
    "FieldEstimate": "_common", "FlowModel": "_common", "METHODS": "config", "AssimConfig": "config",
    "assimilate_enkf": "ensemble", "assimilate_linear": "linear", "assimilate_var": "variational",
    "assimilate_hybrid": "hybrid",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
