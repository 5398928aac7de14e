"""How drifter velocities are correlated, estimated from the archive itself: the map's prior covariance.

The prior mean is zero, or a background product, plus the regional and seasonal mean of the drifters' departures
from it: their kernel average over PRIOR_RADIUS_KM and PRIOR_DAYS, each drifter counted once per PRIOR_DAYS
however often it is sampled, drawn towards zero by PRIOR_DRIFTERS drifters' worth (`regional_field`; one
drifter's own eddy is not a region's mean current). It holds the scales of a mean current or a gyre, which the
mesoscale covariance below cannot (its correlation would stretch over the basin). The velocity's departure a from
that prior mean is modelled as a Gaussian process with a variance that varies by region and season and a
correlation that is the same everywhere,

    cov(a(p), a(q)) = sigma(p) sigma(q) [rho(r) (phi exp(-dt^2 / (2 T^2)) + phi_long exp(-dt^2 / (2 T_long^2)))
                                         + (1 - phi - phi_long) [p = q]],

r the great-circle distance and dt the time between p and q, rho that of a non-divergent velocity (the mean of
the two components' correlations: `correlation`; lagda.mapping.methods.objective has the components' own). Two time
scales: drifters in an eddy see its velocities change over days, and the eddy itself lasts for months. L, T,
T_long and the correlated fractions phi, phi_long come from the classical method of moments on pairs of drifter
velocities: the mean of a(p).a(q) over the mean of |a|^2 in bins of separation and lag (normalised in each bin: a fast
drifter's pairs land at larger separations), fitted by weighted least squares (`estimate`); 1 - phi - phi_long
is what is uncorrelated even between velocities at one place and time (position noise, motion on scales under a
chunk).
sigma^2 is the local mean square departure, the same kernel average drawn towards the whole archive's
(`regional_field`): where no drifter has been, the prior mean is zero (or the background) and the prior std the
archive's, and a note says how much of the region that is.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.gaussian_process import EARTH_RADIUS_KM
from lagda.mapping.tiles import DAY_S

MAX_PAIR_KM = 400.0  # pairs of velocities further apart than this ...
MAX_PAIR_DAYS = 20.0  # ... or longer apart than this are not binned
MAX_POINTS = 12_000  # velocities binned at most (a fixed-seed draw beyond)
SEPARATION_KM = np.array([0.0, 5, 10, 20, 30, 45, 60, 80, 100, 130, 170, 220, 300, 400])
LAG_DAYS = np.array([0.0, 0.5, 1, 2, 3, 5, 8, 12, 20])
MIN_PAIRS = 20  # a bin of fewer pairs is not fitted
MAX_PHI = 0.95  # at least this much of the variance is uncorrelated (position noise, motion under a chunk)
SCALE_BOUNDS = ((5.0, 1000.0), (0.25, 60.0))  # L km, T days
PRIOR_RADIUS_KM = 500.0  # the regional variance: a Gaussian kernel average over this distance ...
PRIOR_DAYS = 45.0  # ... and this time ...
PRIOR_DRIFTERS = 4.0  # ... with the prior counted as this many drifters (over PRIOR_DAYS) at every place
FIELD_STEP_DEG = 1.0  # the variance field's lattice
FIELD_STEP_DAYS = 10.0
BIN_DEG, BIN_DAYS = 0.25, 2.0  # the velocities' squares summed in bins this small before the kernel average


@dataclasses.dataclass(frozen=True)
class Covariance:
    """The prior covariance (module docstring).

    Attributes
    ----------
    ell_km, tau_days
        the correlation's length scale L and its short time scale T.
    phi
        the fraction of the variance at a point correlated over T.
    variance
        the archive's mean square departure per component, (m/s)^2.
    pairs
        the velocity pairs binned
    velocities
        the velocities they come from.
    field
        the regional and seasonal variance (`RegionalField` of one value), or None (the archive's
        `variance` everywhere).
    mean
        the regional and seasonal mean departure (`RegionalField` of u, v m/s) added to the prior mean, or
        None (none).
    tau_long_days, phi_long
        the long time scale T_long and the fraction correlated over it.
    """

    ell_km: float
    tau_days: float
    phi: float
    variance: float
    pairs: int = 0
    velocities: int = 0
    field: "RegionalField | None" = None
    tau_long_days: float = 1.0
    phi_long: float = 0.0
    mean: "RegionalField | None" = None

    @property
    def correlated(self) -> float:
        """Returns the correlated fraction of the variance at a point, phi + phi_long."""
        return self.phi + self.phi_long

    def in_time(self, dt_days) -> np.ndarray:
        """Returns the correlation's time factor phi exp(-dt^2/(2 T^2)) + phi_long exp(-dt^2/(2 T_long^2)) at
        lags `dt_days` (any shape)."""
        dt2 = np.asarray(dt_days, np.float64) ** 2
        return self.phi * np.exp(-0.5 * dt2 / self.tau_days**2) + self.phi_long * np.exp(-0.5 * dt2
                                                                                        / self.tau_long_days**2)

    def variance_at(self, lon, lat, seconds) -> np.ndarray:
        """Returns sigma^2 `(n,)` (m/s)^2 per component at points lon, lat (degrees), seconds `(n,)`."""
        if self.field is None:
            return np.full(np.shape(lon), self.variance)
        return self.field.at(lon, lat, seconds)[..., 0]

    def mean_at(self, lon, lat, seconds) -> np.ndarray:
        """Returns the regional mean departure (u, v) `(..., 2)` m/s at points `(...)` (zero without one)."""
        if self.mean is None:
            return np.zeros((*np.shape(lon), 2))
        return self.mean.at(lon, lat, seconds)

    def notes(self, background: bool = False) -> tuple[str, str]:
        """Returns the two lines a map says of its prior: the scales the drifters showed (how many pairs, the
        correlation's length and time scales, the correlated fractions), and what the map is far from every drifter
        (the regional mean current, added to the `background` product's when there is one, and the std by region
        and season)."""
        scales = (f"prior from {self.pairs:,} pairs of {self.velocities:,} drifter velocities: correlated over "
                  f"{self.ell_km:.0f} km (reversed beyond {np.sqrt(2) * self.ell_km:.0f}, across an eddy) and "
                  f"{self.tau_days:.1f} days ({self.phi:.0%} of the variance"
                  + (f"; {self.phi_long:.0%} over {self.tau_long_days:.0f} days" if round(self.phi_long, 2) else "")
                  + ")")
        mean = (f"their regional mean (up to {np.abs(self.mean.values).max():.3f} m/s)" if self.mean is not None
                else "zero")
        mean = f"the background{' plus ' + mean if self.mean is not None else ''}" if background else mean
        std = f"std {np.sqrt(self.variance):.3f} m/s, the archive's"
        if self.field is not None:
            low, high = (f"{v:.3f}" for v in np.sqrt([self.field.values.min(), self.field.values.max()]))
            std = (f"std {low if low == high else f'{low}-{high}'} m/s by region and season"
                   + (f"; the archive's {np.sqrt(self.variance):.3f} m/s {PRIOR_RADIUS_KM:g} km or {PRIOR_DAYS:g} days "
                      f"from any ({1 - self.field.informed:.0%} of the map)" if self.field.informed < 1 else ""))
        return scales, f"far from the drifters the map is {mean}, {std}"


@dataclasses.dataclass(frozen=True)
class RegionalField:
    """A regional and seasonal average on a lattice of (time, lat, lon) (`regional_field`): `values` `(time, lat,
    lon, c)` at `days` `(time,)` seconds, `lat` `(lat,)`, `lon` `(lon,)` degrees (lon increasing, in one
    convention); `informed` the fraction of the lattice within PRIOR_RADIUS_KM and PRIOR_DAYS of a velocity."""

    days: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    values: np.ndarray
    informed: float

    def at(self, lon, lat, seconds) -> np.ndarray:
        """Returns the values `(n, c)` at points `(n,)` (trilinear, clamped to the lattice's edges)."""
        from scipy.interpolate import RegularGridInterpolator

        lon = np.asarray(lon, np.float64)
        lon = self.lon[0] + (lon - self.lon[0]) % 360.0
        lon = np.where(lon > self.lon[-1] + 0.5 * (360.0 - (self.lon[-1] - self.lon[0])), lon - 360.0, lon)
        axes, values = [], self.values
        for i, axis in enumerate((self.days, self.lat, self.lon)):
            if len(axis) == 1:  # a single lattice point: constant along that axis
                axis = np.array([axis[0] - 1.0, axis[0] + 1.0])
                values = np.repeat(values, 2, axis=i)
            axes.append(axis)
        points = np.stack([np.clip(p, a[0], a[-1]) for p, a in zip(
            (np.asarray(seconds, np.float64), np.asarray(lat, np.float64), lon), axes)], axis=-1)
        return RegularGridInterpolator(axes, values)(points.reshape(-1, 3)).reshape(*np.shape(lon), -1)

def great_circle_km(chord_km) -> np.ndarray:
    """Returns the great-circle distance in km of chords `(...)` km between points of `unit_vectors`."""
    return 2.0 * EARTH_RADIUS_KM * np.arcsin(np.minimum(np.asarray(chord_km) / (2.0 * EARTH_RADIUS_KM), 1.0))


def unit_vectors(lon, lat) -> np.ndarray:
    """Returns points on the sphere of radius EARTH_RADIUS_KM `(n, 3)` km at lon, lat degrees `(n,)`: their chord
    distance is within 0.1% of the great-circle distance below 300 km."""
    lon, lat = np.deg2rad(np.asarray(lon, np.float64)), np.deg2rad(np.asarray(lat, np.float64))
    return EARTH_RADIUS_KM * np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def binned_moments(xyz, days, anomaly) -> tuple[np.ndarray, np.ndarray, float]:
    """Returns (the correlation sum a(p).a(q) / sum (|a(p)|^2 + |a(q)|^2)/2 `(r bin, lag bin)`, pair counts `(r bin,
    lag bin)`, mean |a|^2/2) over the pairs
    of velocities `anomaly` `(n, 2)` m/s at points xyz `(n, 3)` km, `days` `(n,)` closer than MAX_PAIR_KM and
    MAX_PAIR_DAYS, in the bins SEPARATION_KM x LAG_DAYS. A velocity is not paired with itself; a drifter's own
    later velocities are (they sample the field too).
    """
    from scipy.spatial import cKDTree

    scale = MAX_PAIR_KM / MAX_PAIR_DAYS  # km per day: the pairs' ball in (xyz, t) holds every pair in the box
    tree = cKDTree(np.column_stack([xyz, days * scale]))
    pairs = tree.query_pairs(MAX_PAIR_KM * np.sqrt(2.0), output_type="ndarray")
    shape = (len(SEPARATION_KM) - 1, len(LAG_DAYS) - 1)
    if not len(pairs):
        return np.zeros(shape), np.zeros(shape, np.int64), float(np.mean(anomaly**2)) if len(anomaly) else 0.0
    i, j = pairs[:, 0], pairs[:, 1]
    r = np.linalg.norm(xyz[i] - xyz[j], axis=1)
    lag = np.abs(days[i] - days[j])
    keep = (r < MAX_PAIR_KM) & (lag < MAX_PAIR_DAYS)
    i, j, r, lag = i[keep], j[keep], r[keep], lag[keep]
    product = 0.5 * np.sum(anomaly[i] * anomaly[j], axis=1)
    power = 0.25 * np.sum(anomaly[i] ** 2, axis=1) + 0.25 * np.sum(anomaly[j] ** 2, axis=1)
    ri = np.clip(np.searchsorted(SEPARATION_KM, r, side="right") - 1, 0, shape[0] - 1)
    li = np.clip(np.searchsorted(LAG_DAYS, lag, side="right") - 1, 0, shape[1] - 1)
    flat = ri * shape[1] + li
    counts = np.bincount(flat, minlength=np.prod(shape)).reshape(shape)
    sums = np.bincount(flat, product, minlength=np.prod(shape)).reshape(shape)
    powers = np.bincount(flat, power, minlength=np.prod(shape)).reshape(shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(powers > 0, sums / np.where(powers > 0, powers, 1.0), 0.0), counts, float(np.mean(anomaly**2))


def correlation(r_km, lag_days, ell_km: float, tau_days: float, phi: float, tau_long_days: float = 1.0,
                phi_long: float = 0.0):
    """Returns the model's correlation of velocity departures (the mean of u u' and v v' over the variance) at
    separations `r_km` and lags `lag_days` (arrays that broadcast): (1 - r^2/(2 L^2)) exp(-r^2/(2 L^2)) times
    `Covariance.in_time`, that of a non-divergent velocity whose streamfunction has a Gaussian covariance
    (lagda.mapping.methods.objective), negative beyond sqrt(2) L: across an eddy."""
    q = np.asarray(r_km, np.float64) ** 2 / (2.0 * ell_km**2)
    return (1.0 - q) * np.exp(-q) * Covariance(ell_km, tau_days, phi, 1.0, tau_long_days=tau_long_days,
                                               phi_long=phi_long).in_time(lag_days)


def fit_scales(moments, counts) -> tuple[float, float, float, float, float]:
    """Returns (L km, T days, phi, T_long days, phi_long): `correlation` fitted to the binned correlations
    `moments` at the bins' mean separations and lags by least squares weighted by the square root of their
    `counts` (bins of under MIN_PAIRS pairs left out), T <= T_long, phi + phi_long within [0.05, MAX_PHI]. With
    under 6 such bins the scales are not guessed from them: SCALE_BOUNDS' lower L and T, phi 0.5 and no long part
    are returned (the prior then relaxes fastest).

    Examples
    --------
    >>> r, t = 0.5 * (SEPARATION_KM[1:] + SEPARATION_KM[:-1]), 0.5 * (LAG_DAYS[1:] + LAG_DAYS[:-1])
    >>> m = correlation(r[:, None], t[None, :], 50.0, 1.5, 0.3, 10.0, 0.4)
    >>> [round(x, 2) for x in fit_scales(m, np.full(m.shape, 100))]
    [50.0, 1.5, 0.3, 10.0, 0.4]
    """
    from scipy.optimize import least_squares

    r = 0.5 * (SEPARATION_KM[1:] + SEPARATION_KM[:-1])
    t = 0.5 * (LAG_DAYS[1:] + LAG_DAYS[:-1])
    rr, tt = np.meshgrid(r, t, indexing="ij")
    ok = counts >= MIN_PAIRS
    if ok.sum() < 6:
        return SCALE_BOUNDS[0][0], SCALE_BOUNDS[1][0], 0.5, SCALE_BOUNDS[1][0], 0.0
    w = np.sqrt(counts[ok])

    def unpack(theta):  # log L, log T, log (T_long / T), logit-like shares of MAX_PHI: T <= T_long by construction
        ell, tau, ratio = np.exp(theta[:3])
        total = MAX_PHI / (1.0 + np.exp(-theta[3]))
        share = 1.0 / (1.0 + np.exp(-theta[4]))
        return ell, tau, total * share, tau * ratio, total * (1.0 - share)

    residual = lambda theta: w * (correlation(rr[ok], tt[ok], *unpack(theta)) - moments[ok])
    lower = [np.log(SCALE_BOUNDS[0][0]), np.log(SCALE_BOUNDS[1][0]), 0.0, -6.0, -8.0]
    upper = [np.log(SCALE_BOUNDS[0][1]), np.log(SCALE_BOUNDS[1][1]), np.log(SCALE_BOUNDS[1][1] / SCALE_BOUNDS[1][0]),
             6.0, 8.0]
    best = None
    for start in ((30.0, 2.0), (100.0, 5.0), (300.0, 15.0)):  # a few starts: the scales trade off in few bins
        x0 = np.clip([np.log(start[0]), np.log(start[1]), np.log(5.0), 0.0, 0.0], np.add(lower, 1e-9),
                     np.subtract(upper, 1e-9))
        found = least_squares(residual, x0, bounds=(lower, upper))
        if best is None or found.cost < best.cost:
            best = found
    ell, tau, phi, tau_long, phi_long = unpack(best.x)
    if phi_long > 0.0 and tau_long > SCALE_BOUNDS[1][1]:  # beyond the bound: the long part is the window's own
        tau_long = SCALE_BOUNDS[1][1]
    return float(ell), float(tau), float(max(phi, 0.05 - phi_long, 0.0)), float(tau_long), float(phi_long)


def regional_field(lon, lat, seconds, values, region, period, prior, weights=None) -> RegionalField:
    """Returns the kernel average of `values` `(n, c)` at lon, lat, seconds `(n,)` over PRIOR_RADIUS_KM and
    PRIOR_DAYS, each weighted by `weights` `(n,)` (a drifter's share: its velocities' spacing over PRIOR_DAYS), with
    `prior` `(c,)` counted as PRIOR_DRIFTERS at every place, on a lattice of FIELD_STEP_DEG and
    FIELD_STEP_DAYS over `region` (west, east, south, north degrees, east may pass 180) and `period` (start, end
    seconds): far from every value, `prior`."""
    from scipy.spatial import cKDTree

    lon, lat = np.asarray(lon, np.float64), np.asarray(lat, np.float64)
    weights = np.ones(len(lon)) if weights is None else np.asarray(weights, np.float64)
    values = np.asarray(values, np.float64).reshape(len(lon), -1) * weights[:, None]
    west, east, south, north = region
    east = east if east > west else east + 360.0
    grid_lon = np.linspace(west, east, max(2, int(np.ceil((east - west) / FIELD_STEP_DEG)) + 1))
    grid_lat = np.linspace(south, north, max(2, int(np.ceil((north - south) / FIELD_STEP_DEG)) + 1))
    grid_days = np.linspace(period[0], period[1], max(2, int(np.ceil((period[1] - period[0]) / DAY_S
                                                                       / FIELD_STEP_DAYS)) + 1))
    lon2, lat2 = np.meshgrid(grid_lon, grid_lat)
    cells = unit_vectors(lon2.ravel(), lat2.ravel())
    # the values gathered first in bins far finer than the kernel (their sums at their mean places and times)
    seconds = np.asarray(seconds, np.float64)
    key = np.stack([np.floor(lon / BIN_DEG), np.floor(lat / BIN_DEG), np.floor(seconds / (BIN_DAYS * DAY_S))], -1)
    _, which, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    which = which.ravel()
    mean = lambda x: np.bincount(which, x) / counts
    xyz = np.stack([mean(c) for c in unit_vectors(lon, lat).T], axis=-1)
    bin_seconds = mean(seconds)
    bin_sums = np.stack([np.bincount(which, v) for v in values.T], axis=-1)
    counts = np.bincount(which, weights)  # the bins' weights: drifters' worth
    prior = np.asarray(prior, np.float64)
    tree = cKDTree(xyz)
    out = np.empty((len(grid_days), len(cells), values.shape[1]))
    weight_sum = np.zeros((len(grid_days), len(cells)))
    for c, idx in enumerate(tree.query_ball_point(cells, 3.0 * PRIOR_RADIUS_KM)):
        idx = np.asarray(idx, np.int64)
        space = np.exp(-0.5 * np.sum((xyz[idx] - cells[c]) ** 2, axis=1) / PRIOR_RADIUS_KM**2)
        w = np.exp(-0.5 * (np.subtract.outer(grid_days, bin_seconds[idx]) / (PRIOR_DAYS * DAY_S)) ** 2) * space
        weight_sum[:, c] = w @ counts[idx]
        out[:, c] = (w @ bin_sums[idx] + PRIOR_DRIFTERS * prior) / (weight_sum[:, c] + PRIOR_DRIFTERS)[:, None]
    return RegionalField(grid_days, grid_lat, grid_lon, out.reshape(len(grid_days), *lon2.shape, -1),
                         float(np.mean(weight_sum >= 1.0)))


def drifter_shares(seconds, track) -> np.ndarray:
    """Returns `(n,)`: each velocity's share of its drifter over PRIOR_DAYS, the median time between that drifter's
    velocities over PRIOR_DAYS (a drifter sampled twice a day counts as much as one sampled hourly).

    Examples
    --------
    >>> drifter_shares(np.arange(4) * 43200.0, np.zeros(4, int)) * PRIOR_DAYS  # twice a day: half a day each
    array([0.5, 0.5, 0.5, 0.5])
    """
    seconds, track = np.asarray(seconds, np.float64), np.asarray(track)
    out = np.full(len(seconds), 1.0)
    for t in np.unique(track):
        mine = track == t
        step = np.median(np.diff(np.sort(seconds[mine]))) if mine.sum() > 1 else DAY_S
        out[mine] = step / (PRIOR_DAYS * DAY_S)
    return out


def estimate(lon, lat, seconds, anomaly, track, region=None, period=None, regional_mean: bool = True) -> Covariance:
    """Returns the prior covariance of velocities `anomaly` `(n, 2)` m/s (departures from the prior mean) at lon,
    lat (degrees), seconds `(n,)` of drifters `track` `(n,)`: scales by `fit_scales` on `binned_moments` of at
    most MAX_POINTS of them (a fixed-seed draw); with `region` and `period`, the `regional_field`s over them of
    the mean (unless not `regional_mean`; its departures then binned) and of the variance.

    Raises
    ------
    ValueError
        no velocity.
    """
    anomaly = np.asarray(anomaly, np.float64)
    if not len(anomaly):
        raise ValueError("no drifter velocity to estimate the prior covariance from")
    mean = weights = None
    if region is not None and period is not None:
        weights = drifter_shares(seconds, track)
    if weights is not None and regional_mean:
        mean = regional_field(lon, lat, seconds, anomaly, region, period, [0.0, 0.0], weights)
        anomaly = anomaly - mean.at(lon, lat, seconds)
    pick = np.arange(len(anomaly))
    if len(pick) > MAX_POINTS:
        pick = np.sort(np.random.default_rng(0).choice(len(pick), MAX_POINTS, replace=False))
    xyz = unit_vectors(np.asarray(lon)[pick], np.asarray(lat)[pick])
    moments, counts, variance = binned_moments(xyz, np.asarray(seconds)[pick] / DAY_S, anomaly[pick])
    ell, tau, phi, tau_long, phi_long = fit_scales(moments, counts)
    total = float(np.mean(anomaly**2))
    field = None
    if region is not None and period is not None:
        field = regional_field(lon, lat, seconds, 0.5 * np.sum(anomaly**2, axis=1), region, period, [total],
                               weights)
    return Covariance(ell, tau, phi, total, int(counts.sum()), len(anomaly), field, tau_long, phi_long, mean)
