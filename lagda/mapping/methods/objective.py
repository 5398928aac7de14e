"""The objective tile method, `lagda map`'s default (`ObjectiveMethod`): each tile's objective map, the drifters'
velocities less the prior mean mapped by the Gaussian process of the archive's own covariance
(lagda.mapping.covariance), as the classical objective analysis of oceanography does.

The velocity's departure from the prior mean (zero, or a background product) is non-divergent at the scales the
drifters correlate over: the covariance of (u, v) is that of a streamfunction with a Gaussian covariance of
length L (Bretherton et al. 1976),

    cov(u, u') = (1 - dy^2 / L^2) c,   cov(v, v') = (1 - dx^2 / L^2) c,   cov(u, v') = dx dy / L^2 c,
    c = sigma sigma' exp(-r^2 / (2 L^2)) [phi exp(-dt^2 / (2 T^2)) + phi_long exp(-dt^2 / (2 T_long^2))],

(dx, dy) = p - p' km on the tile's plane, plus (1 - phi - phi_long) sigma^2 on the diagonal: across an eddy the
velocities are anti-correlated, which a scalar kernel cannot say. The posterior mean is the prior mean plus what the
velocities say within a few L and T of them, and relaxes to the prior mean beyond; its variance relaxes to
sigma^2, the prior's of that region and season. The cells are mapped a block of BLOCK_CELLS x BLOCK_CELLS at a time
from the velocities within MARGIN_L x L of the block (the kernel beyond is under 3e-4 of its peak): each block
is an exact posterior of its velocities, and a block with none is the prior. Where more than MAX_BLOCK_POINTS
velocities reach a block (a dense deployment, hundreds of drifters released together), those close in space and
time are averaged into super-observations, each with its share of the uncorrelated variance (exact for velocities
at one point and time), so that every velocity counts and the block's solve stays small.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from lagda.io.background import open_background
from lagda.io.fixes import Fixes
from lagda.mapping.covariance import Covariance, estimate
from lagda.mapping.methods.interface import TileMethod, TileSummary
from lagda.mapping.tiles import DAY_S, Tile
from lagda.report import counted

CHUNK_S = 12 * 3600.0  # the drifters' velocities: displacements over this long (local_gp.chunk_velocities)
BLOCK_CELLS = 8  # cells mapped together from the same velocities
MARGIN_L = 4.0  # velocities within this many length scales of a block inform it
MAX_BLOCK_POINTS = 700  # at most this many velocities per block (beyond: `_superobservations`, then the nearest)
SUPEROB_LEVELS = (16, 8, 4, 2)  # super-observations' bins: L / level
STD_EVERY = 2  # the posterior variance on every STD_EVERY-th day, interpolated between


def covariance_blocks(p, q, sigma_p, sigma_q, cov: Covariance) -> np.ndarray:
    """Returns the prior covariance `(2a, 2b)` of the velocity departures (u at p..., v at p...) and (u at q..., v
    at q...) for points p `(a, 3)`, q `(b, 3)` of (x km, y km, t days) with prior stds sigma_p `(a,)`, sigma_q
    `(b,)` m/s: the non-divergent kernel of the module docstring, without the nugget.

    Examples
    --------
    >>> cov = Covariance(ell_km=10.0, tau_days=5.0, phi=1.0, variance=1.0)
    >>> p = np.array([[0.0, 0.0, 0.0]]); q = np.array([[10.0, 0.0, 0.0]])  # q one L east of p
    >>> covariance_blocks(p, q, np.ones(1), np.ones(1), cov).round(3) + 0.0  # u across the separation, v along
    array([[0.607, 0.   ],
           [0.   , 0.   ]])
    """
    dx = p[:, None, 0] - q[None, :, 0]
    dy = p[:, None, 1] - q[None, :, 1]
    dt = p[:, None, 2] - q[None, :, 2]
    ell2 = cov.ell_km**2
    c = np.outer(sigma_p, sigma_q) * np.exp(-0.5 * (dx**2 + dy**2) / ell2) * cov.in_time(dt)
    uv = dx * dy / ell2 * c
    return np.block([[(1.0 - dy**2 / ell2) * c, uv], [uv, (1.0 - dx**2 / ell2) * c]])


@dataclasses.dataclass(frozen=True)
class Velocities:
    """The drifters' velocities the map is made of, in time order: lon, lat (degrees), seconds `(n,)` at their
    midpoints, velocity `(n, 2)` m/s (east, north), drifter `(n,)` (the index of its trajectory). Made once for
    the whole map (`of_fixes`), so that every tile maps the same data where tiles overlap."""

    lon: np.ndarray
    lat: np.ndarray
    seconds: np.ndarray
    velocity: np.ndarray
    drifter: np.ndarray

    @classmethod
    def of_fixes(cls, fixes: Fixes) -> "Velocities":
        """Returns the fixes' drifter segments' velocities over CHUNK_S
        (lagda.assimilation.local_gp.chunk_velocities)."""
        from lagda.assimilation.local_gp import chunk_velocities

        segments = fixes.segments()
        lon, lat, seconds, velocity, _, segment = chunk_velocities(fixes, segments, CHUNK_S)
        drifter = np.array([fixes.traj[s[0]] for s in segments], np.int64)[segment] if len(segment) else segment
        order = np.argsort(seconds, kind="stable")
        return cls(lon[order], lat[order], seconds[order], velocity[order], drifter[order])

    def __len__(self) -> int:
        return len(self.seconds)

    def in_tile(self, tile: Tile) -> "Velocities":
        """Returns those in the tile's box and window, longitudes in the tile's convention."""
        window = tile.window(self.seconds)
        lon = tile.relative_lon(self.lon[window])
        lat = self.lat[window]
        keep = tile.holds(lon, lat)
        return Velocities(lon[keep], lat[keep], self.seconds[window][keep], self.velocity[window][keep],
                          self.drifter[window][keep])


def prior_mean(background: str | None, lon, lat, seconds) -> np.ndarray:
    """Returns the prior mean (u, v) `(..., 2)` m/s at points `(...)`: the background's where it has a value, else
    zero (and zero everywhere without one)."""
    shape = np.shape(lon)
    if background is None:
        return np.zeros((*shape, 2))
    u, v = open_background(background).velocity(np.ravel(lon), np.ravel(lat), np.ravel(seconds))
    return np.nan_to_num(np.stack([u, v], axis=-1)).reshape(*shape, 2)


def map_tile(data: Velocities, tile: Tile, grid, cov: Covariance, background: str | None = None) -> dict:
    """Returns the tile's piece of the map: {"u", "v", "u_std", "v_std"} `(day, lat, lon)` float32 m/s on the cells
    of `grid.window(tile)` and "info"; u_std, v_std are the total predictive std of a drifter's velocity there
    (the posterior's and the nugget's). A tile without velocities is the prior: the background (or zero) with the
    prior std.

    `data` are the tile's own velocities (`Velocities.in_tile`); `background`: the path of a gridded product
    (lagda.io.background), or None for a prior mean of zero.
    """
    from lagda.assimilation.gaussian_process import local_km

    days, rows, cols = grid.window(tile)
    seconds = grid.days[days]
    lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
    shape = (len(seconds), *lon2.shape)
    cell_lon = np.broadcast_to(lon2, shape)
    cell_lat = np.broadcast_to(lat2, shape)
    cell_t = np.broadcast_to(seconds[:, None, None], shape)
    mean = prior_mean(background, cell_lon, cell_lat, cell_t) + cov.mean_at(cell_lon, cell_lat, cell_t)
    prior_var = cov.variance_at(cell_lon.ravel(), cell_lat.ravel(), cell_t.ravel()).reshape(shape)
    var = np.stack([cov.correlated * prior_var] * 2, axis=-1)  # the field's (latent) variance; the nugget added last
    lon, lat, t, velocity = data.lon, data.lat, data.seconds, data.velocity
    info = {"tile": tile.key, "velocities": int(len(t))}
    if len(t):
        anomaly = velocity - prior_mean(background, lon, lat, t) - cov.mean_at(lon, lat, t)
        x, y = local_km(lon, lat, tile.centre)
        points = np.stack([x, y, (t - tile.start_s) / DAY_S], axis=-1)
        sigma = np.sqrt(cov.variance_at(lon, lat, t))
        cx, cy = local_km(lon2, lat2, tile.centre)
        cell_days = (seconds - tile.start_s) / DAY_S
        cell_sigma = np.sqrt(prior_var)
        informed = merged = thinned = 0
        for r0 in range(0, lon2.shape[0], BLOCK_CELLS):
            for c0 in range(0, lon2.shape[1], BLOCK_CELLS):
                block = (slice(r0, r0 + BLOCK_CELLS), slice(c0, c0 + BLOCK_CELLS))
                used = _block_points(points, cx[block], cy[block], cov)
                if not len(used):
                    continue
                informed += 1
                obs = _superobservations(points[used], anomaly[used], sigma[used], cov)
                merged += len(obs[0]) < len(used)
                thinned += len(obs[0]) > MAX_BLOCK_POINTS
                d_mean, d_var = _block_posterior(*_nearest(obs, cx[block], cy[block]), cx[block], cy[block],
                                                 cell_days, cell_sigma[(slice(None), *block)], cov)
                mean[(slice(None), *block)] += d_mean
                var[(slice(None), *block)] = d_var
        info["blocks_informed"] = informed
        info["blocks_merged"] = merged
        info["blocks_thinned"] = thinned
    nugget = (1.0 - cov.correlated) * prior_var
    return {"u": mean[..., 0].astype(np.float32), "v": mean[..., 1].astype(np.float32),
            "u_std": np.sqrt(var[..., 0] + nugget).astype(np.float32),
            "v_std": np.sqrt(var[..., 1] + nugget).astype(np.float32), "info": info}


def _block_points(points, cx, cy, cov: Covariance) -> np.ndarray:
    """Returns the indices of the velocities at `points` `(n, 3)` within MARGIN_L x L of the block's cells (x, y km
    `(rows, cols)`), in time order."""
    reach = MARGIN_L * cov.ell_km
    near = ((points[:, 0] >= cx.min() - reach) & (points[:, 0] <= cx.max() + reach)
            & (points[:, 1] >= cy.min() - reach) & (points[:, 1] <= cy.max() + reach))
    return np.flatnonzero(near)


def _superobservations(points, anomaly, sigma, cov: Covariance):
    """Returns (points `(m, 3)`, anomaly `(m, 2)`, sigma `(m,)`, count `(m,)`): the velocities as they are when
    they are at most MAX_BLOCK_POINTS, else merged into super-observations, the mean of those in a bin of
    CHUNK_S in time and L / level in space, the finest level of SUPEROB_LEVELS that leaves at most MAX_BLOCK_POINTS
    (or the coarsest): each the mean of count velocities, whose uncorrelated part's variance is 1/count of one's
    (velocities at one point and time give the posterior of them all exactly)."""
    ones = np.ones(len(points))
    if len(points) <= MAX_BLOCK_POINTS:
        return points, anomaly, sigma, ones
    for level in SUPEROB_LEVELS:
        cells = np.floor(points / [cov.ell_km / level, cov.ell_km / level, CHUNK_S / DAY_S]).astype(np.int64)
        cells -= cells.min(axis=0)
        span = cells.max(axis=0) + 1
        _, bins, count = np.unique((cells[:, 0] * span[1] + cells[:, 1]) * span[2] + cells[:, 2],
                                   return_inverse=True, return_counts=True)
        if len(count) <= MAX_BLOCK_POINTS:
            break

    def mean(values):
        return np.stack([np.bincount(bins, weights=column) for column in np.atleast_2d(values.T)], axis=-1) \
            / count[:, None]

    return mean(points), mean(anomaly), mean(sigma)[:, 0], count.astype(float)


def _nearest(obs, cx, cy):
    """Returns the observations `obs` (`_superobservations`), at most MAX_BLOCK_POINTS of them: the nearest to the
    block's centre (x, y km of its cells `(rows, cols)`)."""
    points = obs[0]
    if len(points) <= MAX_BLOCK_POINTS:
        return obs
    d2 = (points[:, 0] - cx.mean()) ** 2 + (points[:, 1] - cy.mean()) ** 2
    keep = np.sort(np.argsort(d2, kind="stable")[:MAX_BLOCK_POINTS])
    return tuple(values[keep] for values in obs)


