"""The data of the linear inversions: what the tracks say about the velocity, linearly in x.

At known positions and times the velocity is linear in x = (Re c, Im c):
w(z, t) = Re( sum_k c_k e^{i omega_k t} e^{2 pi i k.z} 2 pi i (-k2, k1) ) = G(z, t) x. Two kinds
of data, y = A x + e:
- velocities: central differences of the positions, (z_{j+L} - z_j) / (t_{j+L} - t_j) at the
  midpoint (second order), or the five- and seven-point differences at an observed point on
  smooth dense tracks (fourth and sixth order: on exact dense tracks the second-order bias is a
  smooth, correlated error that a white-noise model cannot describe);
- displacements: z(t_j) - z(t_a) = int G(z(s), s) ds x, the integral a cumulative trapezoid of G
  at the observed points, whose noise is the white position noise rather than differences
  amplified by 1 / dt_obs. G at noisy positions adds a correlated random-walk error, whitened
  against (linearised at a current estimate), and an O(sigma^2) curvature bias of the design.

The lag L trades the difference noise 2 sigma^2 / Delta^2 (Delta = L h, h the observation
spacing) against the truncation bias J Delta^2 / 24 (J the RMS third derivative of the
tracks): the sum is smallest at Delta* = (24 sigma / J)^(1/3). `choose_lag` estimates sigma and
J from the third differences of the tracks (or takes sigma = noise_std) and picks the lag of
FD_LAGS nearest Delta* / h; exact dense tracks get L = 1. Sparse sampling makes differences
biased (error ~ |d^3 z / dt^3| dt_obs^2 / 24 grows fast with the spacing); the k = (0, 0) mode
never moves a drifter, its G column is zero, so it keeps its prior.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.methods.config import FD_LAGS, LinearConfig
from lagda.assimilation.methods.observations import valid_mask
from lagda.assimilation.model import FlowModel
from simulate.flow import TWO_PI, temporal_factor, velocity_basis

HEAVY_TAIL = 4.0  # the third differences' mean square over this many times its median's estimate: fixes off track
CHI2_1_MEDIAN = 0.454936423119572  # the median of chi-square with one degree of freedom (scipy.stats.chi2(1).median())
# central-difference weights c_m of w(t_j) = sum_m c_m (z_{j+m} - z_{j-m}) / h, m = 1, 2, ..., by order
CENTRAL_WEIGHTS = {4: (2.0 / 3.0, -1.0 / 12.0), 6: (3.0 / 4.0, -3.0 / 20.0, 1.0 / 60.0)}


def _with_release(positions, times, release):
    """Returns float64 positions `(drifter, 1 + obs, 2)` and times with a known release prepended at t = 0."""
    positions, times = np.asarray(positions, np.float64), np.asarray(times, np.float64)
    if release is None:
        return positions, times
    return (np.concatenate([np.asarray(release, np.float64)[:, None, :], positions], axis=1),
            np.concatenate([np.zeros((times.shape[0], 1)), times], axis=1))


def finite_differences(positions, times, release=None, lag: int = 1):
    """Returns midpoint positions `(pair, 2)`, times `(pair,)`, velocities `(pair, 2)`, spans `(pair,)`.

    Pairs are observations j and j + lag of one drifter; a pair with a missing end (NaN) is
    skipped. A known release point is used as an observation at t = 0.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped
    times
        `(drifter, obs)`.
    release
        `(drifter, 2)` or None.
    """
    positions, times = _with_release(positions, times, release)
    ok = valid_mask(positions, times)
    pair_ok = ok[:, :-lag] & ok[:, lag:]
    z_a, z_b = positions[:, :-lag][pair_ok], positions[:, lag:][pair_ok]
    t_a, t_b = times[:, :-lag][pair_ok], times[:, lag:][pair_ok]
    return (z_a + z_b) / 2.0, (t_a + t_b) / 2.0, (z_b - z_a) / (t_b - t_a)[:, None], t_b - t_a


@dataclasses.dataclass(frozen=True)
class Segments:
    """Runs of consecutive valid observations, padded to one length M: the displacement model's input.

    A segment starting at a known release point is anchored there (its point 0 is the exact
    release); any other has an unknown start, removed by a flat prior (a nuisance shift).
    """

    points: np.ndarray  # (segment, M, 2) observed positions, 0 where padded
    times: np.ndarray  # (segment, M)
    valid: np.ndarray  # bool (segment, M)
    anchored: np.ndarray  # bool (segment,)
    integral: np.ndarray  # (segment, M, 2, 2K) cumulative trapezoid A_j of G at the observed points


def track_segments(positions, times, release, model: FlowModel) -> Segments:
    """Returns the `Segments` of tracks `(drifter, obs, 2)`, times `(drifter, obs)`, release `(drifter, 2)` or None.

    Raises
    ------
    ValueError
        if no segment has two observations.
    """
    positions, times = np.asarray(positions, np.float64), np.asarray(times, np.float64)
    runs = []
    for d in range(positions.shape[0]):
        ok = valid_mask(positions[d], times[d])
        edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
        for start, stop in zip(edges[::2], edges[1::2]):
            p, t = positions[d, start:stop], times[d, start:stop]
            anchored = release is not None and start == 0 and bool(np.all(np.isfinite(release[d])))
            if anchored:
                p, t = np.concatenate([np.asarray(release[d], np.float64)[None], p]), np.concatenate([[0.0], t])
            if len(t) >= 2:
                runs.append((p, t, anchored))
    if not runs:
        raise ValueError("no segment of two valid observations: cannot form displacements")
    n_seg, m = len(runs), max(len(t) for _, t, _ in runs)
    points, t_pad, valid = np.zeros((n_seg, m, 2)), np.zeros((n_seg, m)), np.zeros((n_seg, m), bool)
    for i, (p, t, _) in enumerate(runs):
        points[i, : len(t)], t_pad[i, : len(t)], valid[i, : len(t)] = p, t, True
        t_pad[i, len(t):] = t[-1]  # zero steps after the end: the integral stays constant
    g = np.where(valid[..., None, None], velocity_basis(points.reshape(-1, 2), t_pad.reshape(-1), *model.modes)
                 .reshape(n_seg, m, 2, -1), 0.0)
    steps = np.diff(t_pad, axis=1)[..., None, None]
    integral = np.concatenate([np.zeros_like(g[:, :1]), np.cumsum(0.5 * steps * (g[:, :-1] + g[:, 1:]), axis=1)],
                              axis=1)
    return Segments(points, t_pad, valid, np.array([a for _, _, a in runs]), integral)


def velocity_gradient(points, t, x, model: FlowModel) -> np.ndarray:
    """Returns dw/dz at points `(point, 2)`, times `(point,)` for coefficients x `(2K,)`: `(point, 2, 2)`.

    w = 2 pi (sum k2 p_k, -sum k1 p_k), p_k = a_k sin theta_k + b_k cos theta_k, so
    dw/dz = (2 pi)^2 [[sum k2 k1 q, sum k2 k2 q], [-sum k1 k1 q, -sum k1 k2 q]], q_k = dp_k / dtheta_k
    (times the temporal factor f_k(t) with a time basis).
    """
    k = model.n_modes
    theta = model.omega[None, :] * t[:, None] + TWO_PI * (points[:, :1] * model.k1[None, :]
                                                          + points[:, 1:] * model.k2[None, :])
    q = (x[None, :k] * np.cos(theta) - x[None, k:] * np.sin(theta)) * temporal_factor(t, model.time, np)
    k1, k2 = model.k1[None, :].astype(np.float64), model.k2[None, :].astype(np.float64)
    rows = [[np.sum(k2 * k1 * q, 1), np.sum(k2 * k2 * q, 1)], [-np.sum(k1 * k1 * q, 1), -np.sum(k1 * k2 * q, 1)]]
    return TWO_PI**2 * np.moveaxis(np.array(rows), -1, 0)


def _solve_errors_in_variables(rhs, jac, steps):
    """Returns eps `(segment, M, 2, col)` with eps_j - sum_i c_ji J_i eps_i = rhs_j (forward substitution).

    c_ji are the cumulative-trapezoid weights of point i in the integral up to j, J_i = jac[:, i]
    `(segment, M, 2, 2)`, steps `(segment, M)` = t_j - t_{j-1} (0 at j = 0). A loop over the
    steps only, all segments and columns at once, each 2 x 2 system solved by its adjugate.
    """
    eps = np.empty_like(rhs)
    integral = np.zeros_like(rhs[:, 0])  # trapezoid sum up to j-1: J_i eps_i weighted by c_(j-1)i
    previous = np.zeros_like(rhs[:, 0])  # J_{j-1} eps_{j-1}
    half = 0.5 * steps
    for j in range(rhs.shape[1]):
        h = half[:, j, None]
        known = rhs[:, j] + integral + h[..., None] * previous
        b00, b01 = 1.0 - h * jac[:, j, 0, 0, None], -h * jac[:, j, 0, 1, None]
        b10, b11 = -h * jac[:, j, 1, 0, None], 1.0 - h * jac[:, j, 1, 1, None]
        det = b00 * b11 - b01 * b10
        e0 = (b11 * known[:, 0] - b01 * known[:, 1]) / det
        e1 = (b00 * known[:, 1] - b10 * known[:, 0]) / det
        eps[:, j, 0], eps[:, j, 1] = e0, e1
        integral = known - rhs[:, j]
        previous = np.stack([jac[:, j, 0, 0, None] * e0 + jac[:, j, 0, 1, None] * e1,
                             jac[:, j, 1, 0, None] * e0 + jac[:, j, 1, 1, None] * e1], axis=1)
        integral = integral + h[..., None] * previous
    return eps


def displacement_data(positions, times, release, model: FlowModel, x=None, segments: Segments | None = None,
                      chunk: int = 64):
    """Returns (A `(n, 2K)`, b `(n,)`) of the whitened integral observation model b = A x + e, e ~ N(0, sigma^2 I).

    Displacements instead of differences: z(t_j) - z(t_a) = int_{t_a}^{t_j} G(z(s), s) ds x, the
    integral a cumulative trapezoid of G at the observed points, so the noise is the position
    noise rather than differences amplified by 1/dt_obs. G is evaluated at noisy positions
    z + eps, which adds sum_i c_ji (dw/dz)(z_i) eps_i to observation j: a random walk along the
    track of size ~ dt |dw/dz| sigma sqrt(j), comparable to sigma on long dense tracks and
    correlated, so that many drifters make a white model overconfident. With an estimate x the
    data error is (I - M) eps, M the lower-triangular matrix of c_ji dw/dz(z_i) at x, and both
    sides are whitened by (I - M)^-1 (forward substitution); x None: M = 0 (white model).
    Anchored segments (release known) start at the exact release; the unknown start of any
    other is projected out after whitening (a flat prior on it).

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped, NaN where missing
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None
    x
        `(2K,)` estimate for dw/dz or None
    segments
        `track_segments` of these tracks (computed when None).
    """
    seg = track_segments(positions, times, release, model) if segments is None else segments
    rows, data = [], []
    for lo in range(0, len(seg.anchored), chunk):
        part = slice(lo, lo + chunk)
        a, b = _whitened_displacements(seg, part, model, x)
        rows.append(a)
        data.append(b)
    return np.concatenate(rows), np.concatenate(data)


def _whitened_displacements(seg: Segments, part: slice, model: FlowModel, x):
    """Returns (A, b) rows of the segments `part` of `displacement_data`."""
    points, valid, anchored = seg.points[part], seg.valid[part], seg.anchored[part]
    n_seg, m, _ = points.shape
    shift = np.broadcast_to(np.eye(2)[None, None], (n_seg, m, 2, 2))  # nuisance columns: the unknown start
    rhs = np.concatenate([seg.integral[part], (points - points[:, :1])[..., None], shift], axis=-1)
    if x is not None:
        jac = velocity_gradient(points.reshape(-1, 2), seg.times[part].reshape(-1), np.asarray(x, np.float64), model)
        jac = np.where(valid[..., None, None], jac.reshape(n_seg, m, 2, 2), 0.0)
        rhs = _solve_errors_in_variables(rhs, jac, np.diff(seg.times[part], axis=1, prepend=seg.times[part][:, :1]))
    keep = valid.copy()
    keep[anchored, 0] = False  # the exact release is no observation
    rhs = rhs * keep[..., None, None]
    cols = rhs[..., :-2].reshape(n_seg, 2 * m, -1)
    nuisance = rhs[..., -2:].reshape(n_seg, 2 * m, 2) * ~anchored[:, None, None]
    gram = np.einsum("sni,snj->sij", nuisance, nuisance) + np.eye(2)[None] * anchored[:, None, None]
    cols = cols - nuisance @ np.linalg.solve(gram, np.swapaxes(nuisance, 1, 2) @ cols)
    cols = cols[np.repeat(keep, 2, axis=1)]
    return cols[:, :-1], cols[:, -1]


def central_differences(positions, times, release=None, order: int = 6):
    """Returns positions `(point, 2)`, times `(point,)`, velocities `(point, 2)`, spacings `(point,)`.

    The central difference of `order` (4: five points, 6: seven points; CENTRAL_WEIGHTS) at every
    observation j whose neighbours are valid and equally spaced (h). Unlike the second-order
    pairs it is taken at an observed point, not at a midpoint off the path, and its truncation
    error is O(h^order): on exact dense tracks the second-order bias is a smooth, correlated
    error that the white-noise model cannot describe, and at order 4 (dt 1e-4, K = 49) it is
    still 1-5e-8, against the ~1e-9 RK4 error of the tracks that order 6 reaches. Its noise
    variance is `noise_gain(order)` sigma^2 / h^2. A known release point is used as an
    observation at t = 0.
    """
    weights = CENTRAL_WEIGHTS[order]
    r = len(weights)
    positions, times = _with_release(positions, times, release)
    n = positions.shape[1]
    if n < 2 * r + 1:
        return np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2)), np.zeros(0)
    ok = valid_mask(positions, times)
    z = [positions[:, i : n - 2 * r + i] for i in range(2 * r + 1)]
    t = [times[:, i : n - 2 * r + i] for i in range(2 * r + 1)]
    h = t[r + 1] - t[r]
    regular = np.all([np.isclose(t[i + 1] - t[i], h, rtol=1e-6) for i in range(2 * r)], axis=0) & (h > 0)
    use = np.all([ok[:, i : n - 2 * r + i] for i in range(2 * r + 1)], axis=0) & regular
    vel = sum(c * (z[r + m] - z[r - m]) for m, c in enumerate(weights, start=1)) / h[..., None]
    return z[r][use], t[r][use], vel[use], h[use]


def noise_gain(order: int) -> float:
    """Returns the variance of a central difference of white position noise, in units sigma^2 / h^2."""
    return 2.0 * sum(c**2 for c in CENTRAL_WEIGHTS[order])


def five_point_differences(positions, times, release=None):
    """Returns `central_differences` of order 4 (the five-point difference)."""
    return central_differences(positions, times, release, order=4)


def _third_difference_power(positions, times, lag: int, h: float, robust: bool = False) -> float:
    """Returns the mean square of the lag-`lag` third differences of the positions `(drifter, obs, 2)`, or with
    `robust` its estimate from their median (median of the squares over the chi-square(1) median: the mean square of
    normal differences, untouched by a few fixes off their track).

    Only stencils of four observations equally spaced by lag * h in time `(drifter, obs)` count
    (NaN skipped): across a gap of irregular times the third difference measures the gap, not
    the noise.
    """
    z, t = positions, np.asarray(times, np.float64)
    if z.shape[1] <= 3 * lag:
        return float("nan")
    d3 = z[:, 3 * lag:] - 3 * z[:, 2 * lag:-lag] + 3 * z[:, lag:-2 * lag] - z[:, :-3 * lag]
    steps = [t[:, (i + 1) * lag:t.shape[1] - (2 - i) * lag] - t[:, i * lag:t.shape[1] - (3 - i) * lag]
             for i in range(3)]
    regular = np.all([np.abs(step - lag * h) <= 1e-6 * lag * h for step in steps], axis=0)
    d3 = np.where(regular[..., None], d3, np.nan)
    if not np.any(regular):
        return float("nan")
    return float(np.nanmedian(d3**2) / CHI2_1_MEDIAN) if robust else float(np.nanmean(d3**2))


def _heavy_tail_note(ratio: float, noise: str) -> str:
    """Returns the note of a noise level judged by the third differences' median (`choose_lag`)."""
    return (f"position noise judged by the median of the third differences: {noise}; their mean square is "
            f"{ratio:.3g} times the median's estimate (a few fixes off their track, which the cleaning kept)")


