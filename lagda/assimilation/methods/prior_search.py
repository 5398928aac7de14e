"""Without a climatology: the prior's spectrum and the OU error model chosen from the tracks themselves.

The prior of a chosen basis (lagda.assimilation.methods.basis) is a smooth log-spectrum per Legendre degree,
    log E|c_kp|^2 / 2 = a_p + b u + c u^2,  u = log(|k| / k0),  k0 = k_max / 2,
with the uniform current N(0, msq) per degree and component (msq: the tracks' mean square velocity per
component). Its P + 3 parameters maximise the evidence (the marginal likelihood; `normal_log_evidence`) of
the velocities under the OU + white error model of `representation`. The error model (time scale tau and
variance rep_var) is chosen by K-fold cross-validation over held-out drifters: the evidence prefers long,
small OU errors on the smooth unresolved velocity, which fit worse, while held-out drifters sample the
Eulerian field the estimate is scored on. The grid is searched coordinate-wise (the time scales at the middle
variance, then the variances at the best time scale), each coordinate by descending from its middle point while the
CV ratio falls (`climb`: the grid's far end is tried only when the ratio still falls towards it); the variance is
then refined at the vertex of the parabola in log variance through the least point and its two neighbours when its
CV ratio is less: two grid variances near a tie (a factor 2 apart) would otherwise make the choice jump with a few
fixes. For speed the
shape is fitted once at the grid's middle error model and only its amplitude at each of the others, on lag-1 pairs
thinned to about one a day (the OU time scale of days makes denser pairs redundant). If the best model predicts
held-out drifters no better than zero (CV ratio >= 1) or its evidence exceeds the zero-signal model's by no more than
one nat per fitted prior parameter, the estimate is the prior mean (zero) and the info says so: never worse than
answering zero.

The likelihood is Gaussian, so a position fix a few kilometres off that passed cleaning (lagda.io.clean's spike rule
judges speeds only) gives two difference velocities far off the flow, which would set the search's scale (the mean
square velocity), drag the fit and the CV ratio, and can turn the answer into zero. So a velocity whose residual lies
over OUTLIER_K standard deviations from the residuals' median is left out (`velocity_outliers`), the standard
deviation the larger of the robust one (1.4826 x the median absolute deviation, per component) and the error
model's: before the search, of a first fit at the start spectrum and the grid's middle error model
(`screen_first_fit`), and after it, of the chosen estimate, whose final solve, CV ratio and the evidence the zero
guard judges are then redone without them at the chosen prior and error model. Each is flagged again against the fit
without its outliers (the first fit was dragged by them), at most OUTLIER_PASSES fits each; no second search. The
residuals are from a fitted field, so a jet the basis resolves is no outlier, and the error model's floor keeps a
field the basis cannot follow exactly; when none is flagged the answer is the plain search's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import median_abs_deviation

from lagda.assimilation.methods.linear_gaussian import (
    normal_log_evidence,
    normal_posterior,
    rows_log_evidence,
    rows_posterior_mean,
)
from lagda.assimilation.methods.representation import thin_pairs, track_series, whiten_track_series
from lagda.assimilation.methods.track_data import CHI2_1_MEDIAN
from simulate.flow import current_mask, velocity_basis

LOG_VAR_RANGE = 60.0  # prior log-variances searched within this of the start's largest
OUTLIER_K = 6.0  # searched pairs whose residual is over this many standard deviations (`velocity_outliers`): out
OUTLIER_PASSES = 2  # the outliers flagged again against the estimate without them at most this many times
NO_MOTION = "no drifter moves between its fixes (every velocity is zero)"


@dataclasses.dataclass(frozen=True)
class PriorSearch:
    """The prior and error model search of a basis without a climatology (`FlowModel.search`).

    Attributes
    ----------
    day
        one day in model time (the error model grids are in days).
    taus_days
        OU time scales tried
    var_fractions
        OU variances tried, fractions of the tracks' msq.
    folds
        drifters held out in turn (drifter i in fold i mod folds)
    spacing_days
        lag-1 pairs kept.
    """

    day: float
    taus_days: tuple[float, ...] = (2.0, 4.0, 8.0, 16.0)
    var_fractions: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
    folds: int = 8
    spacing_days: float = 1.0


@dataclasses.dataclass
class _Whitened:
    """The data of one error model, whitened, per fold of drifters: as rows when there are fewer rows than
    unknowns (the evidence and posterior means then work with (rows x rows) matrices), else as normal equations.

    Its evidence and means are the same either way (to rounding); only their cost differs: a sparse set of tracks
    in a large basis (one box's drifters: a few hundred thinned pairs against a few thousand unknowns) factors
    (rows x rows) matrices in place of (unknowns x unknowns) ones, and keeps its rows in place of a Gram matrix
    per fold.
    """

    rows: list | None  # per fold (G_f `(m_f, p)`, y_f `(m_f,)`), when the rows are fewer than the unknowns: views
    stacked: tuple | None  # into (G, y) of every fold, stacked once (the evidence reads them at every step)
    grams: list | None  # otherwise per fold G_f^T G_f `(p, p)` and G_f^T y_f `(p,)`, and their sums
    rhss: list | None
    gram: np.ndarray | None
    rhs: np.ndarray | None
    yy: float  # y^T y

    @classmethod
    def build(cls, arranged, error):
        """Whitens each fold's data (`representation.track_series` of its rows) against error = (rep_var, tau,
        noise_var) by representation.whiten_track_series."""
        rows = [whiten_track_series(fold, *error)[:2] for fold in arranged]
        yy = float(sum(yw @ yw for _, yw in rows))
        if sum(len(yw) for _, yw in rows) < rows[0][0].shape[1]:
            stacked = np.concatenate([gw for gw, _ in rows]), np.concatenate([yw for _, yw in rows])
            ends = np.cumsum([0] + [len(yw) for _, yw in rows])
            views = [(stacked[0][lo:hi], stacked[1][lo:hi]) for lo, hi in zip(ends[:-1], ends[1:])]
            return cls(views, stacked, None, None, None, None, yy)
        grams, rhss = [_gram(gw) for gw, _ in rows], [gw.T @ yw for gw, yw in rows]
        return cls(None, None, grams, rhss, sum(grams), sum(rhss), yy)

    @property
    def dual(self) -> bool:
        return self.rows is not None

    def _stacked(self, leave_out=None):
        if leave_out is None:
            return self.stacked
        kept = [r for f, r in enumerate(self.rows) if f != leave_out]
        return np.concatenate([gw for gw, _ in kept]), np.concatenate([yw for _, yw in kept])

    def normal_equations(self, leave_out=None) -> tuple[np.ndarray, np.ndarray]:
        """Returns (G^T G `(p, p)`, G^T y `(p,)`) of every fold but `leave_out`."""
        if self.dual:
            gw, yw = self._stacked(leave_out)
            return _gram(gw), gw.T @ yw
        if leave_out is None:
            return self.gram, self.rhs
        return self.gram - self.grams[leave_out], self.rhs - self.rhss[leave_out]

    def log_evidence(self, prior_var, gradient: bool = False):
        """`linear_gaussian.normal_log_evidence` of every fold's data."""
        if self.dual:
            return rows_log_evidence(*self._stacked(), prior_var, gradient=gradient)
        return normal_log_evidence(*self.normal_equations(), self.yy, prior_var, gradient=gradient)

    def mean(self, prior_var, leave_out=None) -> np.ndarray:
        """The posterior mean `(p,)` from every fold but `leave_out`."""
        if self.dual:
            return rows_posterior_mean(*self._stacked(leave_out), prior_var)
        return normal_posterior(*self.normal_equations(leave_out), prior_var, covariance=False)[0]

    def posterior(self, prior_var) -> tuple[np.ndarray, np.ndarray]:
        """The posterior mean `(p,)` and covariance `(p, p)` of every fold's data (from the normal equations: the
        covariance of well-determined directions is not a small difference of large numbers there)."""
        return normal_posterior(*self.normal_equations(), prior_var)