def _block_posterior(points, anomaly, sigma, count, cx, cy, cell_days, cell_sigma, cov: Covariance):
    """Returns (the posterior mean departure `(day, rows, cols, 2)` m/s, the posterior variance `(day, rows, cols,
    2)` (m/s)^2 of u and v) at a block's cells (x, y km `(rows, cols)`) on `cell_days` `(day,)` from velocity
    departures `anomaly` `(n, 2)` at `points` `(n, 3)` with prior stds `sigma` `(n,)`; cell_sigma `(day, rows,
    cols)` the cells' prior stds."""
    from scipy.linalg import cho_factor, cho_solve, solve_triangular

    n = len(points)
    k = covariance_blocks(points, points, sigma, sigma, cov)
    k[np.diag_indices(2 * n)] += (1.0 - cov.correlated) * np.tile(sigma**2 / count, 2) + 1e-12
    factor = cho_factor(k, lower=True)
    alpha = cho_solve(factor, np.concatenate([anomaly[:, 0], anomaly[:, 1]]))
    rows, cols = cx.shape
    m = rows * cols
    xy = np.stack([cx.ravel(), cy.ravel()], axis=-1)
    n_days = len(cell_days)
    mean = np.empty((n_days, m, 2))
    std_days = np.unique(np.r_[np.arange(0, n_days, STD_EVERY), n_days - 1])
    var = np.empty((len(std_days), m, 2))
    for d, day in enumerate(cell_days):
        cells = np.column_stack([xy, np.full(m, day)])
        s = cell_sigma[d].ravel()
        cross = covariance_blocks(cells, points, s, sigma, cov)  # (2m, 2n)
        mean[d] = (cross @ alpha).reshape(2, m).T
        if d in std_days:
            w = solve_triangular(factor[0], cross.T, lower=True)
            explained = np.sum(w**2, axis=0).reshape(2, m).T
            var[np.searchsorted(std_days, d)] = np.maximum(cov.correlated * s[:, None] ** 2 - explained, 0.0)
    if len(std_days) < n_days:  # linear in time between the days computed
        at = np.arange(n_days)
        hi = np.clip(np.searchsorted(std_days, at), 1, len(std_days) - 1)
        w = ((at - std_days[hi - 1]) / (std_days[hi] - std_days[hi - 1]))[:, None, None]
        var = (1.0 - w) * var[hi - 1] + w * var[hi]
    return mean.reshape(n_days, rows, cols, 2), var.reshape(n_days, rows, cols, 2)


