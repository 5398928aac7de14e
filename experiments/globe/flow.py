"""A known global surface flow: zonal jets, wind-driven gyres and drifting eddies, tapered to zero on land.

The flow is the rotational velocity of one streamfunction on the sphere (radius R = 6,371,008.8 m, longitude
lambda and latitude phi in radians, t in seconds from the archive's start):

    psi(lambda, phi, t) = T(lambda, phi) * [psi_jets(phi) + s(t) psi_gyres(phi) + psi_eddies(lambda, phi, t)]
    u = -(1 / R) d psi / d phi,        v = 1 / (R cos phi) d psi / d lambda        (m/s, east and north)

so its divergence on the sphere, (1 / (R cos phi)) [du/dlambda + d(v cos phi)/dphi], is d2psi/dlambda dphi -
d2psi/dphi dlambda over R^2 cos phi: zero, as every term below has continuous first derivatives and equal mixed
second ones (u and v are continuous). The terms:

- **jets** (`FlowConfig.jets`, each latitude phi_j, speed U_j, width w_j): psi_j = -R U_j w_j s exp(-s^2) with
  s = (phi - phi_j) / w_j, so u = U_j (1 - 2 s^2) exp(-s^2): an eastward (U_j > 0) or westward core with weaker
  return flanks and zero net transport, so psi_j vanishes away from the jet (an ACC-like band at 55 S, the
  equatorial currents and countercurrent by default);
- **gyres** (`FlowConfig.gyres`, each a band [a, b] and the speed U_g of its southern half's zonal flow):
  psi_g = -U_g R (b - a) / pi sin^2(pi (phi - a) / (b - a)) inside the band, zero outside, modulated by a season
  s(t) = 1 + `seasonal` sin(2 pi t / 365.25 d). With the land taper its streamlines close inside each ocean basin:
  a subtropical gyre per hemisphere (westward trades, eastward westerlies) and a subpolar one in the north, with
  boundary currents along the coasts where psi meets the taper;
- **eddies** (`FlowConfig.n_eddies` alive at a time, born uniformly over the period with lives in `eddy_days`):
  psi_k = A_k(t) exp(-R^2 |x - c_k(t)|^2 / (2 r_k^2)), x and c_k unit vectors of the point and of the eddy's
  centre (the chord distance: smooth across the dateline and at the poles), radius r_k in `eddy_radius_m`,
  A_k = +-U_k r_k e^(1/2) (peak swirl speed U_k in `eddy_speed`) times sin^2(pi (t - t_k) / life_k) over its
  life; the centre is born where the taper is above 0.9 (away from land) and drifts west along its latitude at a
  speed in `eddy_drift`. An eddy is left out beyond 6.3 r_k of its centre, where it is exp(-20) = 2e-9 of its peak
  (the step this leaves in psi is of that size);
- **land taper** T: a periodic cubic B-spline in (lambda, phi) over 1-degree coefficients c = f^2, f the cell's
  sea fraction from the GLOBE 1-km land mask (lagda.io.land), so T is 0 over land, about 1 a few degrees from the
  coast and twice differentiable; the flow slows towards coasts but does not vanish on the coastline itself, so
  drifters can still reach land (`GlobalFlow.is_land`: a 0.1-degree cell with sea fraction under 0.5).

The Arctic's cells are all sea above 85 N, so T = 1 about the North Pole and psi depends on lambda there only
through the eddies, which are smooth on the sphere: the flow is regular at the poles.

The land mask's global 0.1-degree sea fraction takes about 10 s to compute from the 1-km mask; it is cached in
$XDG_CACHE_HOME/lagda/land (default ~/.cache/lagda/land) and read back in well under a second.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np

EARTH_RADIUS_M = 6_371_008.8  # as lagda.io.physical
DAY = 86400.0
YEAR = 365.25 * DAY
LAND_RES = 0.1  # the land grid's cell side, degrees
COEF_RES = 1.0  # the taper's B-spline coefficient spacing, degrees
BAND_DEG = 10.0  # points are matched with eddies a latitude band of this width at a time
EDDY_CUT = 20.0  # an eddy is left out where R^2 |x - c|^2 / (2 r^2) exceeds this (exp(-20) = 2e-9)


@dataclasses.dataclass(frozen=True)
class FlowConfig:
    """The global flow's settings (module docstring); defaults give an RMS speed of about 0.15 m/s at sea."""

    jets: tuple = ((-55.0, 0.3, 5.0), (-2.0, -0.4, 3.0), (6.0, 0.3, 2.5), (14.0, -0.15, 4.0))  # (lat, U m/s, w deg)
    gyres: tuple = ((15.0, 45.0, -0.08), (-45.0, -15.0, 0.08), (45.0, 65.0, 0.06))  # (south, north deg, U_g m/s)
    seasonal: float = 0.2  # relative seasonal swing of the gyres
    n_eddies: int = 1000  # eddies alive at a time (on average)
    eddy_radius_m: tuple[float, float] = (40e3, 100e3)  # radius range, m
    eddy_speed: tuple[float, float] = (0.15, 0.45)  # peak swirl speed range, m/s
    eddy_drift: tuple[float, float] = (0.01, 0.05)  # westward drift speed range, m/s
    eddy_days: tuple[float, float] = (30.0, 180.0)  # life range, days
    days: float = 366.0  # eddies are born over [-eddy_days[1], days] days
    seed: int = 0  # the eddies

    def validate(self) -> "FlowConfig":
        """Returns self, or raises ValueError naming the bad setting."""
        for name in ("eddy_radius_m", "eddy_speed", "eddy_drift", "eddy_days"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"{name} must be a range 0 <= low <= high, got {(low, high)}")
        if self.n_eddies < 0 or self.days <= 0:
            raise ValueError(f"n_eddies must be >= 0 and days > 0, got {self.n_eddies}, {self.days}")
        for south, north, _ in self.gyres:
            if not -90 <= south < north <= 90:
                raise ValueError(f"a gyre band must have -90 <= south < north <= 90, got {(south, north)}")
        return self


