"""Assimilation methods: the tracks of each field in, weighted coefficient samples out.

`registry` holds the method objects (`METHODS`: linear, var, enkf, retrieve, embed, hybrid) and `config`
their settings; neither imports JAX, so the command line reads them at start-up. The implementations
(linear, variational, ensemble, learned, hybrid, search) are loaded on first use.
"""

from lagda._lazy import lazy_getattr

_LAZY = {
    "METHODS": "registry", "Method": "registry", "make_method": "registry", "method_config": "registry",
    "Linear": "registry", "Var": "registry", "Enkf": "registry", "Retrieve": "registry", "Embed": "registry",
    "Hybrid": "registry",
    "MethodConfig": "config", "LinearConfig": "config", "VarConfig": "config", "EnkfConfig": "config",
    "RetrieveConfig": "config", "EmbedConfig": "config", "HybridConfig": "config",
    "assimilate_linear": "linear", "assimilate_var": "variational", "assimilate_enkf": "ensemble",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
