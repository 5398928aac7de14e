"""Learning: the trajectory encoders, contrastive losses, training, retrieval and run loading.

Modules: `config` (TrainConfig and presets), `encoders` (g_u, g_v), `physics` (the
physics-informed track feature), `losses`, `retrieval`, `data` (paired datasets), `train`
(the training loop), `optimizer`, `checkpoint`, `model` (build, load and embed with a trained
run: what assimilation imports), `evaluate` (retrieval R@k), `gaussian` (section 5 theory).
The public functions are re-exported here and loaded on first use (`train` and `evaluate`
are `lagda.learning.train.train` and `lagda.learning.evaluate.evaluate`: the names are the modules').
"""

from lagda._lazy import lazy_getattr

_LAZY = {"TrainConfig": "config", "PRESETS": "config", "load_run": "model", "load_trained": "model",
         "embed_tracks": "model", "load_paired": "data"}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