def choose_lag(positions, times, noise_std=None, lags=FD_LAGS) -> tuple[int, dict]:
    """Returns (lag, info): the finite-difference lag minimising noise + truncation error.

    With h the observation spacing, the lag-M third difference of positions has mean square
    P(M) = 20 sigma^2 + J^2 (M h)^6 (per coordinate, J the RMS third derivative). If
    P(2) > 16 P(1) the tracks are smooth at lag 1 (exact or sparse): lag 1. Otherwise sigma^2 =
    P(1) / 20 (or noise_std^2) and J^2 = (P(M) - P(1)) / (M h)^6 at the smallest M = 2^i with
    P(M) > 10 P(1); the central difference over Delta = L h has error variance
    2 sigma^2 / Delta^2 + (J Delta^2 / 24)^2, smallest at Delta* = (24 sigma / J)^(1/3), and
    the lag of `lags` nearest Delta* / h (in log) with >= 6 lags per track is returned.
    A few fixes off their track (a spike the cleaning let through) carry the mean squares of noisy-looking tracks:
    where P(1) is over HEAVY_TAIL times its robust estimate (`_third_difference_power` with robust), the robust
    powers decide instead and the info holds the ratio ("third_difference_heavy_tail").

    Parameters
    ----------
    positions
        `(drifter, obs, 2)`
    times
        `(drifter, obs)` (the powers use the stencils at the median spacing h only: gaps and irregular times are left
        out).
    noise_std
        known position noise std (else estimated).
    """
    positions = np.asarray(positions, np.float64)
    n_obs = positions.shape[1]
    h = float(np.nanmedian(np.diff(np.asarray(times, np.float64), axis=1))) if n_obs > 1 else 0.0
    powers = {m: _third_difference_power(positions, times, m, h) for m in 2 ** np.arange(12) if 6 * m <= n_obs}
    powers = {m: p for m, p in powers.items() if np.isfinite(p)}
    if len(powers) < 2 or 1 not in powers or 2 not in powers or not h > 0 or not powers[1] > 0:
        return 1, {"lag_reason": "too few observations or exact repeats"}
    if powers[2] > 16.0 * powers[1]:
        return 1, {"lag_reason": "smooth at lag 1"}
    robust = {m: _third_difference_power(positions, times, m, h, robust=True) for m in powers}
    heavy = powers[1] > HEAVY_TAIL * robust[1]  # a few fixes off their track carry the mean square
    if heavy:
        ratio = powers[1] / max(robust[1], 1e-300)
        powers = {m: p for m, p in robust.items() if np.isfinite(p)}
        if powers[2] > 16.0 * powers[1] or not powers[1] > 0:
            return 1, {"lag_reason": "smooth at lag 1 but for a few fixes off the track",
                       "third_difference_heavy_tail": ratio,
                       "noise_note": _heavy_tail_note(ratio, "none, smooth at lag 1")}
    sigma2 = noise_std**2 if noise_std is not None else powers[1] / 20.0
    strong = [m for m, p in powers.items() if p > 10.0 * powers[1]] or [max(powers)]
    m = min(strong)
    j2 = max(powers[m] - powers[1], 1e-300) / (m * h) ** 6
    best = (24.0 * np.sqrt(sigma2 / j2)) ** (1.0 / 3.0) / h
    usable = [lag for lag in lags if n_obs >= 6 * lag] or [1]
    lag = min(usable, key=lambda lag: abs(np.log(lag) - np.log(max(best, 1e-12))))
    heavy_info = {"third_difference_heavy_tail": ratio} if heavy else {}
    if heavy and noise_std is None:
        heavy_info["noise_std_source"] = "median of the third differences"
        heavy_info["noise_note"] = _heavy_tail_note(ratio, f"std {np.sqrt(sigma2):.3g} (model units)")
    return int(lag), {"noise_std_est": float(np.sqrt(sigma2)), "third_derivative_rms": float(np.sqrt(j2)),
                      "optimal_lag": float(best), **heavy_info}


