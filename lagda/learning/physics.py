"""Physics-informed track feature: the linear-Gaussian posterior mean of theta = (Re c, Im c).

An option BEYOND the paper (section 6.3 uses a plain transformer on raw positions). The
velocity at a known point is linear in the coefficients (eq. 59 with w = (-d psi/dy, d psi/dx)):

    w(z, t) = Re sum_k c_k exp(i omega_k t) exp(2 pi i k.z) 2 pi i (-k2, k1) = G(z, t) theta,

so finite-difference velocities v_j = (z_{j+s} - z_j) / (t_{j+s} - t_j) at the midpoints
(z_m, t_m) of a track give a linear system G theta ~ v. With the Gaussian prior
theta ~ N(0, Lambda), Lambda = diag(a_k^2 / 2) twice, and a small velocity-error variance
sigma^2 (in prior-whitened units), the posterior mean is

    theta_hat = L (M^T M + sigma^2 I)^{-1} M^T v,   M = G L,  L = Lambda^{1/2}.

The Gram matrix M^T M spans ~10 orders of magnitude, so in float32 the normal equations
lose most of the retrieval accuracy (docs/results/training.md), and a float32 QR of M is
accurate but much slower on CPU under XLA. So theta_hat is computed in
float64 numpy (BLAS Gram matrices, batched LAPACK solves) and called from JAX through
`jax.pure_callback`: it depends on the data only, so it needs no gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simulate.flow import velocity_basis


def design_matrix(positions, time, k1, k2, omega, stride: int):
    """Returns float64 (G `(..., interval, 2, 2 * mode)`, v `(..., interval, 2)`) of unwrapped tracks.

    G is simulate.flow.velocity_basis at the interval midpoints, v the finite-difference velocities.

    Parameters
    ----------
    positions
        `(..., obs, 2)` unwrapped positions at `time` `(obs,)`.
    k1, k2, omega
        `(mode,)` wavevectors and frequencies.
    stride
        observations per finite-difference interval (every `stride`-th position is used).
    """
    z = np.asarray(positions, np.float64)[..., ::stride, :]
    t = np.asarray(time, np.float64)[::stride]
    v = (z[..., 1:, :] - z[..., :-1, :]) / (t[1:] - t[:-1])[:, None]
    mid, t_mid = 0.5 * (z[..., 1:, :] + z[..., :-1, :]), 0.5 * (t[1:] + t[:-1])
    return velocity_basis(mid, t_mid, k1, k2, omega), v


def posterior_mean(positions, time, k1, k2, omega, prior_sd, noise: float, stride: int) -> np.ndarray:
    """Returns theta_hat, float32 `(batch, 2 * mode)`: posterior means of (Re c, Im c) given tracks.

    Parameters
    ----------
    positions
        unwrapped `(batch, obs, 2)`
    time
        `(obs,)`.
    prior_sd
        `(2 * mode,)` prior standard deviations of (Re c, Im c), i.e. a_k / sqrt(2) twice.
    noise
        sigma^2, the velocity-error variance relative to the prior (whitened units).
    stride
        observations per finite-difference interval.
    """
    g, v = design_matrix(positions, time, k1, k2, omega, stride)
    sd = np.asarray(prior_sd, np.float64)
    batch, n = g.shape[0], g.shape[-1]
    m = (g * sd).reshape(batch, -1, n) * np.sqrt(stride)  # each interval counts for its length
    rhs = v.reshape(batch, -1, 1) * np.sqrt(stride)
    gram = np.matmul(m.transpose(0, 2, 1), m) + noise * np.eye(n)
    eta = np.linalg.solve(gram, np.matmul(m.transpose(0, 2, 1), rhs))[..., 0]
    return (eta * sd).astype(np.float32)


def batched_posterior_mean(positions, time, k1, k2, omega, prior_sd, noise: float, stride: int):
    """Returns `(batch, 2 * mode)` posterior means for tracks `(batch, obs, 2)`, usable under jit.

    A `jax.pure_callback` into the float64 numpy `posterior_mean`; no gradient flows through it.
    """
    positions = jax.lax.stop_gradient(positions)
    out = jax.ShapeDtypeStruct((positions.shape[0], 2 * k1.shape[0]), jnp.float32)

    def host(z, t, a, b, w, sd):
        return posterior_mean(z, t, a, b, w, sd, noise, stride)

    return jax.pure_callback(host, out, positions, time, k1, k2, omega, prior_sd, vmap_method="sequential")


def prior_sd_of(prior_scale) -> np.ndarray:
    """Returns float32 `(2 * mode,)` standard deviations of (Re c, Im c) from a_k = sqrt(E|c_k|^2)."""
    sd = np.asarray(prior_scale, np.float64) / np.sqrt(2.0)
    return np.concatenate([sd, sd]).astype(np.float32)
