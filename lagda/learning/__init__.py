"""Learning: the trajectory encoders, contrastive losses, training, retrieval and run loading.

Modules: `config` (TrainConfig and presets), `encoders` (g_u, g_v), `physics` (the
physics-informed track feature), `losses`, `retrieval`, `data` (paired datasets), `train`
(the training loop), `optimizer`, `checkpoint`, `model` (build, load and embed with a trained
run: what assimilation imports), `evaluate` (retrieval R@k), `gaussian` (section 5 theory).
The public functions are re-exported here and loaded on first use (`train` and `evaluate`
are `lagda.learning.train.train` and `lagda.learning.evaluate.evaluate`: the names are the modules').
"""

import importlib

_LAZY = {"TrainConfig": "config", "PRESETS": "config", "load_run": "model", "load_trained": "model",
         "embed_tracks": "model", "load_paired": "data"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
