"""Assimilation methods: tracks of one field in, weighted coefficient samples out."""

from lagda.methods._common import FieldEstimate, FlowModel
from lagda.methods.config import METHODS, AssimConfig
from lagda.methods.ensemble import assimilate_enkf
from lagda.methods.linear import assimilate_linear
from lagda.methods.variational import assimilate_var

__all__ = ["FieldEstimate", "FlowModel", "METHODS", "AssimConfig", "assimilate_enkf", "assimilate_linear", "assimilate_var"]
