"""A space-time Gaussian process of velocities at scattered points: the kernel, its hyperparameters by maximum
marginal likelihood, and its prediction.

The kernel is squared-exponential in distance and in time,

    k((x, t), (x', t')) = s2 exp(-|x - x'|^2 / (2 l^2) - (t - t')^2 / (2 tau^2)),

plus noise n2 on the diagonal, for points `(n, 3)` of (x km, y km, t days) on a local plane. The local GP
(lagda.assimilation.local_gp) fits it to what a basis leaves out at the drifters (mean zero) and adds its
prediction to the basis field (in a dense tile, conditioned each day on the velocities nearest in time:
`NearestInTime`); the basin-year benchmark's GP baseline (after Goncalves et al. 2019) fits it to the velocities
themselves (their mean removed).
"""

from __future__ import annotations

import dataclasses

import numpy as np

EARTH_RADIUS_KM = 6371.0088
DAY_S = 86400.0  # seconds in a day: the kernel's time unit


@dataclasses.dataclass(frozen=True)
class Hyper:
    """The kernel's hyperparameters: length scale `ell_km`, time scale `tau_days`, variance `s2` and noise `n2`
    (both in the values' units squared), and the negative log marginal likelihood `nll` they reached."""

    ell_km: float
    tau_days: float
    s2: float
    n2: float
    nll: float = float("nan")


# bounds on (l km, tau days, s2, n2) in the fit
BOUNDS = ((5.0, 2000.0), (0.2, 200.0), (1e-6, 10.0), (1e-8, 1.0))


def local_km(lon, lat, centre) -> tuple[np.ndarray, np.ndarray]:
    """Returns (x, y) km of points at lon, lat degrees `(...)` on the sinusoidal plane about `centre` (lon, lat):
    x = R cos(lat) dlon, y = R dlat (distances true along parallels and the central meridian)."""
    lon, lat = np.asarray(lon, np.float64), np.asarray(lat, np.float64)
    return (np.deg2rad(lon - centre[0]) * EARTH_RADIUS_KM * np.cos(np.deg2rad(lat)),
            np.deg2rad(lat - centre[1]) * EARTH_RADIUS_KM)


def kernel(xa, xb, ell_km: float, tau_days: float) -> np.ndarray:
    """Returns exp(-|dx|^2 / (2 l^2) - dt^2 / (2 tau^2)) `(a, b)` between points `(a, 3)` and `(b, 3)`."""
    from scipy.spatial.distance import cdist

    d2 = cdist(xa[:, :2], xb[:, :2], "sqeuclidean") / ell_km**2
    return np.exp(-0.5 * d2 - 0.5 * np.subtract.outer(xa[:, 2], xb[:, 2]) ** 2 / tau_days**2)


def neg_log_likelihood(theta, sets, centre: bool = True) -> tuple[float, np.ndarray]:
    """Returns (-sum log p(y | theta), its gradient in theta) over `sets` [(points `(n, 3)`, values `(n,)`)],
    theta = log (l km, tau days, s2, n2); with `centre` each set's mean is removed first."""
    from scipy.linalg import cho_factor, cho_solve

    ell, tau, s2, n2 = np.exp(theta)
    total, grad = 0.0, np.zeros(4)
    for x, y in sets:
        d2 = ((x[:, None, :2] - x[None, :, :2]) ** 2).sum(-1) / ell**2
        t2 = (x[:, None, 2] - x[None, :, 2]) ** 2 / tau**2
        k0 = np.exp(-0.5 * d2 - 0.5 * t2)
        try:
            factor = cho_factor(s2 * k0 + n2 * np.eye(len(x)), lower=True)
        except np.linalg.LinAlgError:
            return 1e30, np.zeros(4)
        r = y - y.mean() if centre else y
        alpha = cho_solve(factor, r)
        total += 0.5 * float(r @ alpha) + float(np.log(np.diag(factor[0])).sum()) + 0.5 * len(x) * np.log(2 * np.pi)
        inner = cho_solve(factor, np.eye(len(x))) - np.outer(alpha, alpha)  # K^-1 - alpha alpha^T
        for i, dk in enumerate((s2 * k0 * d2, s2 * k0 * t2, s2 * k0)):
            grad[i] += 0.5 * float((inner * dk).sum())
        grad[3] += 0.5 * n2 * float(np.trace(inner))
    return total, grad


