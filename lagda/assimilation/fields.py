"""Posterior fields on a grid: the mean and spread of psi, u, v of a posterior, and the `Result` written to file.

psi, u, v are linear in the coefficients, so the mean field is the field of the mean coefficient and the
variance is a quadratic form of the field's rows in the coefficients' covariance: exact for a Gaussian posterior
(`field_variance`), else the weighted mean of the squared fields of the samples' deviations (`grid_posterior`).
`posterior_result`
gathers what the result file holds (lagda.io.results.write_result writes it), in physical units for tracks
with a mapping (lagda.io.physical.physical_fields).
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.model import FlowModel
from lagda.assimilation.posterior import Posterior
from lagda.io.physical import physical_fields
from lagda.io.results import FIELD_NAMES, Result
from lagda.io.tracks import Tracks
from lagda.report import duration
from simulate.flow import grid_fields, psi_basis, temporal_factor, velocity_basis

_grid = jax.jit(grid_fields, static_argnames="n_grid")


@functools.partial(jax.jit, static_argnames="n_grid")
def _moments_batch(dcoef, weights, k1, k2, omega, times, n_grid, time=None):
    """Returns sum_m w_m f(dcoef_m)^2 for f = psi, u, v: each `(time, y, x)`."""
    return tuple(jnp.einsum("m,mtyx->tyx", weights, f**2)
                 for f in grid_fields(dcoef, k1, k2, omega, times, n_grid, time))


def padded_members(samples, weights, batch: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Returns (samples, weights, size): the members padded with zeros of zero weight to a multiple of
    size = min(batch, member), so that one compilation serves every batch of `size` members.

    samples `(field, member, mode)`; weights `(field, member)`.
    """
    size = min(batch, samples.shape[1])
    n_pad = -samples.shape[1] % size
    return (np.concatenate([samples, np.zeros((samples.shape[0], n_pad, samples.shape[2]), samples.dtype)], axis=1),
            np.concatenate([weights, np.zeros((weights.shape[0], n_pad), weights.dtype)], axis=1), size)


def separable_variance(rows, cov, degrees, factors) -> np.ndarray:
    """Returns the variance of sum_p L_p(t) rows_p x_p for x ~ N(., cov) at each time: `(time, row)`.

    A field of a basis without frequencies is separable: its value at (z, t) is sum_p L_p(t) rows_p(z) x_p, with
    x_p the unknowns of degree p (lagda's own steady model: one degree, L_0 = 1). Its variance is
    sum_pq L_p(t) L_q(t) diag(rows_p cov_pq rows_q^T): the matrix products are made once, not once per time.

    Parameters
    ----------
    rows
        `(row, unknown)` the field's rows where every L_p is 1
    cov
        `(unknown, unknown)` symmetric
    degrees
        int `(unknown,)` each unknown's degree p
    factors
        `(time, degree)` L_p(t).
    """
    groups = [np.flatnonzero(degrees == p) for p in range(factors.shape[1])]
    cross = np.zeros((len(groups), len(groups), len(rows)))
    for p, i in enumerate(groups):
        for q, j in enumerate(groups[p:], start=p):
            if len(i) and len(j):
                cross[p, q] = cross[q, p] = np.einsum("nk,nk->n", rows[:, i] @ cov[np.ix_(i, j)], rows[:, j])
    return np.einsum("tp,tq,pqn->tn", factors, factors, cross)


def field_variance(covs, k1, k2, omega, times, n_grid: int, time=None, block: int = 4096) -> list[np.ndarray]:
    """Returns the exact variance of psi, u, v on the grid for coefficients x = (Re c, Im c) ~ N(., cov) of each
    field: each `(field, time, y, x)`; the rows of `block` points at a time, made once for every field.

    Parameters
    ----------
    covs
        `(field, 2 mode, 2 mode)`
    k1, k2, omega
        `(mode,)`
    times
        `(time,)` model times
    n_grid
        points per side
    time
        the model's `simulate.flow.TimeBasis`, or None.
    """
    covs = np.asarray(covs, np.float64)
    k1, k2, omega, times = (np.asarray(a) for a in (k1, k2, omega, times))
    grid = np.arange(n_grid) / n_grid
    gx, gy = np.meshgrid(grid, grid)  # (y, x)
    points = np.stack([gx, gy], axis=-1).reshape(-1, 2)
    var = np.empty((len(covs), len(times), len(points), 3))

    def rows_at(z, t):  # (point x field, 2 mode): psi, u, v
        return np.concatenate([psi_basis(z, t, k1, k2, omega, time)[:, None, :],
                               velocity_basis(z, t, k1, k2, omega, time)], axis=1).reshape(-1, covs.shape[-1])

    if time is None:
        degrees, factors, at = np.zeros(covs.shape[-1], np.int64), np.ones((len(times), 1)), 0.0
    else:
        degrees = np.tile(time.degree, 2)
        factors = temporal_factor(times, time._replace(select=np.eye(time.select.shape[-1])), np)
        at = time.start + time.length  # every Legendre polynomial is 1 at the window's end
    for start in range(0, len(points), block):
        z = points[start : start + block]
        if np.any(omega):  # not separable in time: the rows at each time
            for n, t in enumerate(times):
                rows = rows_at(z, t)
                for f, cov in enumerate(covs):
                    var[f, n, start : start + len(z)] = np.einsum("nk,nk->n", rows @ cov, rows).reshape(-1, 3)
        else:
            rows = rows_at(z, at)
            for f, cov in enumerate(covs):
                var[f, :, start : start + len(z)] = separable_variance(rows, cov, degrees,
                                                                       factors).reshape(len(times), -1, 3)
    return [np.maximum(var[..., i], 0.0).reshape(len(covs), len(times), n_grid, n_grid) for i in range(3)]