def observation_regime(positions, times, model: FlowModel, config: LinearConfig) -> dict:
    """Returns how the tracks were observed: {"lag", "observation_spacing", "sparse", choose_lag's info}.

    The lag is config.fd_lag, or `choose_lag` when it is None (lag > 1: noise above truncation);
    sparse: observation spacing above config.sparse_steps model steps.
    """
    lag, info = (config.fd_lag, {}) if config.fd_lag is not None else choose_lag(positions, times, config.noise_std)
    h = float(np.nanmedian(np.diff(np.asarray(times, np.float64), axis=1))) if np.shape(times)[1] > 1 else np.inf
    return {**info, "lag": lag, "observation_spacing": h, "sparse": not h <= config.sparse_steps * model.dt * 1.0001}


def velocity_data(positions, times, release, model: FlowModel, config: LinearConfig, regime=None):
    """Returns (G `(n, 2K)`, y `(n,)`, noise_var or None, info) of the finite-difference velocities y = G x + e.

    regime: `observation_regime` of the tracks (computed when None); the velocities are
    `difference_velocities`, G the velocity basis at their points and times.

    Raises
    ------
    ValueError
        if no pair of valid observations `lag` apart exists.
    """
    info = observation_regime(positions, times, model, config) if regime is None else regime
    points, t, vel, span, order, gain = difference_velocities(positions, times, release, config, info)
    g = velocity_basis(points, t, *model.modes).reshape(-1, 2 * model.n_modes)
    noise_var = None
    if config.noise_std is not None and config.noise_std > 0:
        noise_var = gain * config.noise_std**2 / float(np.median(span)) ** 2
    return g, vel.reshape(-1), noise_var, {**info, "fd_order": order, "pairs": len(t)}


