"""Assimilation: observed drifter tracks -> the posterior over the flow's coefficients.

Modules: `assimilate` (the dispatcher and `assimilate_file`), `methods/` (linear, var, enkf,
retrieve, embed, hybrid, multi-start search), `posterior` (weighted samples), `scores`
(errors against a known truth), `plot` (figures of a result), `evaluation` (scores of several
methods on one file). The public functions are re-exported here and loaded on first use (`assimilate` itself
is `lagda.assimilation.assimilate.assimilate`: the name is the module's).
"""

from lagda._lazy import lazy_getattr

_LAZY = {"assimilate_file": "assimilate", "model_settings": "assimilate",
         "AssimConfig": "methods.config", "METHODS": "methods.config", "Posterior": "posterior",
         "score_posterior": "scores", "plot_assimilation": "plot"}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
