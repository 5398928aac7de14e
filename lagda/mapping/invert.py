"""One tile's inversion: its fixes on its own tangent plane, the `linear` posterior in a chosen basis, and the
velocity with its predictive std on the map cells the tile covers.

The tile's box (core and halo) is the model's periodic domain through the tangent plane at its centre
(lagda.io.physical.Mapping) and its time window is the model window [0, 0.1]; the basis is the uniform current and
circular Fourier modes up to `k_max` per box side times Legendre polynomials to `degree` in time over the whole
window (lagda.assimilation.basis.basis_model); the prior's spectrum and the error model of the velocity the basis
leaves out are chosen from the tile's own tracks (methods.prior_search), exactly as `lagda assimilate --method
linear --basis circular` does for one box. Drifter segments are split at gaps longer than `MAX_GAP_S`, so that no
finite difference spans a drifter's absence from the box.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.mapping.archive import Fixes
from lagda.mapping.tiles import Tile

MAX_GAP_S = 6 * 3600.0  # a drifter's fixes further apart than this are separate segments
MIN_SEGMENTS = 2  # a tile with fewer drifter segments is not inverted (too little to choose a prior from)
STD_EVERY = 2  # the predictive std is computed on every STD_EVERY-th cell and day, and interpolated between


@dataclasses.dataclass(frozen=True)
class Grid:
    """The map's cells and days.

    Attributes:
        lon, lat: `(nx,)`, `(ny,)` cell centres in degrees (lon increasing; may pass 180); days: `(nt,)` seconds.
    """

    lon: np.ndarray
    lat: np.ndarray
    days: np.ndarray

    def window(self, tile: Tile) -> tuple[slice, slice, slice]:
        """Returns (day, lat, lon) slices of the cells in the tile's box and window (lon compared in its convention)."""
        def span(values, lo, hi):
            i = np.flatnonzero((values > lo) & (values < hi))
            return slice(int(i[0]), int(i[-1]) + 1) if len(i) else slice(0, 0)

        lon = tile.relative_lon(self.lon)
        inside = np.flatnonzero((lon > tile.box[0]) & (lon < tile.box[1]))
        # cells in the tile's longitude convention are contiguous unless the region spans the whole globe
        lon_slice = slice(int(inside[0]), int(inside[-1]) + 1) if len(inside) else slice(0, 0)
        return (span(self.days, tile.start_s, tile.end_s), span(self.lat, tile.box[2], tile.box[3]), lon_slice)


def tile_fixes(fixes: Fixes, tile: Tile) -> Fixes:
    """Returns the fixes inside the tile's box and window, longitudes in the tile's convention."""
    lon = tile.relative_lon(fixes.lon)
    keep = ((lon >= tile.box[0]) & (lon <= tile.box[1]) & (fixes.lat >= tile.box[2]) & (fixes.lat <= tile.box[3])
            & (fixes.time >= tile.start_s) & (fixes.time <= tile.end_s))
    return dataclasses.replace(fixes.subset(keep), lon=lon[keep])


def _segments(fixes: Fixes) -> list[np.ndarray]:
    """Returns the fix indices of each drifter segment (one drifter, no gap over MAX_GAP_S), fixes sorted."""
    breaks = np.flatnonzero((np.diff(fixes.traj) != 0) | (np.diff(fixes.time) > MAX_GAP_S)) + 1
    return [s for s in np.split(np.arange(len(fixes)), breaks) if len(s) >= 3]


def invert_tile(fixes: Fixes, tile: Tile, grid: Grid, k_max: float, degree: int) -> dict:
    """Returns the tile's piece of the map: {"u", "v", "u_std", "v_std"} `(day, lat, lon)` float32 m/s on the cells
    of `grid.window(tile)`, and "info" (a dict of what the inversion chose), or {"info": ...} alone when the tile has
    fewer than MIN_SEGMENTS drifter segments (nothing to invert).

    `fixes` are the tile's own (`tile_fixes`). u_std, v_std are the total predictive std: the posterior std of the
    field in the basis and the std of the velocity it leaves out (the error model's), in quadrature.
    """
    from lagda.io.physical import MODEL_WINDOW, Mapping
    from lagda.io.tracks import pack_tracks

    segments = _segments(fixes)
    info = {"tile": tile.key, "fixes": int(len(fixes)), "segments": len(segments)}
    if len(segments) < MIN_SEGMENTS:
        return {"info": {**info, "skipped": f"fewer than {MIN_SEGMENTS} drifter segments"}}
    mapping = Mapping(tuple(float(b) for b in tile.box), "lonlat", float(tile.start_s),
                      (tile.end_s - tile.start_s) / MODEL_WINDOW)
    times = [mapping.time_to_model(fixes.time[s]) for s in segments]
    positions = [np.stack(mapping.to_model(fixes.lon[s], fixes.lat[s]), axis=-1) for s in segments]
    tracks = pack_tracks(times, positions, np.arange(len(segments)), np.zeros(len(segments), np.int64),
                         mapping=mapping)
    mean, cov, rep_std, chosen = _posterior(tracks, k_max, degree)
    return {**_on_grid(mean, cov, rep_std, chosen["model"], mapping, tile, grid),
            "info": {**info, **{k: v for k, v in chosen.items() if k != "model"}}}