def _cache_dir() -> str:
    """Returns the folder of the cached land grid: $XDG_CACHE_HOME/lagda/land (default ~/.cache/lagda/land)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "lagda", "land")


@functools.lru_cache(maxsize=1)
def sea_grid() -> np.ndarray:
    """Returns float32 `(1800, 3600)`: the sea fraction of the global 0.1-degree cells (rows by latitude from 90 S,
    columns by longitude from 180 W), from lagda.io.land, cached on disk (module docstring).

    Raises
    ------
    ImportError
        without the global-land-mask package.
    """
    path = os.path.join(_cache_dir(), f"sea_fraction_{LAND_RES:g}deg.npy")
    if os.path.exists(path):
        return np.load(path).astype(np.float32) / 250.0
    from lagda.io.land import sea_fraction

    lon = -180.0 + (np.arange(round(360 / LAND_RES)) + 0.5) * LAND_RES
    lat = -90.0 + (np.arange(round(180 / LAND_RES)) + 0.5) * LAND_RES
    quantised = np.round(sea_fraction(lon, lat, LAND_RES) * 250.0).astype(np.uint8)
    os.makedirs(_cache_dir(), exist_ok=True)
    part = f"{path}.{os.getpid()}.part.npy"
    np.save(part, quantised)
    os.replace(part, path)
    return quantised.astype(np.float32) / 250.0


def _bspline(frac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns the cubic B-spline weights and their derivatives `(n, 4)` (per coefficient spacing) at fractions
    `(n,)` in [0, 1) past the second of four coefficients."""
    t = frac[:, None]
    w = np.concatenate([(1 - t) ** 3, 3 * t ** 3 - 6 * t ** 2 + 4, -3 * t ** 3 + 3 * t ** 2 + 3 * t + 1, t ** 3], 1) / 6
    d = np.concatenate([-(1 - t) ** 2, 3 * t ** 2 - 4 * t, -3 * t ** 2 + 2 * t + 1, t ** 2], 1) / 2
    return w, d


def _eddy_sums(lam: np.ndarray, phi: np.ndarray, centres: np.ndarray, scale: np.ndarray, amp: np.ndarray):
    """Returns `(3, n)`: the eddies' psi and its derivatives in lambda and phi at points `(n,)` rad, of eddies with
    unit-vector centres `(3, K)`, R^2 / r^2 `scale` `(K,)` and amplitudes `amp` `(K,)` m^2/s."""
    cl, sl, cp, sp = np.cos(lam), np.sin(lam), np.cos(phi), np.sin(phi)
    x = np.stack([cp * cl, cp * sl, sp], 1)  # (n, 3)
    x_lam = np.stack([-cp * sl, cp * cl, np.zeros_like(cp)], 1)
    x_phi = np.stack([-sp * cl, -sp * sl, cp], 1)
    q = (1.0 - x @ centres) * scale  # (n, K): R^2 |x - c|^2 / (2 r^2), as 1 - x.c = |x - c|^2 / 2
    point, eddy = np.nonzero(q < EDDY_CUT)  # the pairs where the eddy is felt: exp(-q) above 2e-9
    g = amp[eddy] * np.exp(-q[point, eddy])
    w = g * scale[eddy]
    c = centres.T[eddy]
    total = lambda values: np.bincount(point, values, minlength=lam.size)
    return np.stack([total(g), total((x_lam[point] * c).sum(1) * w), total((x_phi[point] * c).sum(1) * w)])