def _gram(gw) -> np.ndarray:
    """Returns G^T G `(p, p)` of rows G `(m, p)` (BLAS syrk, mirrored)."""
    gram = dsyrk(1.0, gw, trans=1)  # G^T G in the upper triangle, zeros below
    gram += np.triu(gram, 1).T
    return gram


def spectrum_origin(model) -> float:
    """Returns k0, the wavenumber where the log-spectrum's u = log(|k| / k0) is 0: half the basis's largest |k|."""
    return max(float(np.max(np.hypot(model.k1, model.k2))), 1.0) / 2.0


def log_spectrum_features(model, msq: float):
    """Returns (features `(2K, P + 3)`, offset `(2K,)`): log prior_var = features @ theta + offset for the
    unknowns x = (Re c, Im c), theta = (a_0..a_P, b, c); the current's rows are 0 with offset log msq."""
    degree = np.asarray(model.time.degree)
    current = np.zeros(len(degree), bool) if current_mask(model.time) is None else current_mask(model.time) > 0
    k, k0 = np.hypot(model.k1, model.k2).astype(np.float64), spectrum_origin(model)
    u = np.log(np.where(current, k0, k) / k0)
    feats = np.concatenate([np.eye(int(degree.max()) + 1)[degree], u[:, None], u[:, None] ** 2], axis=1)
    feats[current] = 0.0
    offset = np.where(current, np.log(msq), 0.0)
    return np.tile(feats, (2, 1)), np.tile(offset, 2)


