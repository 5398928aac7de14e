"""The two embeddings of section 6.3: the fixed g_u on coefficients, the learned g_v on tracks.

(config.encoder = "set" selects the other g_v, lagda/learning/set_encoder.py, for any
observation regime; `encode_tracks` below serves both.)

g_u(c) = (Re c, Im c) in R^{2K} (fixed; docs/design/learning.md). g_v is a transformer over the track,
g_v(v) = P o A_M o ... o A_1 o L(v) (section 6.3), with n_e = 2K outputs:

- features: per observation, from unwrapped positions `(obs, 2)`:
  "position" (x, y); "increments" z_j - z_{j-1} (velocity-like; the first copies the second);
  "sincos" sin/cos(2 pi n x), sin/cos(2 pi n y), n = 1..3 (periodic: the field only sees
  z mod 1); "increments+sincos" both. Each channel is standardised with training-set
  statistics stored in the model (`set_feature_stats`), so the scale of dt does not matter.
- tokens: patches of P consecutive observations, flattened and lifted by a Linear L.
- positions: observation times are identical across a dataset, so a learned absolute
  embedding per token can represent the time factors exp(i omega_k t_j) of eq. (59)
  directly; "sinusoidal" is the fixed alternative.
- M pre-LayerNorm residual blocks (multi-head attention, MLP), a final LayerNorm,
  pooling ("last" token as in the paper, a learned "cls" token, or the "mean"), Linear to n_e.
- physics (config.physics, an option BEYOND the paper, lagda/learning/physics.py): the output is
  g_v(v) = gain * theta_hat(v) + head(pooled), where theta_hat is the linear-Gaussian
  posterior mean of (Re c, Im c) from finite-difference velocities along the track (the
  dataset's modes, frequencies and prior are constants of the model), `gain` a learned
  per-component scale (init 1) and the head initialised to zero, so training starts from
  the physics estimate and learns a correction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lagda.learning import physics
from lagda.learning.config import TrainConfig
from lagda.learning.set_encoder import SetEncoder, quadratic_features

N_HARMONICS = 3  # sin/cos harmonics of the position: the default modes have |k_i| <= 3
_FEATURE_WIDTH = {"position": 2, "increments": 2, "sincos": 4 * N_HARMONICS,
                  "increments+sincos": 2 + 4 * N_HARMONICS}
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def embed_coefficients(coef, kind: str = "re_im"):
    """Returns the fixed Eulerian embedding g_u(c), real `(..., set_encoder.embedding_width(mode, kind))`.

    "re_im": x = (Re c, Im c) `(..., 2 * mode)`. "quadratic": `quadratic_features(x)`, (x, the upper triangle of
    x x^T with off-diagonals doubled, 1), whose inner product with a misfit head's track embedding
    (lagda/learning/set_encoder.py) is minus the velocity misfit of the coefficients to the tracks.

    Parameters
    ----------
    coef
        complex `(..., mode)` Fourier coefficients c_k of eq. (59).
    kind
        TrainConfig.coef_embedding.

    Raises
    ------
    ValueError
        for an unknown kind.
    """
    coef = jnp.asarray(coef)
    x = jnp.concatenate([jnp.real(coef), jnp.imag(coef)], axis=-1)
    if kind == "re_im":
        return x
    if kind == "quadratic":
        return quadratic_features(x)
    raise ValueError(f"unknown coefficient embedding {kind!r}; valid values: re_im, quadratic")


def similarity_mask(k1, k2, mask_mean_mode: bool, prior_scale=None, kind: str = "re_im") -> np.ndarray:
    """Returns float32 `(set_encoder.embedding_width(mode, kind),)` weights applied to both embeddings before the
    similarity.

    All ones, except zeros at Re/Im of the mode k = (0, 0) when `mask_mean_mode`: c_(0,0)
    never changes the velocity, so no trajectory can predict it (g_u itself stays (Re c, Im c)).
    With `prior_scale` `(mode,)` (TrainConfig.similarity_weights "prior") each mode weighs rms(a) / a_k: the
    similarity of whitened coefficients, in which every mode counts alike (the learned conditional's closed form,
    learned.closed_form, then shrinks every mode alike instead of zeroing the weak ones).
    For the "quadratic" embedding the weights m `(2 * mode,)` are lifted to `quadratic_features(m)` with the doubling
    undone, (m, m_i m_j, 1): then g_u(c) times them is the quadratic embedding of m x, so with 0/1 weights the
    similarity is minus the misfit of the masked coefficients.
    """
    keep = ~((np.asarray(k1) == 0) & (np.asarray(k2) == 0)) if mask_mean_mode else np.ones(len(k1), bool)
    weight = keep.astype(np.float64)
    if prior_scale is not None:
        scale = np.asarray(prior_scale, np.float64)
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError("similarity weights from the prior need a positive prior_scale for every mode")
        weight = weight * np.sqrt(np.mean(scale**2)) / scale
    weight = np.concatenate([weight, weight])
    if kind == "quadratic":
        rows, cols = np.triu_indices(len(weight))
        weight = np.concatenate([weight, weight[rows] * weight[cols], [1.0]])
    return weight.astype(np.float32)


def track_features(positions, kind: str):
    """Returns raw (unstandardised) per-observation features `(..., obs, feature)`.

    Parameters
    ----------
    positions
        unwrapped `(..., obs, 2)`.
    kind
        one of "position", "increments", "sincos", "increments+sincos".
    """
    parts = []
    if kind == "position":
        parts.append(positions)
    if "increments" in kind:
        steps = positions[..., 1:, :] - positions[..., :-1, :]
        parts.append(jnp.concatenate([steps[..., :1, :], steps], axis=-2))
    if "sincos" in kind:
        n = jnp.arange(1, N_HARMONICS + 1, dtype=positions.dtype)
        phase = 2.0 * jnp.pi * (positions[..., None]
                                * n.reshape((1,) * positions.ndim + (-1,)))  # (..., obs, 2, harmonic)
        parts += [jnp.sin(phase).reshape(*phase.shape[:-2], -1), jnp.cos(phase).reshape(*phase.shape[:-2], -1)]
    return jnp.concatenate(parts, axis=-1)


class FeatureStats(nnx.Variable):
    """Non-trainable standardisation statistics of the input features (saved with the model)."""


def _xla_attention(query, key, value, bias=None, mask=None, **unused):
    """jax.nn.dot_product_attention in the signature nnx.MultiHeadAttention calls (no dropout)."""
    return jax.nn.dot_product_attention(query, key, value, bias=bias, mask=mask)


def _cudnn_attention(query, key, value, bias=None, mask=None, **unused):
    """The same function by cuDNN's fused attention, which never forms the (token, token) weights.

    The paper preset's 1000 tokens make those weights most of a step's memory traffic. The fused
    kernel exists on NVIDIA GPUs only: on any other backend XLA's kernel computes the same function.
    """
    implementation = "cudnn" if jax.default_backend() == "gpu" else "xla"
    return jax.nn.dot_product_attention(query, key, value, bias=bias, mask=mask, implementation=implementation)


# Module-level functions, not partials: the model's graph definition is a static jit argument, so its
# attention function must compare equal across builds for compiled steps to be reused.
_ATTENTION = {"xla": _xla_attention, "cudnn": _cudnn_attention}


def sinusoidal_positions(n_tokens: int, d_model: int) -> np.ndarray:
    """Returns the fixed sinusoidal position table `(token, d_model)` of Vaswani et al."""
    position = np.arange(n_tokens)[:, None]
    rate = np.exp(-np.log(10_000.0) * np.arange(0, d_model, 2) / d_model)[None, :]
    table = np.zeros((n_tokens, d_model), np.float32)
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)[:, : d_model // 2]
    return table


class Block(nnx.Module):
    """A pre-LayerNorm residual block: x + MHA(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int, dtype, *, rngs: nnx.Rngs, attention: str = "xla"):
        self.norm1 = nnx.LayerNorm(d_model, dtype=dtype, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(n_heads, d_model, dtype=dtype,
                                                attention_fn=_ATTENTION[attention],
                                                decode=False, keep_rngs=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(d_model, dtype=dtype, rngs=rngs)
        self.hidden = nnx.Linear(d_model, mlp_ratio * d_model, dtype=dtype, rngs=rngs)
        self.out = nnx.Linear(mlp_ratio * d_model, d_model, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.out(jax.nn.gelu(self.hidden(self.norm2(x))))


class TrajectoryTransformer(nnx.Module):
    """The learned trajectory encoder g_v: positions `(batch, obs, 2)` -> `(batch, n_e)`."""

    def __init__(self, n_obs: int, n_embed: int, config: TrainConfig, *, rngs: nnx.Rngs, modes: dict | None = None):
        """Builds g_v for tracks of `n_obs` observations and embedding size n_e = `n_embed`.

        Parameters
        ----------
        modes
            with config.physics, the dataset's "time" `(obs,)`, "k1", "k2", "omega" and
            "prior_scale" `(mode,)` (e.g. PairedData.meta()), stored as model constants.

        Raises
        ------
        ValueError
            if the patch length does not divide n_obs, or physics lacks `modes`.
        """
        config.validate()
        if n_obs % config.patch:
            raise ValueError(f"patch = {config.patch} does not divide the {n_obs} observations")
        self.n_obs, self.patch = n_obs, config.patch
        self.features, self.pooling = config.features, config.pooling
        self.dtype = _DTYPES[config.compute_dtype]
        width = _FEATURE_WIDTH[config.features]
        n_tokens = n_obs // config.patch + (config.pooling == "cls")
        self.feature_mean = FeatureStats(jnp.zeros((width,), jnp.float32))
        self.feature_std = FeatureStats(jnp.ones((width,), jnp.float32))
        self.lift = nnx.Linear(width * config.patch, config.d_model, dtype=self.dtype, rngs=rngs)
        if config.positional == "learned":
            self.position = nnx.Param(0.02 * jax.random.normal(rngs.params(), (n_tokens, config.d_model), jnp.float32))
        else:
            self.position = FeatureStats(jnp.asarray(sinusoidal_positions(n_tokens, config.d_model)))
        if config.pooling == "cls":
            self.cls = nnx.Param(jnp.zeros((1, 1, config.d_model), jnp.float32))
        self.blocks = nnx.List([Block(config.d_model, config.n_heads, config.mlp_ratio, self.dtype, rngs=rngs,
                                      attention=config.attention)
                                for _ in range(config.n_blocks)])
        self.norm = nnx.LayerNorm(config.d_model, dtype=self.dtype, rngs=rngs)
        self.head = nnx.Linear(config.d_model, n_embed, dtype=self.dtype, rngs=rngs)
        self.physics = config.physics
        if config.physics:
            self._init_physics(n_obs, n_embed, config, modes)

    def _init_physics(self, n_obs: int, n_embed: int, config: TrainConfig, modes: dict | None) -> None:
        if modes is None or len(modes["time"]) != n_obs or 2 * len(modes["k1"]) != n_embed:
            raise ValueError("physics features need the dataset's time (obs,) and modes k1, k2, omega, prior_scale")
        self.noise, self.stride = config.physics_noise, config.physics_stride
        constant = {name: FeatureStats(jnp.asarray(np.asarray(modes[name]), jnp.float32))
                    for name in ("time", "k1", "k2", "omega")}
        self.time, self.k1, self.k2, self.omega = (constant[n] for n in ("time", "k1", "k2", "omega"))
        self.prior_sd = FeatureStats(jnp.asarray(physics.prior_sd_of(modes["prior_scale"])))
        self.gain = nnx.Param(jnp.ones((n_embed,), jnp.float32))
        self.head.kernel[...] = jnp.zeros_like(self.head.kernel[...])

    def physics_estimate(self, positions):
        """Returns theta_hat `(batch, n_e)` for unwrapped positions `(batch, obs, 2)` (physics.py)."""
        return physics.batched_posterior_mean(positions.astype(jnp.float32), self.time[...], self.k1[...],
                                              self.k2[...], self.omega[...], self.prior_sd[...],
                                              self.noise, self.stride)

    def set_feature_stats(self, positions) -> None:
        """Sets the feature standardisation from sample tracks `(sample, obs, 2)` (in place)."""
        feats = np.asarray(track_features(jnp.asarray(positions, jnp.float32), self.features))
        feats = feats.reshape(-1, feats.shape[-1])
        self.feature_mean[...] = jnp.asarray(feats.mean(0), jnp.float32)
        self.feature_std[...] = jnp.asarray(np.maximum(feats.std(0), 1e-6), jnp.float32)

    def __call__(self, positions, estimate=None):
        """Returns g_v(v), float32 `(batch, n_e)` for unwrapped positions `(batch, obs, 2)`.

        Parameters
        ----------
        estimate
            optional precomputed `physics_estimate(positions)` (physics models only).

        Raises
        ------
        ValueError
            if positions are not `(batch, n_obs, 2)`.
        """
        x = self._tokens(positions)
        pooled = {"last": lambda: x[:, -1], "cls": lambda: x[:, 0], "mean": lambda: jnp.mean(x, axis=1)}[self.pooling]()
        return self._output(self.head(pooled).astype(jnp.float32), positions, estimate)

    def points(self, positions, estimate=None):
        """Returns a set of points per track, float32 `(batch, token, n_e)`: every token projected.

        The same head and physics term as `__call__`, applied to each token instead of the pooled
        one (the kernel-set similarity, lagda/learning/kernel_set.py); a "cls" token is left out.
        With mean pooling the mean of the points is `__call__`'s output.
        """
        x = self._tokens(positions)
        x = x[:, 1:] if self.pooling == "cls" else x
        out = self.head(x).astype(jnp.float32)
        return self._output(out, positions, None if estimate is None else estimate[:, None, :], token_axis=True)

    def _output(self, out, positions, estimate, token_axis: bool = False):
        if not self.physics:
            return out
        if estimate is None:
            estimate = self.physics_estimate(positions)
            estimate = estimate[:, None, :] if token_axis else estimate
        gain = self.gain[...][None, None] if token_axis else self.gain[...][None]
        return out + jax.lax.stop_gradient(estimate) * gain

    def _tokens(self, positions):
        """Returns the token states after the last block and LayerNorm, `(batch, token, d_model)`."""
        if positions.ndim != 3 or positions.shape[1:] != (self.n_obs, 2):
            raise ValueError(f"expected positions (batch, {self.n_obs}, 2), got {positions.shape}")
        feats = track_features(positions.astype(jnp.float32), self.features)
        feats = (feats - self.feature_mean[...][None, None]) / self.feature_std[...][None, None]
        batch = feats.shape[0]
        tokens = feats.reshape(batch, self.n_obs // self.patch, -1).astype(self.dtype)
        x = self.lift(tokens)
        if self.pooling == "cls":
            x = jnp.concatenate([jnp.broadcast_to(self.cls[...], (batch, 1, x.shape[-1])).astype(x.dtype), x], axis=1)
        x = x + self.position[...][None].astype(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


def encode_track_points(model, positions, estimate=None, times=None, mask=None):
    """Returns one set of points per field, `(batch, drifter * token, n_e)` (unnormalised).

    The union of the field's tracks' token points (TrajectoryTransformer.points); a SetEncoder,
    which pools its tokens into sufficient statistics first, gives the singleton {g_v}.

    Parameters
    ----------
    positions
        unwrapped `(batch, drifter, obs, 2)`
    estimate
        optional `(batch, drifter, n_e)`.
    times, mask
        as in `encode_tracks` (set encoder only).
    """
    if positions.ndim != 4:
        raise ValueError(f"expected positions (batch, drifter, obs, 2), got {positions.shape}")
    if isinstance(model, SetEncoder):
        return model(positions, times, mask)[:, None, :]
    if times is not None or mask is not None:
        raise ValueError("the transformer encoder reads dense tracks on the training grid: no times or mask")
    batch, n_drifters = positions.shape[:2]
    if estimate is not None:
        estimate = estimate.reshape(batch * n_drifters, -1)
    points = model.points(positions.reshape(batch * n_drifters, *positions.shape[2:]), estimate)
    return points.reshape(batch, n_drifters * points.shape[1], points.shape[2])


def encode_tracks(model, positions, estimate=None, times=None, mask=None):
    """Returns one embedding per field, `(batch, n_e)`.

    A TrajectoryTransformer embeds each track and averages its drifters' g_v: averaging
    per-track embeddings treats a field's drifters as a set (invariant to their order), the
    set-similarity idea of the SLIP/set-CLIP seed paper; with one drifter it is g_v. A
    SetEncoder pools all drifters' tokens itself and reads `times` and `mask`.

    Parameters
    ----------
    positions
        unwrapped `(batch, drifter, obs, 2)`.
    estimate
        optional precomputed physics estimates `(batch, drifter, n_e)` (transformer).
    times, mask
        optional, broadcastable to `(batch, drifter, obs)` (set encoder only;
        default: the dataset's time grid, every observation valid).

    Raises
    ------
    ValueError
        if positions are not 4-dimensional, or times/mask are given to a transformer.
    """
    if positions.ndim != 4:
        raise ValueError(f"expected positions (batch, drifter, obs, 2), got {positions.shape}")
    if isinstance(model, SetEncoder):
        return model(positions, times, mask)
    if times is not None or mask is not None:
        raise ValueError("the transformer encoder reads dense tracks on the training grid: no times or mask")
    batch, n_drifters = positions.shape[:2]
    if estimate is not None:
        estimate = estimate.reshape(batch * n_drifters, -1)
    per_track = model(positions.reshape(batch * n_drifters, *positions.shape[2:]), estimate)
    return jnp.mean(per_track.reshape(batch, n_drifters, -1), axis=1)
