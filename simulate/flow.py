"""The spectral flow model on the torus T^2 = [0, 1)^2 (docs/design.md, "The forward model").

psi(z, t) = Re( sum_k c_k exp(i omega_k t) exp(2 pi i (k1 x + k2 y)) ),  w = J grad psi,
J = [[0, -1], [1, 0]], so w = (-d psi/dy, d psi/dx).

Functions here are written for one point and batched with `jax.vmap`; `many_points`
evaluates a field on many positions of many fields.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

TWO_PI = 2.0 * np.pi


def rectangular_modes(k1_range=(-3, 3), k2_range=(-3, 3)):
    """Returns integer wavevectors `(k1, k2)`, each `(mode,)`, of a rectangular mode set.

    Modes are ordered k1-major: mode index m = i1 * n2 + i2. The default is the paper's
    {-3..3}^2 (K = 49).

    Raises:
        ValueError: if a range is empty (min > max).
    """
    (a1, b1), (a2, b2) = k1_range, k2_range
    if a1 > b1 or a2 > b2:
        raise ValueError(f"empty mode set: k1 in {list(k1_range)}, k2 in {list(k2_range)} (need min <= max)")
    k1, k2 = np.meshgrid(np.arange(a1, b1 + 1), np.arange(a2, b2 + 1), indexing="ij")
    return k1.ravel().astype(np.int32), k2.ravel().astype(np.int32)


def _mode_terms(position, t, coef, k1, k2, omega):
    """Returns c_k exp(i omega_k t) exp(2 pi i k.z), complex `(mode,)`."""
    phase = omega * t + TWO_PI * (k1 * position[0] + k2 * position[1])
    return coef * jnp.exp(1j * phase)


def psi(position, t, coef, k1, k2, omega):
    """Returns the streamfunction psi(z, t), a scalar.

    Args:
        position: `(2,)` point z = (x, y), unwrapped or not (psi is 1-periodic).
        t: scalar time.
        coef: complex `(mode,)` coefficients c_k.
        k1, k2: integer `(mode,)` wavevectors.
        omega: real `(mode,)` frequencies.
    """
    return jnp.real(jnp.sum(_mode_terms(position, t, coef, k1, k2, omega)))


def velocity(position, t, coef, k1, k2, omega):
    """Returns the velocity w = J grad psi = (-d psi/dy, d psi/dx) at one point, `(2,)`.

    Worked example: k = (0, 1), c = 1, omega = 0 gives w = (2 pi sin 2 pi y, 0).
    Args as in `psi`.
    """
    terms = _mode_terms(position, t, coef, k1, k2, omega)
    dpsi_dx = jnp.real(jnp.sum(1j * TWO_PI * k1 * terms))
    dpsi_dy = jnp.real(jnp.sum(1j * TWO_PI * k2 * terms))
    return jnp.stack([-dpsi_dy, dpsi_dx])


def velocity_basis(points, t, k1, k2, omega) -> np.ndarray:
    """Returns G with w(z, t) = G x for x = (Re c, Im c): numpy float64 `(..., 2, 2 * mode)`.

    The velocity is linear in the coefficients: with c = a + i b and theta_k = omega_k t +
    2 pi k.z, u = sum_k 2 pi k2 (a_k sin theta_k + b_k cos theta_k) and v = -sum_k 2 pi k1
    (same), so G[..., 0, :] = 2 pi k2 (sin theta, cos theta), G[..., 1, :] = -2 pi k1 (same).
    Computed in float64 numpy for the linear inversions (lagda's linear method, physics feature).

    Args:
        points: `(..., 2)` positions z; t: times broadcastable to `points.shape[:-1]`.
        k1, k2, omega: `(mode,)` wavevectors and frequencies.
    """
    z = np.asarray(points, np.float64)
    k1, k2, omega = (np.asarray(a, np.float64) for a in (k1, k2, omega))
    t = np.asarray(t, np.float64)[..., None]
    theta = omega * t + TWO_PI * (z[..., 0:1] * k1 + z[..., 1:2] * k2)  # (..., mode)
    basis = TWO_PI * np.concatenate([np.sin(theta), np.cos(theta)], axis=-1)  # (..., 2K)
    # (2 pi sin) * k rather than (2 pi k) * sin: the rounding of the shipped model's physics feature
    return np.stack([basis * np.tile(k2, 2), -(basis * np.tile(k1, 2))], axis=-2)


def many_points(fn, positions, t, coef, k1, k2, omega):
    """Evaluates `psi` or `velocity` for several fields at several points.

    Args:
        fn: `psi` or `velocity`.
        positions: `(sample, point, 2)`.
        t: scalar or `(sample, point)` times.
        coef: complex `(sample, mode)`.
    Returns:
        `(sample, point)` for psi, `(sample, point, 2)` for velocity.
    """
    t = jnp.broadcast_to(jnp.asarray(t, positions.dtype), positions.shape[:-1])
    per_point = jax.vmap(fn, in_axes=(0, 0, None, None, None, None))
    return jax.vmap(per_point, in_axes=(0, 0, 0, None, None, None))(positions, t, coef, k1, k2, omega)


def grid_fields(coef, k1, k2, omega, times, n_grid):
    """Returns psi, u, v on a regular grid: each `(sample, time, y, x)`.

    Grid points are x_i = i / n_grid (i = 0..n_grid-1), likewise y. Computed as a
    separable Fourier sum, so cost is O(sample * time * mode * n_grid^2) without any
    Python loop.

    Args:
        coef: complex `(sample, mode)`; k1, k2, omega: `(mode,)`; times: `(time,)`.
    """
    grid = jnp.arange(n_grid) / n_grid
    ex = jnp.exp(1j * TWO_PI * k1[:, None] * grid[None, :])  # (mode, x)
    ey = jnp.exp(1j * TWO_PI * k2[:, None] * grid[None, :])  # (mode, y)
    et = jnp.exp(1j * omega[None, :] * times[:, None])  # (time, mode)
    amp = coef[:, None, :] * et[None, :, :]  # (sample, time, mode)
    psi_hat = jnp.einsum("stm,my,mx->styx", amp, ey, ex)
    u = -jnp.real(jnp.einsum("stm,my,mx->styx", amp * (1j * TWO_PI * k2)[None, None, :], ey, ex))
    v = jnp.real(jnp.einsum("stm,my,mx->styx", amp * (1j * TWO_PI * k1)[None, None, :], ey, ex))
    return jnp.real(psi_hat), u, v