def difference_velocities(positions, times, release, config: LinearConfig, regime: dict):
    """Returns points `(n, 2)`, times `(n,)`, velocities `(n, 2)`, spans `(n,)`, order and noise gain.

    Smooth dense tracks (lag 1, not sparse) get the sixth-order seven-point difference
    (`central_differences`), unless config.fd_order says otherwise (at wide spacings the
    five-point difference is worse than the pairs: docs/results/assimilation.md);
    where no regular stencil of valid observations exists, the second-order pairs at the
    regime's lag. The noise gain: velocity noise = gain * sigma^2 / spacing^2.

    Raises
    ------
    ValueError
        if no pair of valid observations `lag` apart exists.
    """
    lag = regime["lag"]
    order = config.fd_order if config.fd_order is not None else (6 if lag == 1 and not regime["sparse"] else 2)
    if order > 2 and lag == 1:
        points, t, vel, span = central_differences(positions, times, release, order)
        gain = noise_gain(order)
    if order == 2 or lag > 1 or (len(t) == 0 and config.fd_order is None):  # no regular stencil: pairs
        points, t, vel, span = finite_differences(positions, times, release, lag)
        order, gain = 2, 2.0
    if len(t) == 0:
        raise ValueError(f"no two valid observations {lag} apart: cannot form finite differences")
    return points, t, vel, span, order, gain


