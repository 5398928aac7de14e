"""`linear`: linear-Gaussian inversion of finite-difference velocities along the tracks.

At known positions and times the velocity is linear in x = (Re c, Im c):
w(z, t) = Re( sum_k c_k e^{i omega_k t} e^{2 pi i k.z} 2 pi i (-k2, k1) ) = G(z, t) x.
Central differences (z_{j+L} - z_j) / (t_{j+L} - t_j) estimate w at the midpoint position
and time with an O(dt_obs^2) error; on smooth dense tracks the five-point difference
(8 (z_{j+1} - z_{j-1}) - (z_{j+2} - z_{j-2})) / (12 h) estimates it at the observed point z_j
with an O(h^4) error, so with dense exact tracks y = G x + e, e small. With
the prior x ~ N(0, D), D = diag(a_k^2 / 2) twice, and e ~ N(0, s^2 I) the posterior is
Gaussian in closed form (Kalman / Bayes linear update):
    cov = (G^T G / s^2 + D^-1)^-1,  mean = cov G^T y / s^2 = D G^T (G D G^T + s^2 I)^-1 y.
s^2 is chosen by empirical Bayes (maximum marginal likelihood of y over a log grid) unless
a position noise std is given (then s^2 = 2 noise_std^2 / dt_pair^2, the difference noise).

The lag L trades the difference noise 2 sigma^2 / Delta^2 (Delta = L h, h the observation
spacing) against the truncation bias J Delta^2 / 24 (J the RMS third derivative of the
tracks): the sum is smallest at Delta* = (24 sigma / J)^(1/3). `choose_lag` estimates sigma and
J from the third differences of the tracks (or takes sigma = noise_std) and picks the lag of
FD_LAGS nearest Delta* / h; exact dense tracks get L = 1.

Limits (measured in experiments/assimilation_benchmark.py): sparse sampling makes the
finite differences biased (error ~ |d^3 z / dt^3| dt_obs^2 / 24 grows fast with the
spacing), and position noise sigma becomes velocity noise sqrt(2) sigma / dt_obs; the
k = (0, 0) mode never moves a drifter, its G column is zero, so it keeps its prior.
"""

from __future__ import annotations

import numpy as np