def fit(sets, start=(100.0, 5.0, 0.01, 0.001), bounds=BOUNDS, centre: bool = True, maxiter: int = 100) -> Hyper:
    """Returns the hyperparameters maximising the marginal likelihood of `sets` (`neg_log_likelihood`), within
    `bounds` ((low, high) for l km, tau days, s2, n2), by scipy's L-BFGS-B from `start` (clipped into the bounds)."""
    from scipy.optimize import minimize

    logs = np.log(np.asarray(bounds, np.float64))
    x0 = np.clip(np.log(np.asarray(start, np.float64)), logs[:, 0], logs[:, 1])
    best = minimize(neg_log_likelihood, x0, args=(sets, centre), jac=True, method="L-BFGS-B", bounds=logs,
                    options={"maxiter": maxiter})
    return Hyper(*map(float, np.exp(best.x)), nll=float(best.fun))


class Predictor:
    """The GP conditioned on data x `(n, 3)`, values y `(n,)` or `(n, c)` (c value sets sharing the kernel):
    `mean(xs)` `(m,)` or `(m, c)` and `std(xs)` `(m,)` at points `(m, 3)`, the prior mean y's mean with `centre`,
    else zero."""

    def __init__(self, x, y, hyper: Hyper, centre: bool = True):
        from scipy.linalg import cho_factor, cho_solve

        self.x, self.hyper = x, hyper
        self.offset = np.mean(y, axis=0) if centre else 0.0
        self.factor = cho_factor(hyper.s2 * kernel(x, x, hyper.ell_km, hyper.tau_days) + hyper.n2 * np.eye(len(x)),
                                 lower=True)
        self.alpha = cho_solve(self.factor, y - self.offset)

    def mean(self, xs) -> np.ndarray:
        """Returns the posterior mean `(m,)` (or `(m, c)`) at points xs `(m, 3)`."""
        return self.offset + self.hyper.s2 * kernel(xs, self.x, self.hyper.ell_km, self.hyper.tau_days) @ self.alpha

    def std(self, xs) -> np.ndarray:
        """Returns the latent posterior std `(m,)` at points xs `(m, 3)` (the noise n2 not included)."""
        from scipy.linalg import solve_triangular

        ks = self.hyper.s2 * kernel(xs, self.x, self.hyper.ell_km, self.hyper.tau_days)
        w = solve_triangular(self.factor[0], ks.T, lower=True)
        return np.sqrt(np.maximum(self.hyper.s2 - (w**2).sum(0), 0.0))


    def _factors(self, xy, days) -> tuple[np.ndarray, np.ndarray]:
        """Returns the kernel's spatial factor `(m, n)` at points xy `(m, 2)` km and its time factor `(day, n)`."""
        from scipy.spatial.distance import cdist

        space = np.exp(-0.5 * cdist(xy, self.x[:, :2], "sqeuclidean") / self.hyper.ell_km**2)
        time = np.exp(-0.5 * np.subtract.outer(np.asarray(days, np.float64), self.x[:, 2]) ** 2
                      / self.hyper.tau_days**2)
        return space, time

    def mean_on(self, xy, days) -> np.ndarray:
        """Returns the posterior mean `(day, m)` (or `(day, m, c)`) at points xy `(m, 2)` km on each of `days`
        `(day,)`: `mean` of every (point, day), one product with the kernel's spatial factor per value set."""
        space, time = self._factors(xy, days)
        alpha = self.alpha.reshape(len(self.x), -1)
        out = np.stack([(space @ (time * a).T).T for a in alpha.T], axis=-1) * self.hyper.s2 + self.offset
        return out.reshape(len(time), len(xy), *self.alpha.shape[1:])

    def std_on(self, xy, days) -> np.ndarray:
        """Returns the latent posterior std `(day, m)` at points xy `(m, 2)` km on each of `days` `(day,)`."""
        from scipy.linalg import solve_triangular

        space, time = self._factors(xy, days)
        out = np.empty((len(time), len(xy)))
        for d, row in enumerate(time):
            w = solve_triangular(self.factor[0], (self.hyper.s2 * space * row).T, lower=True)
            out[d] = np.sqrt(np.maximum(self.hyper.s2 - (w**2).sum(0), 0.0))
        return out

    def on_days(self, xy, days, std_xy, std_days) -> tuple[np.ndarray, np.ndarray]:
        """Returns (`mean_on(xy, days)`, `std_on(std_xy, std_days)`)."""
        return self.mean_on(xy, days), self.std_on(std_xy, std_days)


