"""Assimilation: observed drifter tracks -> the posterior over the flow's coefficients.

Modules: `assimilate` (`assimilate` for tracks in memory, `assimilate_file` for `lagda assimilate`), `settings`
(`AssimilateSettings`, the options of `assimilate_file`),
`model` (FlowModel and how it is found), `methods/` (the method objects and their configs: linear, var,
enkf, sample, retrieve, embed, hybrid; and `methods.basis`, a chosen basis for flows that are not
lagda's own), `posterior` (weighted samples), `fields` (gridded posterior fields, the result's
contents), `scores` (errors against a known truth), `plot` (figures of a result), `evaluation` (scores
of several methods on one file). The public names are re-exported here and loaded on first use
(`assimilate` itself is `lagda.assimilation.assimilate.assimilate`: the name is the module's).
"""

from lagda._lazy import lazy_getattr

_LAZY = {"assimilate_file": "assimilate", "AssimilationSummary": "assimilate", "AssimilateSettings": "settings",
         "FlowModel": "model", "model_settings": "model", "METHODS": "methods.registry",
         "make_method": "methods.registry", "Posterior": "posterior", "score_posterior": "scores",
         "plot_assimilation": "plot"}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