def _start(model, features, msq: float) -> np.ndarray:
    """Returns theta of slope -4 whose spatial modes carry the tracks' mean square velocity (per component)."""
    theta = np.zeros(features.shape[1])
    theta[-2] = -4.0
    k2 = (2 * np.pi) ** 2 * (np.tile(model.k1, 2) ** 2 + np.tile(model.k2, 2) ** 2) / 2.0
    degree = np.tile(np.asarray(model.time.degree), 2)
    free = np.any(features != 0, axis=1)
    velocity_var = np.sum((k2 * np.exp(features @ theta) / (2 * degree + 1))[free])
    theta[: -2] = np.log(msq / velocity_var)
    return theta


def fit_shape(whitened: _Whitened, features, offset, theta0) -> tuple[np.ndarray, float]:
    """Returns (theta, log evidence ratio to zero signal) maximising the evidence over the log-spectrum (BFGS).

    Prior variances beyond e^LOG_VAR_RANGE of the start's largest are clipped (no gradient there): a line search
    probing an absurd spectrum stays finite.
    """
    top = float(np.max(features @ theta0 + offset))

    def objective(theta):
        log_var = features @ theta + offset
        ratio, grad = whitened.log_evidence(np.exp(np.clip(log_var, top - LOG_VAR_RANGE, top + LOG_VAR_RANGE)),
                                            gradient=True)
        grad = np.where(np.abs(log_var - top) < LOG_VAR_RANGE, grad, 0.0)
        return -ratio, -(features.T @ grad)

    found = minimize(objective, theta0, jac=True, method="BFGS", options={"gtol": 0.05, "maxiter": 200})
    return found.x, float(-found.fun)


def fit_amplitude(whitened: _Whitened, features, offset, theta) -> tuple[np.ndarray, float]:
    """Returns (theta with its a_p shifted by one common amount, log evidence ratio) at the shift of most evidence."""
    shift = np.zeros(len(theta))
    shift[: -2] = 1.0
    ratio = lambda s: whitened.log_evidence(np.exp(features @ (theta + s * shift) + offset))
    found = minimize_scalar(lambda s: -ratio(s), bounds=(-6.0, 6.0), method="bounded", options={"xatol": 0.05})
    return theta + found.x * shift, float(-found.fun)


def cross_validate(whitened: _Whitened, raw, prior_var) -> float:
    """Returns the held-out drifters' mean square velocity residual over their mean square (zero estimate: 1).

    raw: per fold (g `(m, 2, p)`, vel `(m, 2)`) unwhitened; fold f's estimate uses every other fold.
    """
    sse = zero = 0.0
    for fold, (g, vel) in enumerate(raw):
        x = whitened.mean(prior_var, leave_out=fold)
        sse += float(np.sum((vel - g @ x) ** 2))
        zero += float(np.sum(vel**2))
    return sse / max(zero, 1e-300)