from lagda.assimilation.methods._common import FieldEstimate, FlowModel, gaussian_estimate, log_grid, valid_mask, velocity_matrix
from lagda.assimilation.methods.config import FD_LAGS, AssimConfig


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

    Args:
        positions: `(drifter, obs, 2)` unwrapped; times: `(drifter, obs)`.
        release: `(drifter, 2)` or None.
    """
    positions, times = _with_release(positions, times, release)
    ok = valid_mask(positions, times)
    pair_ok = ok[:, :-lag] & ok[:, lag:]
    z_a, z_b = positions[:, :-lag][pair_ok], positions[:, lag:][pair_ok]
    t_a, t_b = times[:, :-lag][pair_ok], times[:, lag:][pair_ok]
    return (z_a + z_b) / 2.0, (t_a + t_b) / 2.0, (z_b - z_a) / (t_b - t_a)[:, None], t_b - t_a


def displacement_data(positions, times, release, model: FlowModel):
    """Returns (A `(n, 2K)`, b `(n,)`) of the integral observation model b = A x + e, e white.

    Displacements instead of differences: z(t_j) - z(t_a) = int_{t_a}^{t_j} G(z(s), s) ds x, with
    the integral a cumulative trapezoid of G at the observed points. G is evaluated at noisy
    positions, but its error (grad w) eps averages out along the path (~1e-6 at sigma = 1e-3,
    dt = 1e-4), so the noise stays the white position noise instead of being amplified by
    1/dt_obs as in finite differences. Each run of consecutive valid observations is one
    segment; a segment starting at a known release point is anchored there, any other is
    centred per coordinate, which removes its unknown start exactly (a flat prior on it).

    Args:
        positions: `(drifter, obs, 2)` unwrapped, NaN where missing; times: `(drifter, obs)`;
        release: `(drifter, 2)` or None.
    """
    positions, times = np.asarray(positions, np.float64), np.asarray(times, np.float64)
    rows, data = [], []
    for d in range(positions.shape[0]):
        ok = valid_mask(positions[d], times[d])
        edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
        for start, stop in zip(edges[::2], edges[1::2]):
            p, t = positions[d, start:stop], times[d, start:stop]
            anchored = release is not None and start == 0 and np.all(np.isfinite(release[d]))
            if anchored:
                p, t = np.concatenate([np.asarray(release[d], np.float64)[None], p]), np.concatenate([[0.0], t])
            if len(t) < 2:
                continue
            g = velocity_matrix(p, t, model.k1, model.k2, model.omega)  # (point, 2, 2K)
            a = np.concatenate([np.zeros((1, *g.shape[1:])), np.cumsum(0.5 * np.diff(t)[:, None, None] * (g[:-1] + g[1:]), 0)])
            b = p - p[0]
            if anchored:
                a, b = a[1:], b[1:]
            else:
                a, b = a - a.mean(0), b - b.mean(0)
            rows.append(a.reshape(-1, a.shape[-1]))
            data.append(b.reshape(-1))
    if not rows:
        raise ValueError("no segment of two valid observations: cannot form displacements")
    return np.concatenate(rows), np.concatenate(data)


def five_point_differences(positions, times, release=None):
    """Returns positions `(point, 2)`, times `(point,)`, velocities `(point, 2)`, spacings `(point,)`.

    The fourth-order central difference w(t_j) = (8 (z_{j+1} - z_{j-1}) - (z_{j+2} - z_{j-2})) / (12 h)
    at every observation j whose four neighbours are valid and equally spaced (h). Unlike the
    second-order difference it is taken at an observed point, not at a midpoint off the path,
    and its truncation error is O(h^4) instead of O(h^2): on exact dense tracks the
    second-order bias is a smooth, correlated error that the white-noise model cannot describe.
    A known release point is used as an observation at t = 0.
    """
    positions, times = _with_release(positions, times, release)
    if positions.shape[1] < 5:
        return np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2)), np.zeros(0)
    ok = valid_mask(positions, times)
    z = [positions[:, i : positions.shape[1] - 4 + i] for i in range(5)]
    t = [times[:, i : times.shape[1] - 4 + i] for i in range(5)]
    h = t[3] - t[2]
    regular = np.all([np.isclose(t[i + 1] - t[i], h, rtol=1e-6) for i in range(4)], axis=0) & (h > 0)
    use = np.all([ok[:, i : ok.shape[1] - 4 + i] for i in range(5)], axis=0) & regular
    vel = (8.0 * (z[3] - z[1]) - (z[4] - z[0])) / (12.0 * h[..., None])
    return z[2][use], t[2][use], vel[use], h[use]


def linear_posterior(g, y, prior_var, noise_var=None, n_grid: int = 41):
    """Returns the Gaussian posterior (mean `(p,)`, cov `(p, p)`, noise_var) of y = G x + e.

    Whitened with x = D^{1/2} w and the SVD G D^{1/2} = U diag(s) V^T (an SVD rather than an
    eigendecomposition of G^T G, so that weak directions keep their relative accuracy):
    mean_w = V diag(s / (s^2 + noise)) U^T y,  cov_w = V diag(noise / (s^2 + noise)) V^T.
    Without noise_var, it maximises the log marginal likelihood of y ~ N(0, G D G^T + noise I),
    -1/2 [n log noise + sum log(1 + s^2 / noise) + (|y|^2 - sum z^2 s^2 / (s^2 + noise)) / noise],
    z = U^T y, over a log grid spanning 1e-14..1 of mean(y^2).

    Args:
        g: `(n, p)` design; y: `(n,)` data; prior_var: `(p,)` diagonal prior covariance D.
    Raises:
        ValueError: on mismatched shapes or no data.
    """
    if g.ndim != 2 or y.shape != (g.shape[0],) or prior_var.shape != (g.shape[1],) or g.shape[0] == 0:
        raise ValueError(f"expected g (n, p), y (n,), prior_var (p,) with n > 0, got {g.shape}, {y.shape}, {prior_var.shape}")
    root, s, vt, z = _whitened_svd(g, y, prior_var)
    if noise_var is None:
        noise_var, _ = _evidence_maximum(s, z, float(y @ y), len(y), n_grid)
    mean_w = vt.T @ (s * z / (s**2 + noise_var))
    cov_w = (vt.T * (noise_var / (s**2 + noise_var))[None, :]) @ vt
    return root * mean_w, root[:, None] * cov_w * root[None, :], noise_var


def log_evidence(g, y, prior_var, noise_var=None, n_grid: int = 41) -> float:
    """Returns log N(y; 0, G D G^T + s^2 I) up to a constant, at noise_var or maximised over it.

    The same marginal likelihood that `linear_posterior` maximises over s^2; comparing it
    between priors D (and prior means, through y - G m) selects the prior the data support.
    """
    _, s, _, z = _whitened_svd(g, y, prior_var)
    yy, n = float(y @ y), len(y)
    if noise_var is None:
        return _evidence_maximum(s, z, yy, n, n_grid)[1]
    return _log_marginal(s, z, yy, n, noise_var)


def _whitened_svd(g, y, prior_var):
    """Returns (D^{1/2}, s `(p,)`, V^T `(p, p)`, z = U^T y `(p,)`) of G D^{1/2} = U diag(s) V^T, zero-padded to p."""
    root = np.sqrt(prior_var)
    u, s, vt = np.linalg.svd(g * root[None, :], full_matrices=False)
    s = np.concatenate([s, np.zeros(len(root) - len(s))])  # fewer data than parameters
    vt = np.concatenate([vt, _complement(vt, len(root))], axis=0)
    z = np.concatenate([u.T @ y, np.zeros(len(root) - u.shape[1])])
    return root, s, vt, z


def _log_marginal(s, z, yy: float, n: int, noise_var: float) -> float:
    return -0.5 * (n * np.log(noise_var) + np.sum(np.log1p(s**2 / noise_var))
                   + (yy - np.sum(z**2 * s**2 / (s**2 + noise_var))) / noise_var)


def _evidence_maximum(s, z, yy: float, n: int, n_grid: int) -> tuple[float, float]:
    """Returns (noise_var, log evidence) at the maximum over a log grid spanning 1e-14..1 of mean(y^2)."""
    grid = log_grid(1e-14, 1.0, n_grid) * max(yy / n, 1e-300)
    log_ml = [_log_marginal(s, z, yy, n, v) for v in grid]
    best = int(np.argmax(log_ml))
    return float(grid[best]), float(log_ml[best])


def _complement(vt, p: int) -> np.ndarray:
    """Returns an orthonormal basis `(p - r, p)` of the complement of the rows of vt `(r, p)`."""
    if vt.shape[0] >= p:
        return np.zeros((0, p))
    q, _ = np.linalg.qr(np.concatenate([vt.T, np.eye(p)], axis=1))
    return q[:, vt.shape[0]:p].T


def _third_difference_power(positions, lag: int) -> float:
    """Returns the mean square of the lag-`lag` third differences of the positions `(drifter, obs, 2)` (NaN skipped)."""
    z = positions
    if z.shape[1] <= 3 * lag:
        return float("nan")
    d3 = z[:, 3 * lag:] - 3 * z[:, 2 * lag:-lag] + 3 * z[:, lag:-2 * lag] - z[:, :-3 * lag]
    return float(np.nanmean(d3**2))


def choose_lag(positions, times, noise_std=None, lags=FD_LAGS) -> tuple[int, dict]:
    """Returns (lag, info): the finite-difference lag minimising noise + truncation error.

    With h the observation spacing, the lag-M third difference of positions has mean square
    P(M) = 20 sigma^2 + J^2 (M h)^6 (per coordinate, J the RMS third derivative). If
    P(2) > 16 P(1) the tracks are smooth at lag 1 (exact or sparse): lag 1. Otherwise sigma^2 =
    P(1) / 20 (or noise_std^2) and J^2 = (P(M) - P(1)) / (M h)^6 at the smallest M = 2^i with
    P(M) > 10 P(1); the central difference over Delta = L h has error variance
    2 sigma^2 / Delta^2 + (J Delta^2 / 24)^2, smallest at Delta* = (24 sigma / J)^(1/3), and
    the lag of `lags` nearest Delta* / h (in log) with >= 6 lags per track is returned.

    Args:
        positions: `(drifter, obs, 2)`; times: `(drifter, obs)` (regular per drifter).
        noise_std: known position noise std (else estimated).
    """
    positions = np.asarray(positions, np.float64)
    n_obs = positions.shape[1]
    h = float(np.nanmedian(np.diff(np.asarray(times, np.float64), axis=1))) if n_obs > 1 else 0.0
    powers = {m: _third_difference_power(positions, m) for m in 2 ** np.arange(12) if 6 * m <= n_obs}
    if len(powers) < 2 or not h > 0 or not powers[1] > 0:
        return 1, {"lag_reason": "too few observations or exact repeats"}
    if powers[2] > 16.0 * powers[1]:
        return 1, {"lag_reason": "smooth at lag 1"}
    sigma2 = noise_std**2 if noise_std is not None else powers[1] / 20.0
    strong = [m for m, p in powers.items() if p > 10.0 * powers[1]] or [max(powers)]
    m = min(strong)
    j2 = max(powers[m] - powers[1], 1e-300) / (m * h) ** 6
    best = (24.0 * np.sqrt(sigma2 / j2)) ** (1.0 / 3.0) / h
    usable = [lag for lag in lags if n_obs >= 6 * lag] or [1]
    lag = min(usable, key=lambda lag: abs(np.log(lag) - np.log(max(best, 1e-12))))
    return int(lag), {"noise_std_est": float(np.sqrt(sigma2)), "third_derivative_rms": float(np.sqrt(j2)),
                      "optimal_lag": float(best)}


def observation_regime(positions, times, model: FlowModel, config: AssimConfig) -> dict:
    """Returns how the tracks were observed: {"lag", "observation_spacing", "sparse", choose_lag's info}.

    The lag is config.fd_lag, or `choose_lag` when it is None (lag > 1: noise above truncation);
    sparse: observation spacing above config.sparse_steps model steps.
    """
    lag, info = (config.fd_lag, {}) if config.fd_lag is not None else choose_lag(positions, times, config.noise_std)
    h = float(np.nanmedian(np.diff(np.asarray(times, np.float64), axis=1))) if np.shape(times)[1] > 1 else np.inf
    return {**info, "lag": lag, "observation_spacing": h, "sparse": not h <= config.sparse_steps * model.dt * 1.0001}


def velocity_data(positions, times, release, model: FlowModel, config: AssimConfig, regime=None):
    """Returns (G `(n, 2K)`, y `(n,)`, noise_var or None, info) of the finite-difference velocities y = G x + e.

    regime: `observation_regime` of the tracks (computed when None). Smooth dense tracks (lag 1,
    not sparse) get the fourth-order five-point difference (`five_point_differences`; measured
    at 100-step spacing it was worse than the pairs, linear 0.93 against 0.90 with one
    drifter), unless config.fd_order says otherwise; where no five regular valid observations
    exist, the second-order pairs are used.
    Raises:
        ValueError: if no pair of valid observations `lag` apart exists.
    """
    info = observation_regime(positions, times, model, config) if regime is None else regime
    lag = info["lag"]
    order, noise_gain = 2, 2.0  # velocity noise = noise_gain * sigma^2 / spacing^2
    if lag == 1 and (config.fd_order == 4 or (config.fd_order is None and not info["sparse"])):
        points, t, vel, span = five_point_differences(positions, times, release)
        order, noise_gain = 4, (2 * 8**2 + 2) / 12**2
    if order == 2 or (len(t) == 0 and config.fd_order is None):  # no five regular points: pairs
        points, t, vel, span = finite_differences(positions, times, release, lag)
        order, noise_gain = 2, 2.0
    if len(t) == 0:
        raise ValueError(f"no two valid observations {lag} apart: cannot form finite differences")
    g = velocity_matrix(points, t, model.k1, model.k2, model.omega).reshape(-1, 2 * model.n_modes)
    noise_var = None
    if config.noise_std is not None and config.noise_std > 0:
        noise_var = noise_gain * config.noise_std**2 / float(np.median(span)) ** 2
    return g, vel.reshape(-1), noise_var, {**info, "fd_order": order, "pairs": len(t)}


def assimilate_linear(positions, times, release, model: FlowModel, config: AssimConfig, key) -> FieldEstimate:
    """Returns the linear-Gaussian posterior of one field from finite-difference velocities.

    Args:
        positions: `(drifter, obs, 2)`; times: `(drifter, obs)`; release: `(drifter, 2)` or None.
    Raises:
        ValueError: if no pair of valid observations fd_lag apart exists.
    """
    g, y, noise_var, info = velocity_data(positions, times, release, model, config)
    mean, cov, noise_var = linear_posterior(g, y, model.prior_var, noise_var, config.noise_grid)
    return gaussian_estimate(key, mean, cov, config.members, {**info, "velocity_noise_std": float(np.sqrt(noise_var))})
