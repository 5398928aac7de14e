"""The observation operator of the position methods (var, enkf, hybrid's refinement, sample): one field's
tracks arranged for the simulator, and the RK4 positions at the observed slots with their sensitivity
to the coefficients x = (Re c, Im c) (lagda.assimilation.model).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.model import to_complex
from simulate.flow import TWO_PI, current_mask, temporal_factor, velocity
from simulate.integrate import explicit_rk_step, record


@dataclasses.dataclass(frozen=True)
class Observations:
    """One field's tracks arranged for the simulator (all arrays numpy).

    Drifter d starts at z0[d] at time t0[d] (its release, or its first valid observation);
    its valid observation j is simulated state index[d, j] of `record` with `stride`.
    """

    z0: np.ndarray  # (drifter, 2)
    t0: np.ndarray  # (drifter,)
    index: np.ndarray  # int (drifter, obs)
    mask: np.ndarray  # float (drifter, obs): 1 where observed (and not the start point)
    target: np.ndarray  # (drifter, obs, 2), 0 where masked
    steps: np.ndarray  # int (drifter, obs) steps since the start, 0 where masked
    stride: int
    n_sim: int


def valid_mask(positions, times) -> np.ndarray:
    """Returns bool `(drifter, obs)`: position and time both finite."""
    return np.all(np.isfinite(positions), axis=-1) & np.isfinite(times)


def arrange(positions, times, release, dt: float) -> Observations:
    """Returns the tracks of one field arranged for the simulator.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped, NaN where missing.
    times
        `(drifter, obs)`, multiples of dt (checked by lagda.io.tracks.check_fits_model).
    release
        `(drifter, 2)` release points at t = 0, or None (start at the first valid
        observation of each drifter).

    Raises
    ------
    ValueError
        if a drifter has fewer than 2 valid observations.
    """
    positions = np.asarray(positions, np.float64)
    ok = valid_mask(positions, times)
    steps_all = np.where(ok, np.rint(np.nan_to_num(times) / dt), 0).astype(np.int64)
    n_drifter = positions.shape[0]
    z0, n0 = np.zeros((n_drifter, 2)), np.zeros(n_drifter, np.int64)
    for d in range(n_drifter):
        valid = np.flatnonzero(ok[d])
        if len(valid) < 2:
            raise ValueError(f"drifter {d} has {len(valid)} valid observations; need at least 2")
        if release is not None and np.all(np.isfinite(release[d])):
            z0[d] = release[d]
        else:
            z0[d], n0[d] = positions[d, valid[0]], steps_all[d, valid[0]]
            ok[d, valid[0]] = False  # the start point is not a misfit term
    steps = np.where(ok, steps_all - n0[:, None], 0)
    if np.any(steps[ok] <= 0):
        raise ValueError("observation times must increase after the release time")
    stride = int(np.gcd.reduce(steps[ok]))
    index = np.where(ok, steps // stride - 1, 0)
    target = np.where(ok[..., None], np.nan_to_num(positions), 0.0)
    return Observations(z0, n0 * dt, index, ok.astype(np.float64), target, steps, stride,
                        int(index.max()) + 1)


def window_mask(obs: Observations, fraction: float) -> np.ndarray:
    """Returns the mask of the observations in the first `fraction` of the window."""
    limit = fraction * obs.steps.max()
    return obs.mask * (obs.steps <= limit + 0.5)


def _field(z, t, args):
    coef, k1, k2, omega, time = args
    return velocity(z, t, coef, k1, k2, omega, time)


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def simulate_observed(x, z0, t0, index, k1, k2, omega, dt, n_sim: int, stride: int, time=None):
    """Returns the simulated positions at the observation slots, `(drifter, obs, 2)`.

    The observation operator of var / enkf: RK4 (simulate.integrate) from z0 at t0 for each
    drifter, recorded every `stride` steps, gathered at `index`. Differentiable in x (2K,).
    """
    coef = to_complex(x)
    step = explicit_rk_step(_field)

    def one(z, t):
        return record(step, z, t, dt, n_sim, stride, (coef, k1, k2, omega, time))

    states = jax.vmap(one)(z0, t0)
    return jnp.take_along_axis(states, index[:, :, None], axis=1)


def _tangent_field(state, t, args):
    """Returns d/dt of (z, S = dz/dx), `(2, 1 + 2K)`: the flow and its forward sensitivity.

    The velocity is linear in x = (a, b) = (Re c, Im c): w = 2 pi (sum k2 p, -sum k1 p) with
    p_k = f_k(t) (a_k sin theta_k + b_k cos theta_k), theta_k = omega_k t + 2 pi k.z (simulate.flow.velocity_basis), so
    dS/dt = (dw/dz) S + dw/dx with dw/dx = G(z, t) and dw/dz from q_k = dp_k/dtheta_k.
    """
    x, k1, k2, omega, time = args
    n_mode = k1.shape[0]
    z, sens = state[:, 0], state[:, 1:]
    theta = omega * t + TWO_PI * (k1 * z[0] + k2 * z[1])
    factor = temporal_factor(t, time)
    sin, cos = factor * jnp.sin(theta), factor * jnp.cos(theta)
    p = x[:n_mode] * sin + x[n_mode:] * cos
    q = x[:n_mode] * cos - x[n_mode:] * sin
    w = TWO_PI * jnp.stack([jnp.sum(k2 * p), -jnp.sum(k1 * p)])
    dw_dz = TWO_PI**2 * jnp.stack([jnp.stack([jnp.sum(k2 * q * k1), jnp.sum(k2 * q * k2)]),
                                   jnp.stack([-jnp.sum(k1 * q * k1), -jnp.sum(k1 * q * k2)])])
    basis = jnp.concatenate([sin, cos])
    dw_dx = TWO_PI * jnp.stack([jnp.tile(k2, 2) * basis, -jnp.tile(k1, 2) * basis])
    current = current_mask(time)
    if current is not None:  # the uniform current (k = 0, theta = omega t): u = a cos - b sin, v = a sin + b cos
        cos_c, sin_c = current * cos, current * sin
        w = w + jnp.stack([jnp.sum(x[:n_mode] * cos_c - x[n_mode:] * sin_c),
                           jnp.sum(x[:n_mode] * sin_c + x[n_mode:] * cos_c)])
        dw_dx = dw_dx + jnp.stack([jnp.concatenate([cos_c, -sin_c]), jnp.concatenate([sin_c, cos_c])])
    return jnp.concatenate([w[:, None], dw_dz @ sens + dw_dx], axis=1)


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def simulate_observed_tangent(x, z0, t0, index, k1, k2, omega, dt, n_sim: int, stride: int, time=None):
    """Returns (positions `(drifter, obs, 2)`, dpositions/dx `(drifter, obs, 2, 2K)`) at the observation slots.

    RK4 on the state augmented with its sensitivity: for an explicit Runge-Kutta scheme this is
    exactly the derivative of the discrete RK4 map of `simulate_observed` (forward-mode
    differentiation commutes with the scheme), at the cost of one run instead of 2K tangents.
    """
    args = (x, jnp.asarray(k1, x.dtype), jnp.asarray(k2, x.dtype), omega, time)
    step = explicit_rk_step(_tangent_field)

    def one(z, t):
        start = jnp.concatenate([z[:, None], jnp.zeros((2, x.shape[0]), x.dtype)], axis=1)
        return record(step, start, t, dt, n_sim, stride, args)

    states = jnp.take_along_axis(jax.vmap(one)(z0, t0), index[:, :, None, None], axis=1)
    return states[..., 0], states[..., 1:]
