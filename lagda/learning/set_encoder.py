"""A set encoder g_v for any observation regime: tracks with their times and masks, many drifters.

Inputs: positions `(batch, drifter, obs, 2)` (unwrapped), times broadcastable to
`(batch, drifter, obs)` and a boolean mask of the same shape (False = padding or a missing
observation; masked values are never read). Each drifter's valid observations are put first
(a stable sort of the mask) and every pair of consecutive valid observations is a token:
the increment dz_j, its duration dt_j and its midpoint (z_j, t_j). So a gap, a stride, an
irregular time grid and end padding all give the same tokens as the observations alone.

Token featurisation, with no learned parameter: the basis features
phi_j = (cos, sin)(omega_k t_j + 2 pi k . z_j) `(2K,)` at the dataset's modes and
frequencies (periodic in z, the time factors exp(i omega_k t) of eq. 59); for pairs in a chosen
basis (a dataset with a time basis) each mode's features are multiplied by its Legendre factor
f_k(t_j) (simulate.flow.temporal_factor), and a uniform-current mode (k = 0) has phi = (f_k, 0). Two pooled sums
over all tokens of all drifters of a field, divided by the total observed time T:

    P = sum_j phi_j (x) dz_j / T  `(2K, 2)`   (the matched filter: for the true velocity
                                                w = G(z, t) theta, G linear in phi, it
                                                integrates G^T w along the tracks)
    Phi = sum_j dt_j phi_j phi_j^T / T  `(2K, 2K)`  (second moments: the Gram of G^T G)
    E = sum_j |dz_j|^2 / (dt_j T)  (the mean squared finite-difference speed)

Sums over tokens and drifters make the encoder invariant to drifter order, to padding and
to the number of observations. The head is learned:

- "ridge": a learned design G_j = phi_j W, W `(2K, 2, r)`, gives S = sum_c W_c^T Phi W_c and
  b = sum_c W_c^T P_c, and the output is U (S + lambda I)^{-1} b, a closed-form ridge
  (in-context least-squares) layer as in differentiable-solver meta-learning; W, U and
  lambda (relative to tr S / r; log lambda affine in three regime features: roughness of
  the track, mean token duration, token count, so noisy or sparse tracks get more
  regularisation) are trained from scratch, nothing of the physics is given (config.set_init
  "random"), or start from the design of the velocity in the features (`velocity_design`, "basis":
  the head starts as the least-squares inversion of the increments, with an identity readout).
- "mlp": an MLP on the flattened (upper-triangle Phi, P).
- "misfit": a learned design W `(2K, 2, 2K)` as in "ridge" (random, or `velocity_design` with set_init "basis"),
  and the output is the quadratic form of the misfit of the increments to the velocity phi_j W x of
  coefficients x = (Re c, Im c), sum_j dt_j |dz_j / dt_j - phi_j W x|^2 / T = E - 2 b.x + x^T S x:
  g_v = (2 b, -triangle(S), -E) `(2K + K (2K + 1) + 1,)`, whose inner product with the quadratic
  coefficient embedding (`quadratic_features`, encoders.embed_coefficients) is minus the misfit. Trained with
  the inner similarity, the score is a Gaussian log-likelihood of the coefficients, quadratic in them, with a
  learned velocity model; with W = velocity_design it is exactly the velocity misfit of the finite differences
  at the token midpoints.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lagda.learning.config import TrainConfig
from simulate.flow import TimeBasis, temporal_factor, time_basis


class Constant(nnx.Variable):
    """A non-trainable model constant (modes, frequencies, observation times)."""


def tokens(positions, times, mask):
    """Returns (midpoints `(..., obs-1, 2)`, t `(..., obs-1)`, dz `(..., obs-1, 2)`, dt, valid).

    Consecutive *valid* observations of each track form a token; invalid tokens have
    dz = dt = 0, midpoint 0 and valid False.

    Parameters
    ----------
    positions
        unwrapped `(..., obs, 2)`; times and mask broadcastable to `(..., obs)`.
    """
    mask = jnp.broadcast_to(mask, positions.shape[:-1])
    times = jnp.broadcast_to(times, positions.shape[:-1]).astype(positions.dtype)
    order = jnp.argsort(~mask, axis=-1, stable=True)  # valid observations first, in order
    m = jnp.take_along_axis(mask, order, axis=-1)
    z = jnp.where(m[..., None], jnp.take_along_axis(positions, order[..., None], axis=-2), 0.0)
    t = jnp.where(m, jnp.take_along_axis(times, order, axis=-1), 0.0)
    valid = m[..., 1:] & m[..., :-1]
    dz = jnp.where(valid[..., None], z[..., 1:, :] - z[..., :-1, :], 0.0)
    dt = jnp.where(valid, t[..., 1:] - t[..., :-1], 0.0)
    mid = jnp.where(valid[..., None], 0.5 * (z[..., 1:, :] + z[..., :-1, :]), 0.0)
    t_mid = jnp.where(valid, 0.5 * (t[..., 1:] + t[..., :-1]), 0.0)
    return mid, t_mid, dz, dt, valid


def basis(mid, t_mid, k1, k2, omega, time: TimeBasis | None = None):
    """Returns phi = f_k(t) (cos, sin)(omega_k t + 2 pi k . z), `(..., 2 * mode)` (f_k = 1 without a time basis)."""
    shape = (1,) * t_mid.ndim + (-1,)
    k1, k2, omega = (jnp.reshape(a, shape) for a in (k1, k2, omega))
    phase = omega * t_mid[..., None] + 2.0 * jnp.pi * (mid[..., 0:1] * k1 + mid[..., 1:2] * k2)
    factor = temporal_factor(t_mid, time)
    return jnp.concatenate([factor * jnp.cos(phase), factor * jnp.sin(phase)], axis=-1)


def dataset_time_basis(modes: dict) -> TimeBasis | None:
    """Returns the `TimeBasis` of a dataset meta's "time_basis" (degree, start, length, current), or None."""
    spec = modes.get("time_basis")
    if not spec:
        return None
    return time_basis(spec["degree"], spec["start"], spec["length"], spec.get("current"))


