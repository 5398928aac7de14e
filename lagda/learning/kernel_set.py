"""Similarity of sets of points through a kernel, computed with random Fourier features.

Uesaka et al., "Understanding multimodal contrastive learning through pointwise mutual
information", section 5 (eqs. 12-14, Algorithm 1). Each side of a pair is a set of
L2-normalised points in R^d; the similarity of two sets is the RKHS inner product of their
kernel mean embeddings (eq. 12/13),

    g~(X, Y) = (M_X M_Y)^-1 sum_ij k(x_i, y_j),    k(u, v) = alpha1 u.v + alpha2 k~(u, v)  (eq. 14),

with k~ Gaussian exp(-|u - v|^2 / 2 sigma^2) or inverse multiquadric c / sqrt(c^2 + |u - v|^2).
Random Fourier features (Rahimi and Recht) z(v) = sqrt(2/D) cos(omega_t . v + beta_t), t = 1..D,
beta_t ~ U[0, 2 pi), give E[z(u).z(v)] = k~(u - v) when omega is drawn from the kernel's
spectral law (Bochner): omega ~ N(0, sigma^-2 I) (Gaussian); omega = (eta / c) xi with
eta ~ N(0, 1), xi ~ N(0, I) (IMQ, because c / sqrt(c^2 + r^2) = E_eta exp(-eta^2 r^2 / 2 c^2)).
The paper prints the constant sqrt(1/(2D)), which gives k~/4, not k~; we use sqrt(2/D).
Both sides must use the same draw (omega, beta): independent draws make E[z(u).z'(v)] = 0.

The embedding of a set is `set_embedding` = [sqrt(alpha1) mean(x_i), sqrt(alpha2) mean(z(x_i))]
(means not re-normalised), so that inner products of embeddings reproduce the similarity.

For lagda the coefficient side g_u is fixed: its set is the singleton {g_u(c) / |g_u(c)|}
(the default) or the time-indexed set {normalise(c_k e^{i omega_k t_m})}_m (`coefficient_points`);
the trajectory side is every token of the encoder, projected and normalised
(lagda.learning.encoders.encode_track_points).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagda.learning.config import Kernel
from lagda.learning.losses import check_tau, normalise


def draw_frequencies(key, kernel: Kernel, dim: int, n_features: int, scale: float, dtype=jnp.float32):
    """Returns random-feature parameters (omega `(n_features, dim)`, beta `(n_features,)`).

    Gaussian k~ with bandwidth sigma = `scale`: omega ~ N(0, sigma^-2 I). IMQ with c = `scale`:
    omega = (eta / c) xi, eta ~ N(0, 1) and xi ~ N(0, I) independent. beta ~ U[0, 2 pi).

    Raises
    ------
    ValueError
        for an unknown kernel or a scale <= 0.
    """
    if kernel not in ("gaussian", "imq"):
        raise ValueError(f"unknown kernel {kernel!r}; valid values: gaussian, imq")
    if not scale > 0:
        raise ValueError(f"kernel scale must be > 0, got {scale}")
    key_xi, key_eta, key_beta = jax.random.split(key, 3)
    xi = jax.random.normal(key_xi, (n_features, dim), dtype)
    if kernel == "gaussian":
        omega = xi / scale
    else:
        omega = xi * jax.random.normal(key_eta, (n_features, 1), dtype) / scale
    beta = jax.random.uniform(key_beta, (n_features,), dtype, maxval=2.0 * math.pi)
    return omega, beta


def kernel_values(u, v, kernel: Kernel, scale: float):
    """Returns the exact k~(u, v) `(...)` for points `(..., d)` (Gaussian: sigma = scale; IMQ: c = scale)."""
    sq = jnp.sum((u - v) ** 2, axis=-1)
    if kernel == "gaussian":
        return jnp.exp(-sq / (2.0 * scale**2))
    return scale / jnp.sqrt(scale**2 + sq)


def random_features(points, omega, beta):
    """Returns z(v) = sqrt(2/D) cos(omega v + beta), `(..., D)` for points `(..., d)`."""
    phase = points @ omega.T + jnp.reshape(beta, (1,) * (points.ndim - 1) + (-1,))
    return math.sqrt(2.0 / omega.shape[0]) * jnp.cos(phase)


def set_embedding(points, omega, beta, alpha1: float, alpha2: float):
    """Returns [sqrt(alpha1) mean_i x_i, sqrt(alpha2) mean_i z(x_i)], `(batch, d + D)`.

    Parameters
    ----------
    points
        `(batch, M, d)` sets of M points (normalised here, eq. 12 uses unit points).
    omega, beta
        one draw of `draw_frequencies`, shared by both sides of a similarity.
    """
    unit = normalise(points)
    mean = jnp.mean(unit, axis=1)
    features = jnp.mean(random_features(unit, omega, beta), axis=1)
    return jnp.concatenate([math.sqrt(alpha1) * mean, math.sqrt(alpha2) * features], axis=-1)


def kernel_set_logits(u_points, v_points, omega, beta, alpha1: float, alpha2: float, tau=1.0):
    """Returns s_bb' = (alpha1 mean(u_b).mean(v_b') + alpha2 z(u_b).z(v_b')) / tau, `(n_u, n_v)`.

    Algorithm 1 of the kernel-set paper; the logits of L_cond (eq. 14a generalised).

    Parameters
    ----------
    u_points
        `(n_u, M_u, d)`
    v_points
        `(n_v, M_v, d)` sets of points.

    Raises
    ------
    ValueError
        if the point dimensions differ or tau <= 0.
    """
    if u_points.ndim != 3 or v_points.ndim != 3 or u_points.shape[-1] != v_points.shape[-1]:
        raise ValueError(f"expected point sets (n_u, M_u, d) and (n_v, M_v, d); got {u_points.shape} and "
                         f"{v_points.shape}")
    check_tau(tau)
    u = set_embedding(u_points, omega, beta, alpha1, alpha2)
    v = set_embedding(v_points, omega, beta, alpha1, alpha2)
    return (u @ v.T) / tau


def exact_set_similarity(u_points, v_points, kernel: Kernel, scale: float, alpha1: float, alpha2: float):
    """Returns the brute-force double sum of eq. 12 with the exact kernel (14), `(n_u, n_v)` (a reference)."""
    u, v = normalise(u_points), normalise(v_points)
    linear = jnp.einsum("amd,bnd->abmn", u, v)
    tilde = kernel_values(u[:, None, :, None, :], v[None, :, None, :, :], kernel, scale)
    return jnp.mean(alpha1 * linear + alpha2 * tilde, axis=(2, 3))


def coefficient_points(u_emb, mode_omega, times):
    """Returns the coefficient side's set of points `(batch, M, 2K)`.

    `times` None: the singleton {g_u(c)}; else `(M,)` times t_m: the set {(Re, Im)(c_k e^{i omega_k t_m})}_m.

    Parameters
    ----------
    u_emb
        `(batch, 2K)` = g_u(c) = (Re c, Im c) (already masked)
    mode_omega
        `(K,)`.
    """
    if times is None:
        return u_emb[:, None, :]
    n_mode = u_emb.shape[-1] // 2
    re, im = u_emb[:, None, :n_mode], u_emb[:, None, n_mode:]
    phase = times[:, None] * mode_omega[None, :]  # (M, K)
    cos, sin = jnp.cos(phase)[None], jnp.sin(phase)[None]
    return jnp.concatenate([re * cos - im * sin, re * sin + im * cos], axis=-1)


def coefficient_times(time, n_times: int):
    """Returns `n_times` times t_m at the centres of equal slices of the observation times `(obs,)`."""
    time = np.asarray(time, np.float64)
    index = ((np.arange(n_times) + 0.5) * len(time) / n_times).astype(int)
    return time[np.minimum(index, len(time) - 1)]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class KernelSetSimilarity:
    """A kernel set similarity with one fixed draw: the `kind` of `losses.similarity` for a trained run.

    `logits(u_emb, v_emb, tau)` scores raw coefficient embeddings g_u(c) `(n_u, 2K)` against
    set embeddings of tracks `(n_v, 2K + D)` (lagda.learning.model.embed_track_sets). Hashable
    (by the digest of its arrays), so it can be a static argument of a jitted function.
    """

    omega: np.ndarray  # (D, 2K) frequencies of the draw
    beta: np.ndarray  # (D,) phases of the draw
    alpha1: float  # weight of the linear kernel
    alpha2: float  # weight of k~
    mask: np.ndarray  # (2K,) similarity mask applied to g_u(c)
    mode_omega: np.ndarray  # (K,) mode frequencies (time-indexed coefficient sets)
    times: np.ndarray | None  # (M,) times of the coefficient set, None: the singleton

    @functools.cached_property  # a static jit argument: hashed on every call
    def _digest(self) -> bytes:
        arrays = (self.omega, self.beta, self.mask, self.mode_omega, np.zeros(0) if self.times is None else self.times)
        digest = hashlib.sha256(repr((self.alpha1, self.alpha2, self.times is None)).encode())
        for array in arrays:
            digest.update(np.ascontiguousarray(array, np.float64).tobytes())
        return digest.digest()

    def __repr__(self) -> str:
        coef_set = "singleton" if self.times is None else f"{len(self.times)} times"
        return (f"KernelSetSimilarity(D={self.omega.shape[0]}, d={self.omega.shape[1]}, alpha=({self.alpha1}, "
                f"{self.alpha2}), coefficient set: {coef_set})")

    def __hash__(self) -> int:
        return hash(self._digest)

    def __eq__(self, other) -> bool:
        return isinstance(other, KernelSetSimilarity) and self._digest == other._digest

    def coefficient_embedding(self, u_emb):
        """Returns the set embeddings `(n, 2K + D)` of raw coefficient embeddings g_u(c) `(n, 2K)`."""
        times = None if self.times is None else jnp.asarray(self.times, u_emb.dtype)
        points = coefficient_points(u_emb * jnp.asarray(self.mask, u_emb.dtype)[None],
                                    jnp.asarray(self.mode_omega, u_emb.dtype), times)
        return set_embedding(points, jnp.asarray(self.omega, u_emb.dtype), jnp.asarray(self.beta, u_emb.dtype),
                             self.alpha1, self.alpha2)

    def logits(self, u_emb, v_emb, tau=1.0):
        """Returns `(n_u, n_v)` logits s(g_u(c_i), V_j) / tau (the draw is fixed: evaluation)."""
        width = self.omega.shape[1] + self.omega.shape[0]
        if u_emb.ndim != 2 or v_emb.ndim != 2 or u_emb.shape[1] != self.omega.shape[1] or v_emb.shape[1] != width:
            raise ValueError(f"expected g_u (n_u, {self.omega.shape[1]}) and set embeddings (n_v, {width}); "
                             f"got {u_emb.shape} and {v_emb.shape}")
        check_tau(tau)
        return (self.coefficient_embedding(u_emb) @ v_emb.astype(u_emb.dtype).T) / tau