def climb(grid, objective, refine: bool = False):
    """Returns the point of `grid` (increasing, positive) of least objective found by descending from its middle
    point: its two neighbours, then onwards in the better direction while the objective falls. On a unimodal
    objective this is the grid's minimum; it spares the grid's far end (the CV ratio of the error models falls to one
    best time scale and variance, then rises).

    With refine, when that point is interior the vertex of the parabola through it and its two neighbours in
    log(grid) (all three already evaluated) is evaluated too, and returned when its objective is less: a near tie
    between two grid points then gives a point between them, which moves continuously with the data, instead of a
    jump from one to the other.
    """
    values = {}

    def value(i):
        if i not in values:
            values[i] = objective(grid[i])
        return values[i]

    best = (len(grid) - 1) // 2
    for step in (-1, 1):
        while 0 <= best + step < len(grid) and value(best + step) < value(best):
            best += step
    if not refine or not 0 < best < len(grid) - 1:
        return grid[best]
    x = np.log(np.asarray(grid[best - 1: best + 2], np.float64))
    f = np.array([value(i) for i in (best - 1, best, best + 1)])
    curvature, slope, _ = np.polyfit(x - x[1], f, 2)
    if not curvature > 0:  # flat: the grid point stands
        return grid[best]
    vertex = float(np.exp(x[1] - slope / (2 * curvature)))
    return vertex if objective(vertex) < f[1] else grid[best]