def regime_features(dz, dt, valid):
    """Returns `(batch, 3)` summaries of the regime, pooled over drifters: log mean squared
    second difference of positions (noise and sampling), log mean token duration, log tokens."""
    both = valid[..., 1:] & valid[..., :-1]
    d2 = jnp.where(both[..., None], dz[..., 1:, :] - dz[..., :-1, :], 0.0)
    n2 = jnp.maximum(jnp.sum(both, axis=(1, 2)), 1)
    n1 = jnp.maximum(jnp.sum(valid, axis=(1, 2)), 1)
    rough = jnp.log(jnp.sum(d2 * d2, axis=(1, 2, 3)) / n2 + 1e-14)
    step = jnp.log(jnp.sum(dt, axis=(1, 2)) / n1 + 1e-12)
    return 0.1 * jnp.stack([rough, step, jnp.log(n1.astype(dt.dtype))], axis=-1)


def pooled_statistics(positions, times, mask, k1, k2, omega, time: TimeBasis | None = None):
    """Returns (P `(batch, 2K, 2)`, Phi `(batch, 2K, 2K)`, regime features `(batch, 3)`, E `(batch,)`),
    pooled over tokens and drifters (E: the mean squared finite-difference speed, sum |dz|^2 / (dt T)).

    Parameters
    ----------
    positions
        unwrapped `(batch, drifter, obs, 2)`; times, mask broadcastable to `(batch, drifter, obs)`; k1, k2, omega
        `(mode,)`
    time
        the modes' time basis, or None.
    """
    mid, t_mid, dz, dt, valid = tokens(positions, times, mask)
    phi = basis(mid, t_mid, k1, k2, omega, time) * valid[..., None]  # (batch, drifter, token, 2K)
    total = jnp.maximum(jnp.sum(dt, axis=(1, 2)), 1e-12)[:, None, None]
    p = jnp.einsum("bdjf,bdjc->bfc", phi, dz, precision="highest") / total
    gram = jnp.einsum("bdjf,bdjg->bfg", phi * dt[..., None], phi, precision="highest") / total
    energy = jnp.sum(jnp.where(valid, jnp.sum(dz * dz, axis=-1) / jnp.where(valid, dt, 1.0), 0.0), axis=(1, 2))
    return p, gram, regime_features(dz, dt, valid), energy / total[:, 0, 0]