class GlobalFlow:
    """The global flow of a `FlowConfig` (module docstring): `velocity(lon, lat, t)` at any point and time.

    Raises
    ------
    ValueError
        for a bad setting.
    """

    def __init__(self, config: FlowConfig = FlowConfig()):
        self.config = config.validate()
        sea = sea_grid()
        self.land = sea < 0.5  # (1800, 3600) the land cells of `is_land`
        k = round(COEF_RES / LAND_RES)
        coarse = sea.reshape(sea.shape[0] // k, k, sea.shape[1] // k, k).mean(axis=(1, 3))
        self.coef = np.pad(coarse.astype(np.float64) ** 2, ((2, 2), (0, 0)), mode="edge")  # rows padded at the poles
        self._eddies(np.random.default_rng(config.seed))

    def _eddies(self, rng) -> None:
        """Draws the eddies: births t0 (s), lives (s), centres at birth, radii, signed amplitudes, drift speeds."""
        cfg = self.config
        first, last = -cfg.eddy_days[1] * DAY, cfg.days * DAY
        mean_life = np.mean(cfg.eddy_days) * DAY
        n = rng.poisson(cfg.n_eddies * (last - first) / mean_life) if cfg.n_eddies else 0
        lon, lat = np.empty(0), np.empty(0)
        while lon.size < n:  # centres uniform on the sphere, kept where the taper is above 0.9
            lo = rng.uniform(-180, 180, 2 * n)
            la = np.rad2deg(np.arcsin(rng.uniform(-1, 1, 2 * n)))
            ok = self.taper(lo, la)[0] > 0.9
            lon, lat = np.concatenate([lon, lo[ok]]), np.concatenate([lat, la[ok]])
        self.e_lon, self.e_lat = lon[:n], lat[:n]
        self.e_t0 = rng.uniform(first, last, n)
        self.e_life = rng.uniform(*cfg.eddy_days, n) * DAY
        self.e_r = rng.uniform(*cfg.eddy_radius_m, n)
        self.e_amp = rng.choice([-1.0, 1.0], n) * rng.uniform(*cfg.eddy_speed, n) * self.e_r * np.exp(0.5)
        self.e_drift = rng.uniform(*cfg.eddy_drift, n)

    def taper(self, lon, lat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns T and its derivatives dT/dlambda, dT/dphi (per radian), each `(n,)`, at `(n,)` degrees."""
        lon, lat = np.ravel(lon).astype(float), np.ravel(lat).astype(float)
        x = (lon + 180.0 - COEF_RES / 2) / COEF_RES  # coefficient j sits at -180 + (j + 1/2) COEF_RES
        y = (lat + 90.0 - COEF_RES / 2) / COEF_RES + 2  # rows padded by 2 at each pole
        i, j = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
        wx, dx = _bspline(x - i)
        wy, dy = _bspline(y - j)
        cols = (i[:, None] + np.arange(-1, 3)) % self.coef.shape[1]
        rows = np.clip(j[:, None] + np.arange(-1, 3), 0, self.coef.shape[0] - 1)
        c = self.coef[rows[:, :, None], cols[:, None, :]]  # (n, 4 rows, 4 cols)
        per_rad = np.rad2deg(1.0) / COEF_RES
        value = np.einsum("nr,nrc,nc->n", wy, c, wx)
        d_lon = np.einsum("nr,nrc,nc->n", wy, c, dx) * per_rad
        d_lat = np.einsum("nr,nrc,nc->n", dy, c, wx) * per_rad
        return value, d_lon, d_lat

    def is_land(self, lon, lat) -> np.ndarray:
        """Returns bool `(n,)`: whether each point (degrees) lies in a 0.1-degree cell with sea fraction under 0.5."""
        col = np.floor((np.ravel(lon) + 180.0) % 360.0 / LAND_RES).astype(np.int64) % self.land.shape[1]
        row = np.clip(np.floor((np.ravel(lat) + 90.0) / LAND_RES).astype(np.int64), 0, self.land.shape[0] - 1)
        return self.land[row, col]

    def _zonal(self, phi: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Returns psi_jets + s(t) psi_gyres and its derivative in phi, `(n,)` each."""
        R, psi, d_phi = EARTH_RADIUS_M, np.zeros_like(phi), np.zeros_like(phi)
        for lat_j, speed, width in self.config.jets:
            w = np.deg2rad(width)
            s = (phi - np.deg2rad(lat_j)) / w
            psi += -R * speed * w * s * np.exp(-s * s)
            d_phi += -R * speed * (1 - 2 * s * s) * np.exp(-s * s)
        season = 1.0 + self.config.seasonal * np.sin(2 * np.pi * t / YEAR)
        for south, north, speed in self.config.gyres:
            a, width = np.deg2rad(south), np.deg2rad(north - south)
            inside = (phi > a) & (phi < a + width)
            arg = np.pi * (phi - a) / width
            amp = -speed * R * width / np.pi * season
            psi += np.where(inside, amp * np.sin(arg) ** 2, 0.0)
            d_phi += np.where(inside, amp * np.pi / width * np.sin(2 * arg), 0.0)
        return psi, d_phi

    def _eddy_terms(self, lam: np.ndarray, phi: np.ndarray, t: float) -> tuple[np.ndarray, ...]:
        """Returns psi_eddies and its derivatives in lambda and phi, `(n,)` each, at time t s."""
        alive = np.flatnonzero((self.e_t0 <= t) & (t < self.e_t0 + self.e_life))
        if alive.size == 0 or lam.size == 0:
            return (np.zeros_like(lam),) * 3
        R = EARTH_RADIUS_M
        age = t - self.e_t0[alive]
        c_phi = np.deg2rad(self.e_lat[alive])
        c_lam = np.deg2rad(self.e_lon[alive]) - self.e_drift[alive] * age / (R * np.cos(c_phi))
        centres = np.stack([np.cos(c_phi) * np.cos(c_lam), np.cos(c_phi) * np.sin(c_lam), np.sin(c_phi)])  # (3, K)
        scale = R * R / self.e_r[alive] ** 2  # (K,)
        amp = self.e_amp[alive] * np.sin(np.pi * age / self.e_life[alive]) ** 2
        reach = np.sqrt(2 * EDDY_CUT) * self.config.eddy_radius_m[1] / R * 1.01  # rad: an eddy's farthest effect
        out = np.zeros((3, lam.size))
        band = np.floor(np.rad2deg(phi) / BAND_DEG).astype(np.int64)
        for b in np.unique(band):  # the points of a latitude band against the eddies that reach it
            here = np.flatnonzero(band == b)
            south, north = np.deg2rad(b * BAND_DEG), np.deg2rad((b + 1) * BAND_DEG)
            near = np.flatnonzero((c_phi > south - reach) & (c_phi < north + reach))
            if near.size:
                out[:, here] = _eddy_sums(lam[here], phi[here], centres[:, near], scale[near], amp[near])
        return out[0], out[1], out[2]

    def velocity(self, lon, lat, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Returns (u, v) m/s, east and north, `(n,)` each, at points `(n,)` degrees and time t s.

        Examples
        --------
        >>> flow = GlobalFlow()  # doctest: +SKIP
        >>> flow.velocity([-150.0], [-55.0], 0.0)[0] > 0.1  # the ACC-like jet, eastward  # doctest: +SKIP
        array([ True])
        """
        lam, phi = np.deg2rad(np.ravel(lon).astype(float)), np.deg2rad(np.ravel(lat).astype(float))
        T, T_lam, T_phi = self.taper(np.ravel(lon), np.ravel(lat))
        zonal, zonal_phi = self._zonal(phi, t)
        eddy, eddy_lam, eddy_phi = self._eddy_terms(lam, phi, t)
        psi0 = zonal + eddy
        psi_lam = T_lam * psi0 + T * eddy_lam
        psi_phi = T_phi * psi0 + T * (zonal_phi + eddy_phi)
        return -psi_phi / EARTH_RADIUS_M, psi_lam / (EARTH_RADIUS_M * np.cos(phi))
