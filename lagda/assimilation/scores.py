"""Scores of an assimilation against the truth (`lagda evaluate --assimilation`, benchmarks).

All functions are pure: they take true coefficients `(field, mode)`, a posterior or its mean,
the model's modes and the observed `Tracks`, and return one number per field (`score_posterior`
averages over fields). Distances between positions are taken on the torus (minimum image).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.fields import grid_posterior, padded_members
from lagda.assimilation.posterior import Posterior
from lagda.io.physical import physical_fields
from lagda.io.tracks import Tracks
from simulate.flow import grid_fields, many_points, velocity
from simulate.tracks import simulate_tracks

_simulate = jax.jit(simulate_tracks, static_argnames=("dt", "n_obs", "stride", "diffusivity"))
_grid = jax.jit(grid_fields, static_argnames="n_grid")
_points = jax.jit(many_points, static_argnums=0)
Z = 1.96  # half-width of the 95% interval of a Gaussian, in standard deviations
Z_LEVEL = 0.95  # the coverage both calibrations aim at


def torus_distance(a, b) -> np.ndarray:
    """Returns |a - b| on the unit torus (minimum image), `(...)` from positions `(..., 2)`."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    d = d - np.round(d)
    return np.sqrt(np.sum(d**2, axis=-1))


def window_times(tracks: Tracks, n_times: int = 4) -> np.ndarray:
    """Returns `n_times` evenly spaced times `(time,)` from 0 to the last observation time."""
    return np.linspace(0.0, float(np.nanmax(tracks.times)), n_times)


def velocity_field_error(true_coef, coef, k1, k2, omega, times, n_grid: int = 32) -> np.ndarray:
    """Returns the relative L2 error of the velocity over the domain and window, `(field,)`.

    ||w(coef) - w(true)|| / ||w(true)||, the norm summed over the n_grid^2 grid and `times`.
    """
    _, u_t, v_t = _grid(jnp.asarray(true_coef), jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega),
                        jnp.asarray(times), n_grid=n_grid)
    _, u_e, v_e = _grid(jnp.asarray(coef), jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega), jnp.asarray(times),
                        n_grid=n_grid)
    err = np.sum(np.asarray(u_e - u_t) ** 2 + np.asarray(v_e - v_t) ** 2, axis=(1, 2, 3))
    norm = np.sum(np.asarray(u_t) ** 2 + np.asarray(v_t) ** 2, axis=(1, 2, 3))
    return np.sqrt(err / norm)


def track_velocity_error(true_coef, coef, tracks: Tracks, k1, k2, omega) -> np.ndarray:
    """Returns the relative L2 error of the velocity at the observed positions and times, `(field,)`.

    Both fields are evaluated where the drifters were seen; sums run over a field's valid
    observations.
    """
    valid = np.all(np.isfinite(tracks.positions), axis=-1) & np.isfinite(tracks.times)
    pos, t = np.where(valid[..., None], tracks.positions, 0.0), np.where(valid, tracks.times, 0.0)
    args = (jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega))
    w_t = np.asarray(_points(velocity, jnp.asarray(pos), jnp.asarray(t), jnp.asarray(true_coef)[tracks.field], *args))
    w_e = np.asarray(_points(velocity, jnp.asarray(pos), jnp.asarray(t), jnp.asarray(coef)[tracks.field], *args))
    err = np.where(valid, np.sum((w_e - w_t) ** 2, axis=-1), 0.0).sum(axis=1)
    norm = np.where(valid, np.sum(w_t**2, axis=-1), 0.0).sum(axis=1)
    n_field = np.shape(coef)[0]
    return np.sqrt(np.bincount(tracks.field, err, n_field) / np.bincount(tracks.field, norm, n_field))