class NearestInTime:
    """The GP of `Predictor` conditioned, at each time it predicts on, on the `cap` data points nearest to that
    time alone: data a few time scales away hardly inform it, and dense tracks give more velocities than one
    Cholesky factor can hold. Data x `(n, 3)`, values y `(n, c)`, prior mean zero; `mean_on`, `std_on` as
    `Predictor`'s, one factor per day."""

    def __init__(self, x, y, hyper: Hyper, cap: int):
        self.x, self.y, self.hyper, self.cap = x, y, hyper, cap

    def at(self, day: float) -> Predictor:
        """Returns the GP conditioned on the `cap` points nearest in time to `day` (ties kept in data order)."""
        nearest = np.sort(np.argsort(np.abs(self.x[:, 2] - day), kind="stable")[:self.cap])
        return Predictor(self.x[nearest], self.y[nearest], self.hyper, centre=False)

    def mean_on(self, xy, days) -> np.ndarray:
        """Returns the posterior mean `(day, m, c)` at points xy `(m, 2)` km on each of `days` `(day,)`."""
        return self.on_days(xy, days, xy, [])[0]

    def std_on(self, xy, days) -> np.ndarray:
        """Returns the latent posterior std `(day, m)` at points xy `(m, 2)` km on each of `days` `(day,)`."""
        return self.on_days(xy, [], xy, days)[1]

    def on_days(self, xy, days, std_xy, std_days) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Returns (`mean_on(xy, days)`, `std_on(std_xy, std_days)`), None for no days: one factor for a day in both."""
        days, std_days = [float(d) for d in days], [float(d) for d in std_days]
        means, stds = {}, {}
        for d in sorted(set(days) | set(std_days)):
            gp = self.at(d)
            if d in days:
                means[d] = gp.mean_on(xy, [d])[0]
            if d in std_days:
                stds[d] = gp.std_on(std_xy, [d])[0]
        return (np.stack([means[d] for d in days]) if days else None,
                np.stack([stds[d] for d in std_days]) if std_days else None)


def predict(x, y, xs, hyper: Hyper, centre: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Returns (posterior mean `(m,)`, latent std `(m,)`) at points xs `(m, 3)` from data x `(n, 3)`, y `(n,)`.

    Examples
    --------
    >>> x = np.array([[0.0, 0.0, 0.0]])
    >>> mean, std = predict(x, np.array([1.0]), x, Hyper(ell_km=10.0, tau_days=1.0, s2=1.0, n2=1.0), centre=False)
    >>> round(float(mean[0]), 12), round(float(std[0]) ** 2, 12)  # one observation: s2 / (s2 + n2) of it
    (0.5, 0.5)
    """
    gp = Predictor(x, y, hyper, centre)
    return gp.mean(xs), gp.std(xs)