def velocity_design(k1, k2, current=None) -> np.ndarray:
    """Returns W `(2K, 2, 2K)`: the velocity (u, v) of coefficients x = (Re c, Im c) is phi W x at every token.

    For c = a + i b of psi = f(t) Re(c exp(2 pi i k.z)): u = -dpsi/dy = 2 pi k2 (a f sin + b f cos), v = dpsi/dx =
    -2 pi k1 (a f sin + b f cos), phi = (f cos, f sin); for the uniform current (k = 0): (u, v) = f (a, b).

    Parameters
    ----------
    k1, k2
        `(mode,)`
    current
        `(mode,)` 1 (or True) where the mode is the uniform current, or None.
    """
    k1, k2 = np.asarray(k1, np.float64), np.asarray(k2, np.float64)
    n = k1.size
    current = np.zeros(n, bool) if current is None else np.asarray(current, bool)
    design = np.zeros((2 * n, 2, 2 * n))
    m = np.arange(n)
    spatial = m[~current]
    for feature, coefficient in ((n + spatial, spatial), (spatial, n + spatial)):  # f sin carries a, f cos b
        design[feature, 0, coefficient] = 2 * np.pi * k2[spatial]
        design[feature, 1, coefficient] = -2 * np.pi * k1[spatial]
    design[m[current], 0, m[current]] = 1.0
    design[m[current], 1, n + m[current]] = 1.0
    return design


def design_moments(w, p, gram):
    """Returns (S = sum_c W_c^T Phi W_c `(batch, r, r)`, b = sum_c W_c^T P_c `(batch, r)`) of a design W `(2K, 2, r)`
    and pooled P `(batch, 2K, 2)`, Phi `(batch, 2K, 2K)`: the Gram and the matched filter of the velocity phi W x."""
    s = jnp.einsum("fcr,bfg,gcs->brs", w, gram, w, precision="highest")
    return s, jnp.einsum("fcr,bfc->br", w, p, precision="highest")


def quadratic_features(x):
    """Returns (x, w_ij x_i x_j for i <= j, 1) `(..., n + n (n + 1) / 2 + 1)` of x `(..., n)`, w = 2 off the diagonal.

    So that for any symmetric A `(n, n)`, b `(n,)` and scalar c, the features' inner product with
    (2 b, A's upper triangle `triangle(A)`, c) is c + 2 b.x + x^T A x.
    """
    rows, cols = np.triu_indices(x.shape[-1])  # static: constants of the trace
    weight = jnp.asarray(np.where(rows == cols, 1.0, 2.0), x.dtype).reshape((1,) * (x.ndim - 1) + (-1,))
    return jnp.concatenate([x, x[..., rows] * x[..., cols] * weight, jnp.ones_like(x[..., :1])], axis=-1)


def triangle(matrix):
    """Returns the upper triangle `(..., n (n + 1) / 2)` of `(..., n, n)`, row by row (quadratic_features' order)."""
    rows, cols = np.triu_indices(matrix.shape[-1])
    return matrix[..., rows, cols]


def embedding_width(n_modes: int, kind: str = "re_im") -> int:
    """Returns the width n_e of g_u(c) (and of g_v) for `n_modes` modes and a TrainConfig.coef_embedding kind."""
    n = 2 * n_modes
    return n if kind == "re_im" else n + n * (n + 1) // 2 + 1