def simulate_at(coef, tracks: Tracks, k1, k2, omega, dt: float, times) -> np.ndarray:
    """Returns positions `(trajectory, time, 2)` of drifters released at `tracks.release` at t = 0.

    Trajectory i follows field `coef[tracks.field[i]]`; `times` `(time,)` must be positive
    multiples of `dt` (the RK4 records every gcd of their step counts).

    Raises
    ------
    ValueError
        if the tracks have no release points.
    """
    if tracks.release is None:
        raise ValueError("re-simulating tracks needs their release points (tracks.release)")
    steps = np.round(np.asarray(times) / dt).astype(np.int64)
    stride = functools.reduce(math.gcd, steps.tolist())
    n_obs = int(steps.max() // stride)
    positions = _simulate(jnp.asarray(np.asarray(coef)[tracks.field]), jnp.asarray(tracks.release)[:, None, :],
                                jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega), dt=float(dt), n_obs=n_obs,
                          stride=stride)
    return np.asarray(positions)[:, 0, steps // stride - 1]


def _per_field_rms(dist, tracks: Tracks, n_field: int) -> np.ndarray:
    """Returns sqrt(mean dist^2) over each field's finite entries, `(field,)`."""
    ok = np.isfinite(dist)
    sq = np.where(ok, dist, 0.0) ** 2
    return np.sqrt(np.bincount(tracks.field, sq.sum(axis=1), n_field)
                   / np.bincount(tracks.field, ok.sum(axis=1), n_field))


def resimulated_track_error(coef, tracks: Tracks, k1, k2, omega, dt: float, reference=None) -> np.ndarray:
    """Returns the RMS torus distance between tracks re-simulated from `coef` and `reference`, `(field,)`.

    `reference` `(trajectory, obs, 2)` defaults to the observed positions; observation times
    are the tracks' own (padding and missing positions are skipped).
    """
    sim = resimulated_positions(coef, tracks, k1, k2, omega, dt)
    ref = tracks.positions if reference is None else reference
    return _per_field_rms(torus_distance(sim, ref), tracks, np.shape(coef)[0])


def forecast_error(true_coef, coef, tracks: Tracks, k1, k2, omega, dt: float, horizon: float = 1.5,
                   n_times: int = 10) -> np.ndarray:
    """Returns the RMS torus distance of forecast vs true drifters over (T, horizon * T], `(field,)`.

    T is the last observation time; both runs start at the release points, `n_times` times
    (multiples of dt) are compared.
    """
    t_end = float(np.nanmax(tracks.times))
    steps = np.unique(np.round(np.linspace(t_end, horizon * t_end, n_times + 1)[1:] / dt).astype(np.int64))
    times = steps * dt
    truth = simulate_at(true_coef, tracks, k1, k2, omega, dt, times)
    guess = simulate_at(coef, tracks, k1, k2, omega, dt, times)
    return _per_field_rms(torus_distance(guess, truth), tracks, np.shape(coef)[0])


def coefficient_calibration(true_coef, posterior: Posterior, k1, k2) -> np.ndarray:
    """Returns the fraction of true Re c_k, Im c_k inside mean +- 1.96 std, `(field,)`; k = (0, 0) excluded."""
    keep = ~((np.asarray(k1) == 0) & (np.asarray(k2) == 0))
    mean, truth = posterior.mean[:, keep], np.asarray(true_coef)[:, keep]
    inside_re = np.abs(truth.real - mean.real) <= Z * posterior.std_re[:, keep]
    inside_im = np.abs(truth.imag - mean.imag) <= Z * posterior.std_im[:, keep]
    return (inside_re.mean(axis=1) + inside_im.mean(axis=1)) / 2


def velocity_calibration(true_coef, posterior: Posterior, k1, k2, omega, times, n_grid: int = 32) -> np.ndarray:
    """Returns the fraction of true grid velocities u, v inside posterior mean +- 1.96 std, `(field,)`."""
    grid = grid_posterior(posterior, k1, k2, omega, times, n_grid)
    _, u_t, v_t = _grid(jnp.asarray(true_coef), jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega),
                        jnp.asarray(times), n_grid=n_grid)
    return band_coverage(np.asarray(u_t), np.asarray(v_t), grid)


