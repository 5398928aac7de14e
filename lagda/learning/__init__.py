"""Learning: the trajectory encoders, contrastive losses, training, retrieval and run loading.

Modules: `config` (TrainConfig and presets), `encoders` (g_u, g_v), `physics` (the
physics-informed track feature), `losses`, `retrieval`, `data` (paired datasets), `train`
(the training loop), `optimizer`, `checkpoint`, `model` (build, load and embed with a trained
run: what assimilation imports), `evaluate` (retrieval R@k), `gaussian` (section 5 theory).
"""