def _posterior(tracks, k_max: float, degree: int):
    """Returns (mean `(2K,)`, cov `(2K, 2K)`, representation std (model units), info with the model)."""
    from lagda.assimilation.methods.basis import basis_model
    from lagda.assimilation.methods.config import LinearConfig
    from lagda.assimilation.methods.linear import representation_posterior
    from lagda.assimilation.methods.track_data import observation_regime
    from lagda.io.physical import MODEL_WINDOW

    model = basis_model(tracks, "circular", k_max, degree, window=MODEL_WINDOW)
    config = LinearConfig()
    regime = observation_regime(tracks.positions, tracks.times, model, config)
    mean, cov, found = representation_posterior(tracks.positions, tracks.times, None, model, config, regime,
                                                np.zeros(2 * model.n_modes), model.prior_var)
    keep = ("cv_ratio", "representation_std", "representation_time", "zero_guard", "velocity_noise_std")
    return mean, cov, float(found["representation_std"]), {"model": model, **{k: found[k] for k in keep
                                                                               if k in found}}


def _on_grid(mean, cov, rep_std: float, model, mapping, tile: Tile, grid: Grid) -> dict:
    """Returns u, v and their total std `(day, lat, lon)` in m/s on the tile's cells of `grid`.

    The basis has no frequencies (omega = 0): its velocity at (z, t) is the spatial part at z, evaluated once, times
    each mode's Legendre factor at t, so every day costs one matrix product.
    """
    from simulate.flow import temporal_factor, velocity_basis

    days, rows, cols = grid.window(tile)
    lon, lat, seconds = tile.relative_lon(grid.lon[cols]), grid.lat[rows], grid.days[days]
    lon2, lat2 = np.meshgrid(lon, lat)  # (lat, lon)
    points = np.stack(mapping.to_model(lon2, lat2), axis=-1)
    fu, fv = mapping.velocity_factors(lat2)
    shape = (len(seconds), len(lat), len(lon))
    k1, k2, omega, time = model.modes
    assert not np.any(omega), "a chosen basis has no frequencies"
    # at the window's end every Legendre polynomial is 1: the spatial part alone
    space = velocity_basis(points, time.start + time.length, k1, k2, omega, time).reshape(-1, 2 * len(k1))
    factor = lambda s: np.tile(temporal_factor(mapping.time_to_model(s), time, np), 2)  # (2K,)
    u, v = np.empty(shape, np.float32), np.empty(shape, np.float32)
    for d, s in enumerate(seconds):
        w = (space @ (factor(s) * mean)).reshape(len(lat), len(lon), 2)
        u[d], v[d] = w[..., 0] * fu, w[..., 1] * fv
    # the std varies on the basis's scales: computed on a coarser lattice, then interpolated
    sub_d, sub_y, sub_x = (_lattice(n) for n in shape)
    sub = space.reshape(len(lat), len(lon), 2, -1)[np.ix_(sub_y, sub_x)].reshape(-1, space.shape[-1])
    var = np.empty((len(sub_d), len(sub_y), len(sub_x), 2))
    for i, d in enumerate(sub_d):
        f = factor(seconds[d])
        scaled = sub * f  # G F, so that var = diag(G F C F G^T)
        var[i] = np.einsum("nk,nk->n", scaled @ cov, scaled).reshape(len(sub_y), len(sub_x), 2)
    var = np.maximum(var, 0.0) + rep_std**2
    var = _interpolate(var, (sub_d, sub_y, sub_x), shape)
    return {"u": u, "v": v, "u_std": (np.sqrt(var[..., 0]) * fu).astype(np.float32),
            "v_std": (np.sqrt(var[..., 1]) * fv).astype(np.float32)}


def _lattice(n: int) -> np.ndarray:
    """Returns every STD_EVERY-th index of range(n), the last index included."""
    return np.unique(np.append(np.arange(0, n, STD_EVERY), n - 1)) if n else np.zeros(0, int)


def _interpolate(values, axes, shape) -> np.ndarray:
    """Returns `values` on the lattice `axes` (index arrays) linearly interpolated to every index of `shape`."""
    from scipy.interpolate import RegularGridInterpolator

    axes = [a.astype(np.float64) if len(a) > 1 else np.array([a[0] - 1.0, a[0] + 1.0]) for a in axes]
    vals = values
    for i, a in enumerate(axes):
        if vals.shape[i] == 1:
            vals = np.repeat(vals, 2, axis=i)
    interp = RegularGridInterpolator(axes, vals, bounds_error=False, fill_value=None)
    mesh = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1)
    return interp(mesh)