def grid_posterior(posterior: Posterior, k1, k2, omega, times, n_grid: int = 32, batch: int = 64, time=None) -> dict:
    """Returns posterior mean and std of psi, u, v on the grid: `{psi_mean, psi_std, ...}`, each `(field, time, y, x)`.

    psi, u, v are linear in c, so the mean field is the field of the mean coefficient. The variance is exact for a
    posterior with its covariance (`field_variance`); else sum_m w_m f(c_m - mean)^2 over its samples, members
    processed `batch` at a time (padded with zero weight, so one compilation serves all batches) to bound memory.

    Parameters
    ----------
    posterior
        weighted samples `(field, member, mode)`, and `cov` or None.
    k1, k2
        integer `(mode,)`
    omega
        `(mode,)`
    times
        `(time,)`
    n_grid
        points per side
    time
        the model's `simulate.flow.TimeBasis`, or None.
    """
    if posterior.cov is not None:
        out = _grid_mean(posterior, k1, k2, omega, times, n_grid, time)
        var = field_variance(posterior.cov, k1, k2, omega, times, n_grid, time)
        out.update({f"{name}_std": np.sqrt(v) for name, v in zip(FIELD_NAMES, var)})
        return out
    k1, k2 = jnp.asarray(k1), jnp.asarray(k2)
    omega, times = jnp.asarray(omega, jnp.float64), jnp.asarray(times, jnp.float64)
    out = _grid_mean(posterior, k1, k2, omega, times, n_grid, time)
    mean, means = posterior.mean, [out[f"{name}_mean"] for name in FIELD_NAMES]
    samples, weights = np.asarray(posterior.samples, np.complex128), np.asarray(posterior.weights, np.float64)
    dev, w, size = padded_members(samples - mean[:, None, :], weights, batch)
    var = [np.zeros_like(m) for m in means]
    for f in range(samples.shape[0]):
        for start in range(0, dev.shape[1], size):
            parts = _moments_batch(jnp.asarray(dev[f, start : start + size]), jnp.asarray(w[f, start : start + size]),
                                   k1, k2, omega, times, n_grid, time)
            for v, part in zip(var, parts):
                v[f] += np.asarray(part)
    out.update({f"{name}_std": np.sqrt(np.maximum(v, 0.0)) for name, v in zip(FIELD_NAMES, var)})
    return out


def _grid_mean(posterior: Posterior, k1, k2, omega, times, n_grid: int, time) -> dict:
    """Returns {psi_mean, u_mean, v_mean}, each `(field, time, y, x)`: the fields of the posterior mean."""
    fields = _grid(jnp.asarray(posterior.mean), jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(omega, jnp.float64),
                   jnp.asarray(times, jnp.float64), n_grid=n_grid, time=time)
    return {f"{name}_mean": np.asarray(f) for name, f in zip(FIELD_NAMES, fields)}


DAY = 86400.0  # seconds
MAX_TIMES = 121  # default grid times of a result at most (a 120-day window daily; longer windows every few days)
MAX_ASKED_TIMES = 2001  # grid times a step given by the user may ask for
MODEL_TIMES = 11  # model-unit tracks: grid times every tenth of the window by default
_UNITS = {"min": 60.0, "h": 3600.0, "d": DAY}


