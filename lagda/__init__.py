"""lagda: Lagrangian data assimilation by contrastive learning."""

__version__ = "0.1.0"
