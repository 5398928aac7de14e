"""TrainConfig: every setting of contrastive training, with the paper's values as defaults.

Presets are functions that override the base: `paper()` (section 6.3: 12 blocks, one token
per observation, batch 128, Adam at lr 1e-4, 20 epochs) and `cpu()` (a patched small model
that trains to high test recall on a 2-core CPU on `small` data; docs/results/training.md),
`learned()` (a pure-learned set encoder, lagda/learning/set_encoder.py: positions and times in,
no physics solve; observation regimes drawn per batch with regime = "mixture"), plus
`tiny()` for tests. The resolved config is written to `run_dir/config.json`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Literal, get_args

from lagda.settings import setting

Features = Literal["position", "increments", "sincos", "increments+sincos"]
Pooling = Literal["last", "cls", "mean"]
Positional = Literal["learned", "sinusoidal"]
LossKind = Literal["cond", "joint", "sigmoid", "kernel_set", "sogclr", "nuclr"]
Kernel = Literal["gaussian", "imq"]
CoefSet = Literal["singleton", "time"]
NuclrRule = Literal["paper", "code"]
Similarity = Literal["cosine", "inner", "l2"]
Optimiser = Literal["adam", "adamw"]
ComputeDtype = Literal["float32", "bfloat16"]
Attention = Literal["xla", "cudnn"]
Encoder = Literal["transformer", "set"]
SetHead = Literal["ridge", "mlp", "misfit"]
CoefEmbedding = Literal["re_im", "quadratic"]
SetInit = Literal["random", "basis"]
SimilarityWeights = Literal["uniform", "prior"]
Regime = Literal["dense", "mixture"]

_CHOICES = {
    "features": Features, "pooling": Pooling, "positional": Positional, "loss": LossKind,
    "similarity": Similarity, "optimiser": Optimiser, "compute_dtype": ComputeDtype, "attention": Attention,
    "encoder": Encoder, "set_head": SetHead, "coef_embedding": CoefEmbedding, "set_init": SetInit, "regime": Regime,
    "kernel": Kernel,
    "kernel_coef_set": CoefSet, "similarity_weights": SimilarityWeights,
    "nuclr_xi_rule": NuclrRule, "nuclr_zeta_step": NuclrRule,
}
# LossKind names the losses of lagda.learning.loss_registry.LOSSES, STATEFUL_LOSSES those with per-sample state
# (lagda/learning/nuclr.py), which the settings below restrict (tests/test_losses.py keeps them equal)
STATEFUL_LOSSES = ("sogclr", "nuclr")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    # --- trajectory encoder g_v (section 6.3: g_v = P o A_M o ... o A_1 o L) ---
    encoder: Encoder = setting("transformer", "the paper's transformer, or the set encoder (set_encoder.py)")
    n_blocks: int = setting(12, "M, residual attention blocks")
    d_model: int = setting(128, "d', token width after the lifting layer L")
    n_heads: int = setting(4, "attention heads per block")
    mlp_ratio: int = setting(4, "MLP hidden width / d_model")
    patch: int = setting(1, "P, consecutive observations per token (1 = the paper: one token per obs)")
    features: Features = setting("position", "per-observation input features (see encoders.py)")
    pooling: Pooling = setting("last", "pooling operator P (paper: last token)")
    positional: Positional = setting("learned", "positional information added to the tokens")
    physics: bool = setting(False, "add the posterior-mean feature theta_hat(v) (lagda/learning/physics.py; beyond "
                            "the paper)")
    physics_noise: float = setting(1e-6, "sigma^2 of the finite-difference velocities, prior-whitened units")
    physics_stride: int = setting(4, "observations per finite-difference interval of theta_hat")
    # --- set encoder (encoder = "set", lagda/learning/set_encoder.py; beyond the paper) ---
    set_head: SetHead = setting("ridge", "learned closed-form ridge layer, an MLP, or misfit: the quadratic form of "
                                "the tracks' velocity misfit to a learned design (needs coef_embedding quadratic)")
    set_rank: int = setting(0, "r, width of the learned design of the ridge head (0: 2K)")
    set_ridge: float = setting(1e-3, "initial ridge lambda, relative to tr(S) / r (trained)")
    set_init: SetInit = setting("random", "ridge or misfit head's start: random, or basis: the design of the velocity "
                                "in the features (and the ridge's identity readout: least squares; r = 2K)")
    set_hidden: int = setting(512, "hidden width of the MLP head")
    set_depth: int = setting(2, "hidden layers of the MLP head")
    # --- observation regimes drawn per batch (lagda/learning/regimes.py; set encoder only) ---
    regime: Regime = setting("dense", "\"dense\": tracks as stored; \"mixture\": a random regime per field")
    regime_dense_prob: float = setting(0.25, "probability of the first drifter alone, dense and exact")
    regime_stride_max: int = setting(100, "strides log-uniform in [1, this]")
    regime_gap_max: float = setting(0.5, "at most this fraction of the strided observations dropped")
    regime_noise_max: float = setting(1e-2, "position-noise std uniform in [0, this] (zero half the time)")
    regime_max_drifters: int = setting(8, "drifters per field uniform in [1, this] (at most the data's)")
    # --- the fixed coefficient embedding g_u ---
    coef_embedding: CoefEmbedding = setting("re_im", "g_u(c): (Re c, Im c), or quadratic: (x, x x^T upper triangle "
                                            "with off-diagonals doubled, 1) of x = (Re c, Im c), set_head misfit")
    # --- loss (section 3) ---
    loss: LossKind = setting("cond", "L_cond (eq. 12), joint, sigmoid, kernel_set (L_cond on set kernels), sogclr, "
                             "nuclr")
    lambda_u: float = setting(1.0, "weight of the u-given-v conditional in L_cond (1, 1: symmetric CLIP)")
    lambda_v: float = setting(1.0, "weight of the v-given-u conditional in L_cond")
    negatives: int = setting(0, "coefficients of K other training pairs, drawn every step, added to each track's "
                                "softmax over coefficients (L_cond's u-given-v half; g_u has no parameters, so a "
                                "negative costs one embedding): harder negatives than the batch's")
    similarity: Similarity = setting("cosine", "similarity of embeddings (paper: cosine)")
    tau: float = setting(0.07, "temperature (dimensionless); initial value if learn_tau")
    learn_tau: bool = setting(False, "train log(tau) jointly with the encoder")
    mask_mean_mode: bool = setting(False, "drop c_(0,0) (no effect on velocity) from the similarity")
    similarity_weights: SimilarityWeights = setting("uniform", "weights of the coefficients in the similarity: "
                                                    "uniform, or prior: 1 / their prior std (whitened)")
    sigmoid_bias: float = setting(-10.0, "initial bias of the sigmoid loss (trained with it)")
    # --- kernel set similarity (loss = "kernel_set", lagda/learning/kernel_set.py) ---
    kernel: Kernel = setting("gaussian", "k~ of k = alpha1 u.v + alpha2 k~: gaussian or imq (inverse multiquadric)")
    kernel_alpha1: float = setting(0.5, "alpha1, weight of the linear kernel u.v")
    kernel_alpha2: float = setting(0.5, "alpha2, weight of k~")
    kernel_scale: float = setting(0.3, "sigma of the gaussian k~ (paper 0.3), c of the imq k~ (paper 0.5)")
    kernel_features: int = setting(512, "D, random Fourier features (a new draw every step; fixed for evaluation)")
    kernel_coef_set: CoefSet = setting("singleton", "coefficient side: {g_u(c)}, or {c_k e^(i omega_k t_m)} over "
                                       "kernel_coef_times")
    kernel_coef_times: int = setting(10, "M, times t_m of the time-indexed coefficient set")
    # --- NUCLR / SogCLR (loss = "nuclr" / "sogclr", lagda/learning/nuclr.py; tau is fixed) ---
    nuclr_gamma: float = setting(0.8, "gamma, weight of the new batch estimate in the moving average u")
    nuclr_zeta_init: float = setting(-0.05, "zeta_0, initial weight of every candidate (paper: -0.05 CC3M, 0 CC12M)")
    nuclr_xi_init: float = setting(0.0, "xi_0 >= zeta_0, initial xi")
    nuclr_zeta_lr: float = setting(1.0, "learning rate of zeta (paper: SGD with momentum; public code: 5e-6 on n G, "
                                   "nuclr_zeta_step code)")
    nuclr_zeta_momentum: float = setting(0.9, "momentum of the zeta SGD (paper rule)")
    nuclr_freeze: float = setting(1 / 6, "fraction of training with zeta frozen (paper: 5 of 30 epochs)")
    nuclr_xi_rule: NuclrRule = setting("paper", "paper: xi = max(xi, |zeta|_inf) each step; code: max(xi_0, max zeta) "
                                       "per epoch")
    nuclr_zeta_step: NuclrRule = setting("paper", "paper: momentum SGD, cosine lr; code: m = 0.1 m + 0.9 n G, lr /10, "
                                         "/100")
    nuclr_offdiag_c: bool = setting(True, "factor c = (n-1)/(B-1) on the off-diagonal terms of eq. 14 (public code: "
                                    "no)")
    # --- optimiser ---
    optimiser: Optimiser = setting("adam", "paper: Adam")
    lr: float = setting(1e-4, "peak learning rate")
    warmup: int = setting(0, "linear warm-up steps (0: none)")
    cosine_decay: bool = setting(False, "decay the lr to 0 over training with a cosine after warm-up")
    weight_decay: float = setting(0.0, "decoupled weight decay (adamw only)")
    grad_clip: float = setting(0.0, "clip the global gradient norm to this (0: no clipping)")
    # --- loop ---
    batch_size: int = setting(128, "fields per step (global, split over devices)")
    epochs: int = setting(20, "passes over the training set")
    seed: int = setting(0, "parameter init and per-epoch shuffling (fold_in(seed, epoch))")
    compute_dtype: ComputeDtype = setting("float32", "activations; parameters stay float32")
    attention: Attention = setting("xla", "the transformer's attention kernel: XLA's, or cuDNN's fused (flash) "
                                   "attention on an NVIDIA GPU (needs bfloat16; elsewhere XLA's, the same function)")
    eval_every: int = setting(1, "epochs between retrieval evaluations (metrics.jsonl)")
    eval_library: int = setting(4096, "fields in each retrieval library (train and test), 0 = skip")
    eval_batch: int = setting(512, "fields per embedding / similarity batch during evaluation")
    keep_checkpoints: int = setting(2, "checkpoints kept in run_dir/checkpoints (one per epoch)")
    stream: bool = setting(False, "read the training tracks from their file(s) batch by batch (datasets larger than "
                           "memory)")

    def validate(self) -> "TrainConfig":
        """Returns self, or raises ValueError with one line naming the bad setting."""
        for name, choice in _CHOICES.items():
            valid = get_args(choice)
            if getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}, got {getattr(self, name)!r}")
        positive = ("n_blocks", "d_model", "n_heads", "mlp_ratio", "patch", "batch_size", "epochs",
                    "eval_every", "eval_batch", "keep_checkpoints", "physics_stride", "set_hidden", "set_depth",
                    "regime_stride_max", "regime_max_drifters", "kernel_features", "kernel_coef_times")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.negatives < 0:
            raise ValueError(f"negatives must be >= 0, got {self.negatives}")
        if self.negatives and self.loss != "cond":
            raise ValueError(f"negatives = {self.negatives} go with loss = 'cond' only: set negatives = 0 for "
                             f"loss = {self.loss!r}")
        if self.loss in STATEFUL_LOSSES and self.learn_tau:
            raise ValueError(f"loss = {self.loss!r} keeps tau fixed: set learn_tau = False")
        if self.loss in STATEFUL_LOSSES and self.batch_size < 2:
            raise ValueError(f"loss = {self.loss!r} needs batch_size >= 2")
        if not 0 < self.nuclr_gamma <= 1 or not 0 <= self.nuclr_freeze <= 1:
            raise ValueError(f"nuclr_gamma must be in (0, 1] and nuclr_freeze in [0, 1], got {self.nuclr_gamma}, "
                             f"{self.nuclr_freeze}")
        if self.nuclr_xi_init < self.nuclr_zeta_init:
            raise ValueError(f"nuclr_xi_init = {self.nuclr_xi_init} must be >= nuclr_zeta_init = "
                             f"{self.nuclr_zeta_init}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model = {self.d_model} is not divisible by n_heads = {self.n_heads}")
        if self.attention == "cudnn" and self.compute_dtype != "bfloat16":
            raise ValueError("attention = 'cudnn' needs compute_dtype = 'bfloat16' (cuDNN's fused attention has no "
                             "float32 kernel)")
        if self.set_init == "basis" and (self.set_head == "mlp" or self.set_rank):
            raise ValueError("set_init = 'basis' needs set_head = 'ridge' or 'misfit' and set_rank = 0 (r = 2K)")
        if (self.set_head == "misfit") != (self.coef_embedding == "quadratic"):
            raise ValueError("set_head = 'misfit' and coef_embedding = 'quadratic' go together (their inner product "
                             "is minus the misfit)")
        if self.set_head == "misfit" and (self.encoder != "set" or self.similarity != "inner" or self.set_rank
                                          or self.loss == "kernel_set" or self.similarity_weights != "uniform"):
            raise ValueError("set_head = 'misfit' needs encoder = 'set', similarity = 'inner', set_rank = 0, "
                             "similarity_weights = 'uniform' and a loss other than kernel_set")
        if self.encoder == "set" and self.physics:
            raise ValueError("physics = True needs encoder = 'transformer' (the set encoder is pure-learned)")
        if self.regime != "dense" and self.encoder != "set":
            raise ValueError(f"regime = {self.regime!r} needs encoder = 'set' (the transformer reads dense tracks)")
        for name in ("regime_dense_prob", "regime_gap_max"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("lr", "tau", "physics_noise", "set_ridge", "kernel_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("warmup", "weight_decay", "grad_clip", "eval_library", "lambda_u", "lambda_v",
                     "set_rank", "regime_noise_max", "kernel_alpha1", "kernel_alpha2", "nuclr_zeta_lr",
                     "nuclr_zeta_momentum"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        return self

    def to_json(self) -> str:
        """Returns the config as indented JSON (the content of run_dir/config.json)."""
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """Returns a validated TrainConfig from a dict; raises ValueError on unknown keys."""
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown TrainConfig fields: {sorted(unknown)}")
        return cls(**values).validate()


def paper(**overrides) -> TrainConfig:
    """The paper's setting (section 6.3): 12 blocks, P = 1, batch 128, Adam lr 1e-4, 20 epochs."""
    return dataclasses.replace(TrainConfig(), **overrides).validate()