def parse_step(text: str, option: str) -> float:
    """Returns the seconds of a step such as "30min", "6h" or "1d".

    Raises
    ------
    ValueError
        one line naming `option`, for anything else.
    """
    match = re.fullmatch(r"\s*([0-9.]+)\s*(min|h|d)\s*", str(text))
    if match is None or not float(match.group(1)) > 0:
        raise ValueError(f"{option} must be a step such as 30min, 6h or 1d; got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def result_times(tracks: Tracks, times: int | str | None = None) -> tuple[np.ndarray, str]:
    """Returns (the model times `(time,)` at which a result holds its fields, a note saying how they were chosen).

    times None: for tracks in physical units daily from the window's start (t = 0), at the observations'
    spacing when the window is shorter than two days, every few days when it is longer than MAX_TIMES days;
    for model-unit tracks MODEL_TIMES times over the window. An int N: N evenly spaced times from 0 to the
    last observation. A step "30min", "6h", "1d" (physical tracks): every step from 0.

    Raises
    ------
    ValueError
        for a step of model-unit tracks, or a bad value.
    """
    t_end = float(np.nanmax(tracks.times))
    if isinstance(times, str) and times.strip().isdigit():
        times = int(times)
    if isinstance(times, int) or (times is None and tracks.mapping is None):
        n = MODEL_TIMES if times is None else times
        if n < 2:
            raise ValueError(f"the result needs at least 2 grid times, got {n}")
        note = f"{n} grid times over the window" + ("" if times is not None else " (pass --times to choose)")
        return np.linspace(0.0, t_end, n), note
    scale = tracks.mapping.time_scale_s if tracks.mapping is not None else None
    if times is None:
        window_s = t_end * scale
        if window_s >= 2 * DAY:
            step = DAY * max(1, int(np.ceil(window_s / DAY / (MAX_TIMES - 1))))
            what = "daily" if step == DAY else f"every {step / DAY:g} days"
        else:
            spacing = np.diff(tracks.times, axis=-1)
            step = float(np.nanmedian(spacing[spacing > 0])) * scale
            step = max(step, window_s / (MAX_TIMES - 1))
            what = f"every {duration(step)} (the observations' spacing)"
    else:
        if scale is None:
            raise ValueError(f"--times must be a number of grid times for model-unit tracks (a step such as 6h is for "
                             f"physical tracks); got {times!r}")
        step, what = parse_step(times, "--times"), f"every {times.strip()}"
    model_times = np.arange(0.0, t_end * (1 + 1e-12), step / scale)
    if len(model_times) > MAX_ASKED_TIMES:
        raise ValueError(f"--times {times}: {len(model_times)} grid times, more than {MAX_ASKED_TIMES}: choose a "
                         "longer step")
    return model_times, (f"grid times {what} from the window's start ({len(model_times)} times"
                         + (")" if times is not None else "; --times sets them)"))


def total_std(grid: dict, posterior: Posterior) -> dict:
    """Returns {u_total_std, v_total_std} = sqrt(std^2 + r_f^2) `(field, time, y, x)` of grid_posterior's u, v, with
    r_f the std per component of the velocity the basis leaves out that `linear` modelled for field f (its info's
    representation_std): the predictive std of the full velocity; {} where a field has none."""
    info = posterior.info or ()
    if not info or not all("representation_std" in i for i in info):
        return {}
    r2 = np.array([float(i["representation_std"]) ** 2 for i in info])[:, None, None, None]
    return {f"{c}_total_std": np.sqrt(grid[f"{c}_std"] ** 2 + r2) for c in ("u", "v")}


def posterior_result(posterior: Posterior, model: FlowModel, times, n_grid: int = 32, tracks: Tracks | None = None,
                     attrs: dict | None = None) -> Result:
    """Returns the `Result` of a posterior: coefficient moments, psi, u, v mean and std on the grid x_i = i / n_grid
    at model `times` `(time,)` (physical units for tracks with a mapping), the tracks and the method's diagnostics.

    Raises
    ------
    ValueError
        if the posterior's mode count differs from the model's.
    """
    if np.shape(posterior.samples)[2] != model.n_modes:
        raise ValueError(f"posterior has {np.shape(posterior.samples)[2]} modes but the model has {model.n_modes}")
    grid = np.arange(n_grid) / n_grid
    times = np.asarray(times, np.float64)
    fields = grid_posterior(posterior, model.k1, model.k2, model.omega, times, n_grid, time=model.time)
    fields |= total_std(fields, posterior)
    mapping = None if tracks is None else tracks.mapping
    if mapping is not None:
        fields = physical_fields(fields, mapping, grid)
    candidates = None if posterior.candidates is None else np.asarray(posterior.candidates, np.complex128)
    return Result(model.k1, model.k2, model.omega, posterior.mean, posterior.std_re, posterior.std_im, fields, grid,
                  grid, times, posterior.method, dict(attrs or {}), candidates, posterior.candidate_weights,
                  posterior.seconds, tracks, None if tracks is None else tracks.true_coef, posterior.diagnostics(),
                  mapping, model.time)