def prior_covariance(data: Velocities, settings):
    """Returns (the objective map's prior covariance, lagda.mapping.covariance.Covariance, estimated from the
    drifters' velocities `data` less the prior mean over the region and period of `settings`
    (lagda.mapping.settings.MapSettings); its note lines)."""
    lon, lat, seconds, velocity = data.lon, data.lat, data.seconds, data.velocity
    notes = ()
    if settings.background is not None:
        background = open_background(settings.background)
        notes = tuple(f"background: {line}" for line in background.notes)
        u, _ = background.velocity(lon, lat, seconds)
        missing = int(np.isnan(u).sum())
        notes += (f"background {os.path.basename(settings.background)}: the prior mean; the drifters map its "
                  "departure" + (f" ({missing:,} of {len(u):,} drifter velocities lie where it has no value: "
                                 "zero there)" if missing else ""),)
        velocity = velocity - prior_mean(settings.background, lon, lat, seconds)
    cov = estimate(lon, lat, seconds, velocity, data.drifter, settings.region, settings.period)
    return cov, (*notes, *cov.notes(settings.background is not None))


def objective_summary(infos: list[dict]) -> str:
    """Returns one line on the objective map's tiles: how many, how many had drifter velocities, and in how many
    blocks of cells the velocities within reach were more than MAX_BLOCK_POINTS (`_superobservations`)."""
    informed = sum(i.get("velocities", 0) > 0 for i in infos)
    if informed == len(infos):
        line = f"{counted(len(infos), 'tile')} mapped from the drifters' velocities"
    else:
        line = (f"{counted(len(infos), 'tile')} mapped: {informed} from drifter velocities, {len(infos) - informed} "
                "with none (the prior mean and std)")
    blocks, merged, thinned = (sum(i.get(key, 0) for i in infos)
                               for key in ("blocks_informed", "blocks_merged", "blocks_thinned"))
    if merged:
        line += (f"; in {merged:,} of {blocks:,} blocks of {BLOCK_CELLS} x {BLOCK_CELLS} cells over "
                 f"{MAX_BLOCK_POINTS} velocities within reach were averaged into super-observations (bins of 12 h and "
                 f"L/{SUPEROB_LEVELS[0]} to L/{SUPEROB_LEVELS[-1]})")
        if thinned:
            line += f", and in {thinned:,} of those the {MAX_BLOCK_POINTS} nearest kept"
    return line


