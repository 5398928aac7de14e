"""Physics-informed track feature: the linear-Gaussian posterior mean of theta = (Re c, Im c).

An option BEYOND the paper (section 6.3 uses a plain transformer on raw positions). The
velocity at a known point is linear in the coefficients (eq. 59 with w = (-d psi/dy, d psi/dx)):

    w(z, t) = Re sum_k c_k exp(i omega_k t) exp(2 pi i k.z) 2 pi i (-k2, k1) = G(z, t) theta,

so finite-difference velocities v_j = (z_{j+s} - z_j) / (t_{j+s} - t_j) at the midpoints
(z_m, t_m) of a track give a linear system G theta ~ v. With the Gaussian prior
theta ~ N(0, Lambda), Lambda = diag(a_k^2 / 2) twice, and a small velocity-error variance
sigma^2 (in prior-whitened units), the posterior mean is

    theta_hat = L (M^T M + sigma^2 I)^{-1} M^T v,   M = G L,  L = Lambda^{1/2}.

The Gram matrix M^T M spans ~10 orders of magnitude, so it is NOT formed: theta_hat comes from
the QR factorisation of the augmented matrix [[M, v], [sigma I, 0]] (float32-stable; forming
the normal equations in float32 loses most of the retrieval accuracy, measured).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def design_matrix(positions, time, k1, k2, omega, stride: int):
    """Returns (G `(interval, 2, 2 * mode)`, v `(interval, 2)`) of one unwrapped track.

    Args:
        positions: `(obs, 2)` unwrapped positions at `time` `(obs,)`.
        k1, k2, omega: `(mode,)` wavevectors and frequencies.
        stride: observations per finite-difference interval (every `stride`-th position is used).
    """
    z, t = positions[::stride], time[::stride]
    v = (z[1:] - z[:-1]) / (t[1:] - t[:-1])[:, None]
    mid, t_mid = 0.5 * (z[1:] + z[:-1]), 0.5 * (t[1:] + t[:-1])
    phase = omega[None, :] * t_mid[:, None] + 2.0 * jnp.pi * (mid[:, 0:1] * k1[None, :] + mid[:, 1:2] * k2[None, :])
    g_re, g_im = -2.0 * jnp.pi * jnp.sin(phase), -2.0 * jnp.pi * jnp.cos(phase)  # d w / d Re c_k, d Im c_k
    direction = jnp.stack([-k2, k1])  # (2, mode): w_k is along (-k2, k1)
    g = jnp.concatenate([g_re[:, None, :] * direction[None], g_im[:, None, :] * direction[None]], axis=-1)
    return g, v


def posterior_mean(positions, time, k1, k2, omega, prior_sd, noise: float, stride: int):
    """Returns theta_hat, float32 `(2 * mode,)`: the posterior mean of (Re c, Im c) given one track.

    Args:
        positions: unwrapped `(obs, 2)`; time: `(obs,)`.
        prior_sd: `(2 * mode,)` prior standard deviations of (Re c, Im c), i.e. a_k / sqrt(2) twice.
        noise: sigma^2, the velocity-error variance relative to the prior (whitened units).
        stride: observations per finite-difference interval.
    """
    g, v = design_matrix(positions, time, k1, k2, omega, stride)
    n = g.shape[-1]
    weight = jnp.sqrt(jnp.asarray(stride, g.dtype))  # each interval counts for its length
    m = (g * prior_sd[None, None, :]).reshape(-1, n) * weight
    rhs = v.reshape(-1, 1) * weight
    augmented = jnp.concatenate([jnp.concatenate([m, rhs], axis=1),
                                 jnp.concatenate([jnp.sqrt(noise) * jnp.eye(n, dtype=g.dtype), jnp.zeros((n, 1), g.dtype)], axis=1)])
    r = jnp.linalg.qr(augmented, mode="r")
    eta = jax.scipy.linalg.solve_triangular(r[:n, :n], r[:n, n], lower=False)
    return eta * prior_sd


def batched_posterior_mean(positions, time, k1, k2, omega, prior_sd, noise: float, stride: int):
    """Returns `(batch, 2 * mode)` posterior means for tracks `(batch, obs, 2)` (vmapped, no gradient)."""
    positions = jax.lax.stop_gradient(positions)
    fn = jax.vmap(posterior_mean, in_axes=(0, None, None, None, None, None, None, None))
    return fn(positions, time, k1, k2, omega, prior_sd, noise, stride)


def prior_sd_of(prior_scale) -> np.ndarray:
    """Returns float32 `(2 * mode,)` standard deviations of (Re c, Im c) from a_k = sqrt(E|c_k|^2)."""
    sd = np.asarray(prior_scale, np.float64) / np.sqrt(2.0)
    return np.concatenate([sd, sd]).astype(np.float32)