def band_coverage(u, v, grid: dict) -> np.ndarray:
    """Returns the fraction of velocities u, v `(field, ...)` inside grid_posterior's mean +- 1.96 std, `(field,)`."""
    fractions = []
    for name, truth in (("u", np.asarray(u)), ("v", np.asarray(v))):
        inside = np.abs(truth - grid[f"{name}_mean"]) <= Z * grid[f"{name}_std"] + 1e-12 * np.abs(truth)
        fractions.append(inside.reshape(inside.shape[0], -1).mean(axis=1))
    return (fractions[0] + fractions[1]) / 2


@functools.partial(jax.jit, static_argnames="n_grid")
def _weight_beside_truth(coef, weights, truth, k1, k2, omega, times, n_grid):
    """Returns the members' weight strictly below and strictly above the true u, v: each `(2, time, y, x)`.

    coef: complex `(member, mode)`; weights `(member,)`; truth: the true u, v `(2, time, y, x)`.
    """
    _, u, v = grid_fields(coef, k1, k2, omega, times, n_grid)
    members = jnp.stack([u, v], axis=1)  # (member, 2, time, y, x)
    tie = 1e-12 * jnp.abs(truth)  # the truth as a member is neither below nor above itself
    below = jnp.einsum("m,m...->...", weights, (members < (truth - tie)[None]).astype(weights.dtype))
    above = jnp.einsum("m,m...->...", weights, (members > (truth + tie)[None]).astype(weights.dtype))
    return below, above


def velocity_quantile_calibration(true_coef, posterior: Posterior, k1, k2, omega, times, n_grid: int = 32,
                                  batch: int = 64) -> np.ndarray:
    """Returns the fraction of true grid velocities u, v inside the posterior's central 95% interval, `(field,)`.

    The interval runs from the members' weighted 2.5% quantile to their 97.5% quantile: a true velocity is
    inside when at most 97.5% of the weight lies strictly below it and at most 97.5% strictly above. The exact
    posterior's central interval covers the truth with probability 0.95 averaged over truths drawn from the
    prior whatever the shape of its marginals (the truth's rank is uniform), where mean +- 1.96 std
    (`velocity_calibration`) does so only for Gaussian marginals: a sampler below 0.95 here has missed mass.
    Members are processed `batch` at a time (padded with zero weight: one compilation serves all batches).
    """
    k1, k2 = jnp.asarray(k1), jnp.asarray(k2)
    omega, times = jnp.asarray(omega, jnp.float64), jnp.asarray(times, jnp.float64)
    _, u_t, v_t = _grid(jnp.asarray(true_coef), k1, k2, omega, times, n_grid=n_grid)
    truths = np.stack([np.asarray(u_t), np.asarray(v_t)], axis=1)  # (field, 2, time, y, x)
    samples, weights, size = padded_members(np.asarray(posterior.samples, np.complex128),
                                            np.asarray(posterior.weights, np.float64), batch)
    tail = 1.0 - (1.0 - Z_LEVEL) / 2 + 1e-12  # 0.975, with room for the weights' rounding
    fractions = []
    for f in range(samples.shape[0]):
        below, above = np.zeros_like(truths[f]), np.zeros_like(truths[f])
        for start in range(0, samples.shape[1], size):
            parts = _weight_beside_truth(jnp.asarray(samples[f, start : start + size]),
                                         jnp.asarray(weights[f, start : start + size]), jnp.asarray(truths[f]),
                                         k1, k2, omega, times, n_grid)
            below += np.asarray(parts[0])
            above += np.asarray(parts[1])
        fractions.append(float(np.mean((below <= tail) & (above <= tail))))
    return np.array(fractions)


