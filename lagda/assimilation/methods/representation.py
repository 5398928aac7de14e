"""Representation error: exact GLS whitening of velocity data whose error is an OU process along each track.

The velocities along a drifter track, y = G x + e, carry the scales the basis does not hold
(the representation error r), which move with the drifter and stay correlated along its track.
Per track and velocity component, e = r + n is modelled as an Ornstein-Uhlenbeck process in
time plus white noise, independent between tracks and components:
    Cov(e)_ij = rep_var exp(-|t_i - t_j| / tau) + noise_var delta_ij.
This is the state-space model r_i = phi_i r_{i-1} + w_i, phi_i = exp(-(t_i - t_{i-1}) / tau),
Var w_i = rep_var (1 - phi_i^2), d_i = r_i + n_i, and its scalar Kalman filter gives the
innovations v_i = d_i - E[d_i | d_<i] with variances S_i: v / sqrt(S) = L^-1 d for the Cholesky
factor Cov = L L^T. The gains do not depend on the data, so the same recursion applied to y and
to every column of G whitens the GLS problem exactly, in O(n) per track:
|L^-1 (y - G x)|^2 = (y - G x)^T Cov^-1 (y - G x) for every x, and sum log S_i = log det Cov.
Irregular times and gaps only change phi_i; tau = 0 is white noise (phi = 0), tau = inf a random
constant per track (phi = 1), whose covariance is singular without noise_var.
"""

from __future__ import annotations

import numpy as np


def _check(rep_var: float, tau: float, noise_var: float) -> None:
    """Raises ValueError unless rep_var, tau, noise_var >= 0 give a nonsingular covariance."""
    if not (rep_var >= 0 and tau >= 0 and noise_var >= 0 and rep_var + noise_var > 0):
        raise ValueError(f"expected rep_var, tau, noise_var >= 0 and rep_var + noise_var > 0, "
                         f"got {rep_var}, {tau}, {noise_var}")
    if np.isinf(tau) and noise_var == 0 and rep_var > 0:
        raise ValueError("tau = inf (a constant error per series) needs noise_var > 0: its covariance is singular")


def _decay(step, tau: float):
    """Returns (phi, 1 - phi^2) of time steps `step` for the OU time scale tau (0: white, inf: constant)."""
    if tau == 0:
        return np.zeros_like(step), np.ones_like(step)
    return np.exp(-step / tau), -np.expm1(-2.0 * step / tau)


def whiten_series(data, times, valid, rep_var: float, tau: float, noise_var: float):
    """Returns (whitened `(series, time, col)`, log_det) of series with error Cov = rep_var C(tau) + noise_var I.

    A scalar Kalman filter per series, all series and columns at once, a loop over the time
    index only: whitened[s, i] = v_i / sqrt(S_i), the innovation of the data over its standard
    deviation; log_det = sum log S_i = log det Cov, summed over all series. Invalid entries are
    skipped (the filter predicts across them, like a gap) and left 0.

    Parameters
    ----------
    data
        `(series, time, col)`, e.g. [y, G] stacked along col
    times
        `(series, time)`, increasing along each series over the valid entries
    valid
        bool `(series, time)`.

    Raises
    ------
    ValueError
        on mismatched shapes, negative or singular parameters (tau = inf with
        noise_var = 0), or repeated times of one series with noise_var = 0.
    """
    data, times, valid = np.asarray(data, np.float64), np.asarray(times, np.float64), np.asarray(valid, bool)
    if data.ndim != 3 or times.shape != data.shape[:2] or valid.shape != data.shape[:2]:
        raise ValueError(f"expected data (series, time, col), times and valid (series, time), "
                         f"got {data.shape}, {times.shape}, {valid.shape}")
    _check(rep_var, tau, noise_var)
    n_series = data.shape[0]
    white = np.zeros_like(data)
    mean, var = np.zeros((n_series, data.shape[2])), np.zeros(n_series)  # filtered state of each column, its variance
    last, started = np.zeros(n_series), np.zeros(n_series, bool)  # time of the last valid entry, any seen
    log_det = 0.0
    for i in range(data.shape[1]):
        ok, t = valid[:, i], times[:, i]
        phi, fresh = _decay(np.where(started, t - last, 0.0), tau)
        phi, fresh = np.where(started, phi, 0.0), np.where(started, fresh, 1.0)  # first entry: prior N(0, rep_var)
        pred_mean, pred_var = phi[:, None] * mean, phi**2 * var + rep_var * fresh
        s = pred_var + noise_var
        if np.any(ok & (s <= 0.0)):
            raise ValueError("singular covariance: repeated times in one series with noise_var = 0")
        s = np.where(ok, s, 1.0)
        innov = data[:, i] - pred_mean
        white[:, i] = np.where(ok[:, None], innov / np.sqrt(s)[:, None], 0.0)
        mean = np.where(ok[:, None], pred_mean + (pred_var / s)[:, None] * innov, mean)
        var = np.where(ok, pred_var * noise_var / s, var)  # (1 - K) P-, K = P- / S
        last, started = np.where(ok, t, last), started | ok
        log_det += float(np.sum(np.log(s[ok])))
    return white, log_det


