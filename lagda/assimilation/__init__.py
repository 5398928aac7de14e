"""Assimilation: observed drifter tracks -> the posterior over the flow's coefficients.

Modules: `assimilate` (the dispatcher and `assimilate_file`), `methods/` (linear, var, enkf,
retrieve, embed, hybrid), `posterior` (weighted samples), `scores` (errors against a known
truth), `plot` (figures of a result), `evaluation` (scores of several methods on one file).
"""