def score_posterior(posterior: Posterior, tracks: Tracks, k1, k2, omega, dt: float, true_coef=None,
                    n_grid: int = 32, n_times: int = 4, horizon: float = 1.5) -> dict:
    """Returns every score, averaged over fields: `{name: float}` plus `per_field: {name: (field,)}`.

    Scores: velocity_rel_l2 (grid, window), track_velocity_rel_l2, resim_rms_obs (re-simulated
    posterior-mean tracks vs observed), resim_rms_true (vs noise-free true tracks),
    forecast_rms (to horizon * T), coef_calibration, velocity_calibration (mean +- 1.96 std),
    velocity_quantile_calibration (the central 95% interval), seconds_per_track.
    Scores that need the truth (or release points) are omitted when it is not known.

    Parameters
    ----------
    posterior
        the DA posterior `(field, member, mode)`.
    tracks
        the observed tracks (field f of `tracks` is field f of the posterior).
    k1, k2, omega
        the model's modes
    dt
        the RK4 step.
    true_coef
        complex `(field, mode)` truth; defaults to `tracks.true_coef`.
    """
    truth = tracks.true_coef if true_coef is None else true_coef
    mean, times = posterior.mean, window_times(tracks, n_times)
    per_field = {}
    if truth is not None:
        per_field["velocity_rel_l2"] = velocity_field_error(truth, mean, k1, k2, omega, times, n_grid)
        per_field["track_velocity_rel_l2"] = track_velocity_error(truth, mean, tracks, k1, k2, omega)
        per_field["coef_calibration"] = coefficient_calibration(truth, posterior, k1, k2)
        per_field["velocity_calibration"] = velocity_calibration(truth, posterior, k1, k2, omega, times, n_grid)
        per_field["velocity_quantile_calibration"] = velocity_quantile_calibration(truth, posterior, k1, k2, omega,
                                                                                   times, n_grid)
    if tracks.release is not None:
        per_field["resim_rms_obs"] = resimulated_track_error(mean, tracks, k1, k2, omega, dt)
        if truth is not None:
            reference = resimulated_positions(truth, tracks, k1, k2, omega, dt)
            per_field["resim_rms_true"] = resimulated_track_error(mean, tracks, k1, k2, omega, dt, reference)
            per_field["forecast_rms"] = forecast_error(truth, mean, tracks, k1, k2, omega, dt, horizon)
    scores = {name: float(np.mean(value)) for name, value in per_field.items()}
    if posterior.seconds is not None:
        scores["seconds_per_track"] = float(np.sum(posterior.seconds) / tracks.n_trajectory)
    scores["per_field"] = per_field
    return scores


def resimulated_positions(coef, tracks: Tracks, k1, k2, omega, dt: float) -> np.ndarray:
    """Returns positions `(trajectory, obs, 2)` simulated from `coef` at the tracks' times (NaN at padding)."""
    obs_times = np.unique(tracks.times[np.isfinite(tracks.times)])
    sim = simulate_at(coef, tracks, k1, k2, omega, dt, obs_times)
    index = np.searchsorted(obs_times, np.where(np.isfinite(tracks.times), tracks.times, obs_times[0]))
    return np.where(np.isfinite(tracks.times)[..., None], np.take_along_axis(sim, index[..., None], axis=1), np.nan)


def physical_velocity_error(result, tracks: Tracks) -> dict:
    """Returns the RMS velocity error of a physical result against the tracks' truth, and the RMS true speed, in m/s.

    The truth is gridded on the result's grid and times and converted with the tracks' mapping
    (lagda.io.physical.physical_fields), as the result's fields were; the RMS runs over grid points, times
    and fields.

    Parameters
    ----------
    result
        lagda.io.results.Result in physical units
    tracks
        with `true_coef` and `mapping`.
    """
    n_grid = len(result.x)
    _, u, v = _grid(jnp.asarray(tracks.true_coef), jnp.asarray(result.k1), jnp.asarray(result.k2),
                    jnp.asarray(result.omega, jnp.float64), jnp.asarray(result.time), n_grid=n_grid)
    true = physical_fields({"u_mean": np.asarray(u), "v_mean": np.asarray(v)}, tracks.mapping, result.y)
    err = (result.fields["u_mean"] - true["u_mean"]) ** 2 + (result.fields["v_mean"] - true["v_mean"]) ** 2
    return {"velocity_rms_error_m_s": float(np.sqrt(np.mean(err))),
            "velocity_rms_true_m_s": float(np.sqrt(np.mean(true["u_mean"] ** 2 + true["v_mean"] ** 2)))}
