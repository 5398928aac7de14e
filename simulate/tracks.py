"""Drifter tracks of many fields: the forward map coefficients -> positions.

`simulate_tracks` is the reference: the one-point `velocity` of `simulate.flow`, stepped by
the generic RK4 of `simulate.integrate`, vmapped over drifters and fields. It is the
definition the other integrators are tested against, and differentiable (assimilation uses it). `fast_tracks`
(simulate.kernels), re-exported here, computes the same tracks faster for rectangular mode sets
(docs/results/simulator.md).
"""

from __future__ import annotations

import jax

from simulate.flow import velocity
from simulate.integrate import record, stochastic_rk_step


def _field(z, t, args):
    coef, k1, k2, omega = args
    return velocity(z, t, coef, k1, k2, omega)


def simulate_tracks(coef, release, k1, k2, omega, dt, n_obs: int, stride: int, diffusivity: float = 0.0, key=None):
    """Returns unwrapped drifter positions `(sample, drifter, obs, 2)`, RK4 in the field (58)-(59).

    Observation j = 1..n_obs is the position at t_j = j * stride * dt (release at t = 0). Everything is in
    model units: positions in domain lengths of the torus [0, 1)^2, times in model time units.

    Parameters
    ----------
    coef : array_like
        Complex Fourier coefficients `(sample, mode)`.
    release : array_like
        Release points `(sample, drifter, 2)`, (x, y) in domain lengths.
    k1 : array_like
        Integer wavenumbers `(mode,)` in the x direction.
    k2 : array_like
        Integer wavenumbers `(mode,)` in the y direction.
    omega : array_like
        Frequencies `(mode,)`, radians per model time unit.
    dt : float
        RK4 time step, model time units.
    n_obs : int
        Number of recorded observations per track (static).
    stride : int
        RK4 steps between two recorded observations (static).
    diffusivity : float, default 0
        Brownian forcing kappa, domain lengths^2 per model time unit (static); 0 gives plain RK4.
    key : jax.Array, optional
        PRNG key of the Brownian increments (required when `diffusivity` > 0).

    Returns
    -------
    jax.Array
        Positions `(sample, drifter, obs, 2)`, unwrapped (not reduced mod 1), domain lengths.

    Raises
    ------
    ValueError
        If the shapes of `coef` and `release` do not match (both shapes quoted), or `diffusivity` > 0 without
        a `key`.

    Examples
    --------
    A uniform eastward current u = 1 (the one mode k = (0, 1) with c = i / (2 pi)), from the origin:

    >>> import numpy as np
    >>> coef = np.array([[1j / (2 * np.pi)]])  # (sample, mode)
    >>> z = simulate_tracks(coef, np.zeros((1, 1, 2)), np.array([0]), np.array([1]), np.zeros(1), 0.01, 3, 10)
    >>> np.round(np.asarray(z[0, 0], np.float64), 6).tolist()  # x = t at t = 0.1, 0.2, 0.3
    [[0.1, 0.0], [0.2, 0.0], [0.3, 0.0]]
    """
    if coef.ndim != 2 or release.ndim != 3 or release.shape[0] != coef.shape[0] or release.shape[2] != 2:
        raise ValueError(f"expected coef (sample, mode) and release (sample, drifter, 2), got {coef.shape} and "
                         f"{release.shape}")
    if diffusivity > 0 and key is None:
        raise ValueError("a PRNG key is required when diffusivity > 0")
    step = stochastic_rk_step(_field, diffusivity)
    key = jax.random.key(0) if key is None else key
    n_samples, n_drifters = release.shape[:2]
    keys = jax.random.split(key, n_samples * n_drifters).reshape(n_samples, n_drifters)

    def one_track(z0, c, k):
        return record(step, z0, 0.0, dt, n_obs, stride, (c, k1, k2, omega), k)

    per_drifter = jax.vmap(one_track, in_axes=(0, None, 0))
    return jax.vmap(per_drifter, in_axes=(0, 0, 0))(release, coef, keys)