class ObjectiveMethod(TileMethod):
    """The objective map (the default): each tile a Gaussian process of the drifters' velocities with the
    archive's own covariance (`map_tile`), far from the drifters the prior (the background product, or zero, and
    the drifters' regional mean).

    Every tile maps the same velocities (`Velocities.of_fixes`, made once) with the same prior covariance
    (`prior_covariance`, estimated once from all of them), so the tiles agree where they overlap.
    """

    name = "objective"
    summary = "an objective map with the covariance the archive's drifter pairs show: the prior far from them"
    std_meaning = (" of a drifter's velocity (the mapped field's and the variance uncorrelated at the map's "
                   "scales)")
    takes_background = True

    def __init__(self, settings):
        super().__init__(settings)
        self.prior = None  # the prior Covariance, estimated by `prepare`

    def prepare(self, fixes: Fixes) -> tuple[Velocities, tuple[str, ...]]:
        """Returns (the map's velocities, the prior's note lines); keeps the prior covariance for the tiles."""
        data = Velocities.of_fixes(fixes)
        self.prior, notes = prior_covariance(data, self.settings)
        return data, notes

    def map_tile(self, data: Velocities, tile: Tile, grid) -> dict:
        """Returns the tile's objective map (`map_tile`) with the prior covariance and the settings' background."""
        return map_tile(data, tile, grid, self.prior, self.settings.background)

    def summarise(self, infos: list[dict]) -> TileSummary:
        """Returns the line on the tiles (`objective_summary`); no tile counts as skipped."""
        return TileSummary([objective_summary(infos)])