def cpu(**overrides) -> TrainConfig:
    """A small physics-informed encoder for dense tracks, trained on a CPU (docs/results/training.md: its recall).

    BEYOND the paper: g_v = gain * theta_hat(v) + head(transformer(v)), where theta_hat is the
    linear-Gaussian posterior mean of (Re c, Im c) from finite-difference velocities along the
    track (lagda/learning/physics.py) and the head starts at zero, so training learns a correction to a
    physics estimate. The transformer: 2 blocks, d = 64, patches of 20 observations, increments + sin/cos
    features, mean pooling.
    c_(0,0) is masked out of the similarity: it never affects the velocity, yet under the default prior it
    carries a large share of E|g_u(c)|^2, which under plain cosine would cap even an oracle encoder's
    trajectory -> coefficient recall.
    """
    base = dict(n_blocks=2, d_model=64, n_heads=4, mlp_ratio=2, patch=20, features="increments+sincos",
                pooling="mean", physics=True, physics_noise=1e-6, physics_stride=8, lr=1e-3, warmup=50,
                cosine_decay=True, grad_clip=1.0, optimiser="adamw", weight_decay=1e-4, tau=0.05,
                mask_mean_mode=True, batch_size=128, epochs=3, eval_every=3, eval_library=4096)
    return paper(**{**base, **overrides})