class SetEncoder(nnx.Module):
    """g_v on observation sets: positions, times, mask `(batch, drifter, obs)` -> `(batch, n_e)`."""

    physics = False  # no physics estimate (lagda.learning.model.track_estimates returns None)

    def __init__(self, n_embed: int, config: TrainConfig, modes: dict, *, rngs: nnx.Rngs):
        """Builds the encoder for the dataset's modes.

        Parameters
        ----------
        modes
            the dataset meta with "k1", "k2", "omega" `(mode,)` and "time" `(obs,)`
            (the default observation grid; PairedData.meta()), and for pairs in a chosen basis its
            "time_basis" (`dataset_time_basis`).
        """
        config.validate()
        self.k1, self.k2, self.omega = (Constant(jnp.asarray(np.asarray(modes[n]), jnp.float32))
                                        for n in ("k1", "k2", "omega"))
        chosen = dataset_time_basis(modes)  # kept as arrays: degree one-hot (mode, P + 1), window (start, length)
        self.time_select = None if chosen is None else Constant(jnp.asarray(chosen.select, jnp.float32))
        self.time_window = None if chosen is None else Constant(jnp.asarray([chosen.start, chosen.length], jnp.float32))
        self.time = Constant(jnp.asarray(np.asarray(modes["time"]), jnp.float32))
        self.n_obs = len(modes["time"])
        width = 2 * len(modes["k1"])
        self.head_kind = config.set_head
        if config.set_head == "misfit":
            if n_embed != embedding_width(width // 2, "quadratic"):
                raise ValueError(f"the misfit head needs the quadratic coefficient embedding "
                                 f"({embedding_width(width // 2, 'quadratic')} wide), got {n_embed}")
            if config.set_init == "basis":
                current = None if chosen is None else chosen.current
                design = jnp.asarray(velocity_design(modes["k1"], modes["k2"], current), jnp.float32)
            else:
                design = jax.random.normal(rngs.params(), (width, 2, width), jnp.float32) / np.sqrt(width)
            self.design = nnx.Param(design)
        elif config.set_head == "ridge":
            rank = config.set_rank or width
            key_w, key_u = rngs.params(), rngs.params()
            if config.set_init == "basis":
                if n_embed != width:
                    raise ValueError(f"set_init = 'basis' needs the embedding of the coefficients (2K = {width}), "
                                     f"got {n_embed}")
                current = None if chosen is None else chosen.current
                self.design = nnx.Param(jnp.asarray(velocity_design(modes["k1"], modes["k2"], current), jnp.float32))
                self.readout = nnx.Param(jnp.eye(width, dtype=jnp.float32))
            else:
                self.design = nnx.Param(jax.random.normal(key_w, (width, 2, rank), jnp.float32) / np.sqrt(width))
                self.readout = nnx.Param(jax.random.normal(key_u, (rank, n_embed), jnp.float32) / np.sqrt(rank))
            self.log_ridge = nnx.Param(jnp.asarray(np.log(config.set_ridge), jnp.float32))
            self.ridge_slope = nnx.Param(jnp.zeros((3,), jnp.float32))  # log lambda varies with the regime
        else:
            n_in = width * (width + 1) // 2 + 2 * width + 3
            self.norm = nnx.LayerNorm(n_in, rngs=rngs)
            self.hidden = nnx.List([nnx.Linear(n_in if i == 0 else config.set_hidden, config.set_hidden, rngs=rngs)
                                    for i in range(config.set_depth)])
            self.out = nnx.Linear(config.set_hidden, n_embed, rngs=rngs)

    def set_feature_stats(self, positions) -> None:
        """Nothing to set: the pooled features need no standardisation (the transformer's hook)."""

    def statistics(self, positions, times=None, mask=None):
        """Returns the pooled (P, Phi, regime features, E) of `pooled_statistics` (times default to the data grid)."""
        if positions.ndim != 4 or positions.shape[-1] != 2:
            raise ValueError(f"expected positions (batch, drifter, obs, 2), got {positions.shape}")
        if times is None:
            if positions.shape[2] != self.n_obs:
                raise ValueError(f"give the times of the {positions.shape[2]} observations (the default grid has "
                                 f"{self.n_obs})")
            times = self.time[...]
        mask = jnp.ones(positions.shape[:-1], bool) if mask is None else mask
        time = None if self.time_select is None else TimeBasis(self.time_select[...], *self.time_window[...])
        return pooled_statistics(positions.astype(jnp.float32), times, mask, self.k1[...], self.k2[...],
                                 self.omega[...], time)

    def head(self, p, gram, regime, energy):
        """Returns g_v `(batch, n_e)` from pooled P `(batch, 2K, 2)`, Phi `(batch, 2K, 2K)`,
        regime features `(batch, 3)` (which set the ridge lambda: noisy or sparse tracks need more) and
        E `(batch,)` (the misfit head's constant term)."""
        if self.head_kind == "misfit":
            s, b = design_moments(self.design[...], p, gram)
            return jnp.concatenate([2.0 * b, -triangle(0.5 * (s + jnp.swapaxes(s, 1, 2))), -energy[:, None]], axis=-1)
        if self.head_kind == "ridge":
            s, b = design_moments(self.design[...], p, gram)
            rank = s.shape[-1]
            scale = jnp.trace(s, axis1=1, axis2=2)[:, None, None] / rank
            eye = jnp.eye(rank, dtype=s.dtype)[None]
            log_ridge = self.log_ridge[...] + regime @ self.ridge_slope[...]
            eta = jnp.linalg.solve(s + jnp.exp(log_ridge)[:, None, None] * scale * eye, b[..., None])[..., 0]
            return eta @ self.readout[...]
        rows, cols = np.triu_indices(gram.shape[-1])  # static: constants of the trace, not model state
        x = jnp.concatenate([gram[:, rows, cols], p.reshape(p.shape[0], -1), regime], axis=-1)
        x = self.norm(x)
        for layer in self.hidden:
            x = jax.nn.gelu(layer(x))
        return self.out(x)

    def __call__(self, positions, times=None, mask=None):
        """Returns g_v, float32 `(batch, n_e)`, for tracks `(batch, drifter, obs, 2)`.

        Parameters
        ----------
        times
            broadcastable to `(batch, drifter, obs)`; None: the dataset's grid.
        mask
            bool, broadcastable likewise; None: every observation is valid.
        """
        stats = jax.lax.stop_gradient(self.statistics(positions, times, mask))
        return self.head(*stats).astype(jnp.float32)