def correlation_time(series) -> float:
    """Returns the integrated autocorrelation time of the columns of series `(step, column)`, pooled.

    tau = 1 + 2 sum_{k=1}^{M} rho_k with Sokal's window, the smallest M >= 5 tau(M): the
    factor by which correlated errors carry less information than as many white ones.
    """
    x = np.asarray(series, np.float64)
    x = x - x.mean(0)
    n = x.shape[0]
    if n < 4 or not np.any(x):
        return 1.0
    spectrum = np.fft.rfft(x, 2 * n, axis=0)
    acov = np.fft.irfft(np.abs(spectrum) ** 2, axis=0)[:n].sum(1)
    rho = acov / acov[0]
    tau = 1.0 + 2.0 * np.cumsum(rho[1:])
    window = np.flatnonzero(np.arange(1, n) >= 5.0 * tau)
    return float(max(tau[window[0]] if len(window) else tau[-1], 1.0))


def data_kind(regime: dict, config: LinearConfig) -> str:
    """Returns "displacements" or "velocities": the observation model config.track_data names, or by regime.

    "auto": displacements for dense tracks whose lag is above 1 (position noise above the
    truncation error of differences), velocities otherwise (exact dense tracks, where
    differences are accurate, and sparse ones, where the trapezoid integral is not).
    """
    if config.track_data != "auto":
        return config.track_data
    return "displacements" if regime["lag"] > 1 and not regime["sparse"] else "velocities"


def curvature_factor(model: FlowModel, noise_var: float) -> np.ndarray:
    """Returns exp(-2 pi^2 sigma^2 |k|^2) twice `(2K,)`: the column factor that de-biases whitened displacements.

    The errors-in-variables model is first order in the position noise eps. At second order,
    G at z + eps has mean G(z) + sigma^2 / 2 Laplacian G (Laplacian = -(2 pi |k|)^2 per mode),
    which adds - sigma^2 / 2 sum_i c_ji Laplacian w(z_i) to the data, and the whitening
    (I - M)^-1, its Jacobian M also at noisy points, correlates with eps and adds sigma^2 times
    the same sum. Net, the whitened data are A (1 - 2 pi^2 sigma^2 |k|^2) x: uncorrected, the
    high modes shrink by that fraction (3.6e-4 at |k|^2 = 18, sigma = 1e-3), which with many
    drifters exceeds their posterior std.
    """
    k2 = (model.k1.astype(np.float64) ** 2 + model.k2.astype(np.float64) ** 2)
    return np.tile(np.exp(-2.0 * np.pi**2 * noise_var * k2), 2)