def tiny(**overrides) -> TrainConfig:
    """A very small model for tests and `lagda demo`: 1 block, d = 16, patches of 10."""
    base = dict(n_blocks=1, d_model=16, n_heads=2, mlp_ratio=2, patch=10, features="increments+sincos",
                pooling="mean", lr=3e-3, tau=0.1, batch_size=8, epochs=2, eval_library=16, eval_batch=8)
    return paper(**{**base, **overrides})


def learned(**overrides) -> TrainConfig:
    """A pure-learned set encoder (no physics solve): positions and times in, g_v out.

    BEYOND the paper. Tokens are increments between consecutive observations; their basis
    features phi = (cos, sin)(omega_k t + 2 pi k.z) are pooled over tokens and drifters into
    the matched filter P = sum phi (x) dz / T, the second moments Phi = sum dt phi phi^T / T and
    the mean squared speed E = sum |dz|^2 / (dt T) (lagda/learning/set_encoder.py). The head is
    "misfit": a learned design W (random at the start) gives S = W^T Phi W and b = W^T P, and g_v =
    (2 b, -S, -E) is the quadratic form of the misfit of the increments to the velocity phi W x of
    coefficients x = (Re c, Im c); g_u(c) is the fixed (x, x x^T, 1) (coef_embedding "quadratic"), so the
    inner similarity is minus the misfit. What is given besides the basis features: the form of the
    score, a Gaussian log-likelihood of the coefficients, quadratic in them, under white velocity errors;
    the velocity model W is learned. Trained on dense exact tracks (regime = "dense"); set regime =
    "mixture" to train on strided, gappy, noisy, multi-drifter regimes. Every step, the coefficients of
    2,048 other training pairs join each track's softmax over coefficients (negatives): a batch's 127
    other fields are soon all far from a track's, and the loss stops asking for a more exact W; so the
    data need at least 2,048 + 128 pairs (set negatives lower for fewer).

    set_head = "ridge" (or "mlp") selects the earlier head with its own settings: g_u(c) = (Re c, Im c), the
    cosine similarity at tau 0.05, and for "ridge" the learned closed-form ridge layer U (W^T Phi W +
    lambda I)^{-1} W^T P (`lagda/shipped/learned` was trained with it).
    """
    common = dict(encoder="set", warmup=50, cosine_decay=True, grad_clip=1.0, optimiser="adam",
                  mask_mean_mode=True, batch_size=128, epochs=10, eval_every=1, eval_library=4096)
    if overrides.get("set_head", "misfit") == "misfit":
        head = dict(set_head="misfit", coef_embedding="quadratic", similarity="inner", tau=1.0, learn_tau=True,
                    lr=1e-1, negatives=2048)
    else:
        head = dict(set_head=overrides["set_head"], set_ridge=1e-4, tau=0.05, lr=1e-2)
    return paper(**{**common, **head, **overrides})


PRESETS = {"paper": paper, "cpu": cpu, "tiny": tiny, "learned": learned}