def thin_pairs(t, track, spacing: float) -> np.ndarray:
    """Returns the indices of the points `(n,)` kept: per track, in time order, the first and then each one at
    least `spacing` after the last kept (all of them for spacing <= 0)."""
    order = np.lexsort((t, track))
    keep, last, last_track = [], -np.inf, None
    for i in order:
        if track[i] != last_track or t[i] - last >= spacing * (1 - 1e-9):
            keep.append(i)
            last, last_track = t[i], track[i]
    return np.sort(np.asarray(keep, np.int64))


def whiten_tracks(g, y, track, times, rep_var: float, tau: float, noise_var: float):
    """Returns (g_white `(2n, p)`, y_white `(2n,)`, log_det) of velocity data along tracks, GLS-whitened.

    The points are grouped by track and sorted by time (any input order), padded to
    `(track, time)` (`track_series`) and the u and v components whitened as separate series by
    `whiten_series`. Rows come out by track (in increasing id), component (u, then v), then time.

    Parameters
    ----------
    g
        `(n, 2, p)` the u and v design rows of each point
    y
        `(n, 2)` velocities
    track
        `(n,)` int id of the drifter (or segment) of each point
    times
        `(n,)`.

    Raises
    ------
    ValueError
        on mismatched shapes or no data, and as `whiten_series`.
    """
    return whiten_track_series(track_series(g, y, track, times), rep_var, tau, noise_var)


def track_series(g, y, track, times):
    """Returns (series `(2 track, time, 1 + p)`, times `(2 track, time)`, valid `(2 track, time)`): [y, G] of each
    track and component padded in time order, the layout `whiten_track_series` whitens (arranged once, it serves
    every error model). Args and errors as `whiten_tracks`."""
    g, y = np.asarray(g, np.float64), np.asarray(y, np.float64)
    track, times = np.asarray(track), np.asarray(times, np.float64)
    n = y.shape[0]
    if (n == 0 or g.ndim != 3 or g.shape[:2] != (n, 2) or y.shape != (n, 2)
            or (track.shape, times.shape) != ((n,), (n,))):
        raise ValueError(f"expected g (n, 2, p), y (n, 2), track and times (n,) with n > 0, "
                         f"got {g.shape}, {y.shape}, {track.shape}, {times.shape}")
    order = np.lexsort((times, track))
    _, first, row, count = np.unique(track[order], return_index=True, return_inverse=True, return_counts=True)
    slot = np.arange(n) - first[row]  # position of each sorted point within its track
    shape = (len(first), int(count.max()))
    data, t_pad, valid = np.zeros(shape + (2, 1 + g.shape[2])), np.zeros(shape), np.zeros(shape, bool)
    data[row, slot] = np.concatenate([y[order, :, None], g[order]], axis=-1)
    t_pad[row, slot], valid[row, slot] = times[order], True
    series = np.moveaxis(data, 2, 1).reshape(2 * shape[0], shape[1], -1)  # (track * component, time, 1 + p)
    return series, np.repeat(t_pad, 2, axis=0), np.repeat(valid, 2, axis=0)


def whiten_track_series(arranged, rep_var: float, tau: float, noise_var: float):
    """Returns (g_white `(2n, p)`, y_white `(2n,)`, log_det) of `track_series`'s output, as `whiten_tracks`."""
    series, times, valid = arranged
    white, log_det = whiten_series(series, times, valid, rep_var, tau, noise_var)
    rows = white[valid]
    return rows[:, 1:], rows[:, 0], log_det


def ou_time_scale(residuals, times, track, max_lag: int = 5000) -> tuple[float, float]:
    """Returns (variance, tau) of the OU process equivalent to residual velocities `(n, 2)`, times `(n,)`,
    track ids `(n,)`.

    variance is the mean square of the residuals over both components (taken as zero-mean, not
    centred). tau is their integral time scale, h (1/2 + sum_{k>=1} rho_k), the autocorrelation rho_k
    at lag k h pooled over tracks and components from the pairs of one track spaced k h apart
    (within 10% of h; h the lower median spacing of consecutive points), the sum cut by Sokal's
    window (the first k >= 5 tau / h). For an OU process this is its tau; for a smooth process
    (the unresolved velocity along a drifter is differentiable, rho_1 near 1) it is the time scale
    of the OU process with the same number of independent samples per unit time, where the lag-1
    correlation would give a far longer one. White noise in the residuals counts in the variance.

    Raises
    ------
    ValueError
        if no track has two points at distinct times.
    """
    residuals, times, track = np.asarray(residuals, np.float64), np.asarray(times, np.float64), np.asarray(track)
    order = np.lexsort((times, track))
    r, t, ids = residuals[order], times[order], track[order]
    step = np.diff(t)
    pair = (np.diff(ids) == 0) & (step > 0)
    if not np.any(pair):
        raise ValueError("no two points of one track at distinct times: cannot fit an OU time scale")
    h = float(np.quantile(step[pair], 0.5, method="lower"))
    integral = 0.5
    for k in range(1, min(max_lag, len(t) - 1) + 1):
        near = (ids[k:] == ids[:-k]) & (np.abs(t[k:] - t[:-k] - k * h) <= 0.1 * h)
        if not np.any(near):
            break
        a, b = r[:-k][near], r[k:][near]
        norm = np.sqrt(np.sum(a**2) * np.sum(b**2))
        integral += float(np.sum(a * b) / norm) if norm > 0 else 0.0
        if k >= 5.0 * integral:
            break
    return float(np.mean(residuals**2)), float(max(integral, 0.5) * h)