def velocity_outliers(residuals, k: float = OUTLIER_K, error_std: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Returns (outlier `(n,)` bool, threshold `(2,)`): rows whose residual `(n, 2)` lies over k standard deviations
    from its component's median, the standard deviation the larger of the component's robust one (1.4826 x its
    median absolute deviation) and error_std (the error model's: the residuals of a field the basis cannot follow
    exactly are no outliers within it, even where most residuals are tiny).

    A component whose residuals are mostly equal (zero MAD) and error_std 0 flags nothing.
    """
    residuals = np.asarray(residuals, np.float64)
    centre = np.median(residuals, axis=0)
    threshold = k * np.maximum(median_abs_deviation(residuals, axis=0, scale="normal"), error_std)
    outlier = np.any((np.abs(residuals - centre) > threshold) & (threshold > 0), axis=1)
    return outlier, threshold


def screen_first_fit(g, vel, track, t, model, noise_var: float, rep_var=None, tau=None) -> tuple[np.ndarray, int]:
    """Returns (outlier `(n,)` bool, fits): the `velocity_outliers` of the residuals of a first fit, flagged again
    against the fit without them, at most OUTLIER_PASSES fits in all.

    The first fit: the start spectrum (`_start`) and the grid's middle error model (rep_var, tau when given) at the
    mean square velocity estimated from the median of the squares (a few outliers do not set it). g `(n, 2, 2K)`,
    vel `(n, 2)`, track and t `(n,)`: the searched pairs.
    """
    spec = model.search
    msq = float(np.median(vel**2) / CHI2_1_MEDIAN) or float(np.mean(vel**2))
    features, offset = log_spectrum_features(model, msq)
    prior_var = np.exp(features @ _start(model, features, msq) + offset)
    error = (rep_var if rep_var is not None else spec.var_fractions[(len(spec.var_fractions) - 1) // 2] * msq,
             tau if tau is not None else spec.taus_days[(len(spec.taus_days) - 1) // 2] * spec.day, noise_var)
    outlier, fits = np.zeros(len(t), bool), 0
    for _ in range(OUTLIER_PASSES):
        kept = ~outlier
        whitened = _Whitened.build([track_series(g[kept], vel[kept], track[kept], t[kept])], error)
        mean = whitened.mean(prior_var)
        fits += 1
        flagged, _ = velocity_outliers(vel - g @ mean, OUTLIER_K, np.sqrt(error[0] + error[2]))
        if np.array_equal(flagged, outlier):
            break
        outlier = flagged
    return outlier, fits


def search_prior(points, t, vel, track, noise_var: float, model, rep_var=None, tau=None):
    """Returns (mean `(2K,)`, cov `(2K, 2K)`, prior_var `(2K,)`, rep_var, tau, info) chosen from the tracks.

    Velocities far off a fitted field are left out before and after the search (`screen_first_fit`,
    `velocity_outliers`; the module's docstring), their counts in the info ("velocity_outliers_dropped" and its parts).

    Parameters
    ----------
    points, t, vel, track
        `(n, 2)`, `(n,)`, `(n, 2)`, `(n,)`: lag-1 difference velocities (linear.track_differences).
    noise_var
        the white noise variance of a difference velocity
    model
        a FlowModel with `search` (PriorSearch).
    rep_var, tau
        the OU variance and time scale when given (the grid then holds only that value).

    Raises
    ------
    ValueError
        when every velocity is zero (no drifter moves: nothing sets the flow's scale).
    """
    if not np.any(vel):
        raise ValueError(f"{NO_MOTION}: there is no flow to estimate from them")
    spec = model.search
    keep = thin_pairs(t, track, spec.spacing_days * spec.day)
    points, t, vel, track = points[keep], t[keep], vel[keep], track[keep]
    g = velocity_basis(points, t, *model.modes)  # (n, 2, 2K)
    # the pairs far off a first fit (fixes a few kilometres off) are left out of the search: they would set its scale
    first, first_passes = screen_first_fit(g, vel, track, t, model, noise_var, rep_var, tau)
    searched = len(t)
    points, t, vel, track, g = (a[~first] for a in (points, t, vel, track, g))
    msq = float(np.mean(vel**2))
    ids = np.unique(track)
    n_folds = min(spec.folds, len(ids))
    fold_of = dict(zip(ids.tolist(), np.arange(len(ids)) % n_folds))
    fold = np.array([fold_of[i] for i in track.tolist()])
    folds = [np.flatnonzero(fold == f) for f in range(n_folds)]
    raw = [(g[f], vel[f]) for f in folds]
    arranged = [track_series(g[f], vel[f], track[f], t[f]) for f in folds]  # one layout for every error model
    taus = [tau] if tau is not None else [d * spec.day for d in spec.taus_days]
    variances = [rep_var] if rep_var is not None else [f * msq for f in spec.var_fractions]
    features, offset = log_spectrum_features(model, msq)
    middle = (taus[(len(taus) - 1) // 2], variances[(len(variances) - 1) // 2])
    built = {middle: _Whitened.build(arranged, (middle[1], middle[0], noise_var))}
    shape, _ = fit_shape(built[middle], features, offset, _start(model, features, msq))
    table, tried, kept = [], {}, {}  # kept: the whitened data of the least objective so far (each is large)

    def score(tau_i, var_i):
        if (tau_i, var_i) not in tried:
            whitened = built.pop((tau_i, var_i), None) or _Whitened.build(arranged, (var_i, tau_i, noise_var))
            theta, ratio = fit_amplitude(whitened, features, offset, shape)
            prior_var = np.exp(features @ theta + offset)
            cv = cross_validate(whitened, raw, prior_var) if n_folds > 1 else float("nan")
            table.append({"tau_days": tau_i / spec.day, "representation_var": var_i, "cv_ratio": cv,
                          "log_evidence_ratio": ratio})
            # least CV ratio; without folds (one drifter), most evidence
            tried[tau_i, var_i] = (-ratio if np.isnan(cv) else cv, cv, tau_i, var_i, ratio, theta, prior_var)
            if all(tried[tau_i, var_i][0] <= other[0] for other in tried.values()):
                kept.clear()
                kept[tau_i, var_i] = whitened
        return tried[tau_i, var_i]

    # coordinate search: the time scales at the middle variance, then the variances at the best time scale
    tau_best = climb(taus, lambda tau_i: score(tau_i, middle[1])[0])
    best = score(tau_best, climb(variances, lambda var_i: score(tau_best, var_i)[0], refine=rep_var is None))
    _, cv, tau_best, var_best, ratio, theta, prior_var = best
    whitened = kept.get((tau_best, var_best)) or _Whitened.build(arranged, (var_best, tau_best, noise_var))
    # the searched pairs far off the chosen estimate (fixes a few kilometres off): the final solve, CV ratio and
    # evidence without them, at the chosen prior and error model; flagged again against that solve's estimate (the
    # first estimate was dragged by them), at most OUTLIER_PASSES times
    chosen = (whitened, cv, ratio)
    mean, cov = whitened.posterior(prior_var)
    outlier, passes = np.zeros(len(t), bool), 0
    for _ in range(OUTLIER_PASSES):
        flagged, threshold = velocity_outliers(vel - g @ mean, OUTLIER_K, np.sqrt(var_best + noise_var))
        if np.array_equal(flagged, outlier):
            break
        outlier, passes = flagged, passes + 1
        whitened, cv, ratio = chosen
        if outlier.any():
            kept = [f[~outlier[f]] for f in folds]
            kept = [f for f in kept if len(f)]
            whitened = _Whitened.build([track_series(g[f], vel[f], track[f], t[f]) for f in kept],
                                       (var_best, tau_best, noise_var))
            cv = (cross_validate(whitened, [(g[f], vel[f]) for f in kept], prior_var) if len(kept) > 1
                  else float("nan"))
            ratio = whitened.log_evidence(prior_var)
        mean, cov = whitened.posterior(prior_var)
    # no better than zero on held-out drifters, or no more evidence than the zero-signal model's plus one nat per
    # fitted prior parameter (AIC's penalty: the fitted evidence of pure noise is a little above zero's)
    zero = bool((n_folds > 1 and not cv < 1.0) or ratio <= len(theta))
    chosen_by = "cross-validation" if n_folds > 1 else "evidence (one drifter: none to hold out)"
    info = {"prior_source": f"the tracks: log-spectrum by evidence, error model by {chosen_by} (no climatology)",
            "representation_var_source": "given" if rep_var is not None else chosen_by,
            "representation_time_source": "given" if tau is not None else chosen_by,
            "prior_log_spectrum": {"a_per_degree": theta[:-2].tolist(), "b": float(theta[-2]), "c": float(theta[-1]),
                                   "k0": spectrum_origin(model)},
            "current_prior_var": msq, "cv_ratio": cv, "cv_folds": n_folds, "log_evidence_ratio_to_zero": ratio,
            "search_pairs": len(t), "search_spacing_days": spec.spacing_days, "error_model_table": table,
            "error_model_search": "time scales at the middle variance, then variances at the best time scale, each "
                                  "descending from the grid's middle (climb), the variance then refined at a "
                                  "parabola's vertex",
            "final_solve": "the searched pairs at the chosen prior and error model"
                           + (", without the velocity outliers" if outlier.any() else ""),
            "velocity_outliers_dropped": int(first.sum() + outlier.sum()), "velocity_outlier_k": OUTLIER_K,
            "velocity_outliers_before_search": int(first.sum()), "velocity_outlier_first_passes": first_passes,
            "velocity_outliers_after_search": int(outlier.sum()), "velocity_outlier_passes": passes,
            "velocity_outlier_threshold": threshold.tolist(),
            "zero_guard": zero}
    if first.any() or outlier.any():
        info["velocity_outliers_note"] = (
            f"{int(first.sum() + outlier.sum())} of {searched} velocities left out as outliers, over {OUTLIER_K:g} "
            f"standard deviations off the fitted flow ({int(first.sum())} before the search, {int(outlier.sum())} "
            "after it): fixes off their track that the cleaning kept")
    if zero:
        info["zero_guard_note"] = (f"the answer is the prior mean (zero): the best fit leaves {cv:.0%} of held-out "
                                   f"drifters' mean square velocity unexplained (zero: 100%); its log evidence over "
                                   f"zero {ratio:.3g} (at most {len(theta)}, one per fitted parameter: no sign of a "
                                   "flow)")
        return np.zeros(len(prior_var)), np.diag(prior_var), prior_var, var_best, tau_best, info
    return mean, cov, prior_var, var_best, tau_best, info
