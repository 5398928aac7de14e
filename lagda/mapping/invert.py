"""One tile's inversion: its fixes on its own tangent plane, the `linear` posterior in a chosen basis, a local
Gaussian process of what that basis leaves out, and the velocity with its predictive std on the tile's map cells.

The tile's box (core and halo) is the model's periodic domain through the tangent plane at its centre
(lagda.io.physical.Mapping) and its time window is the model window [0, 0.1]; the basis is the uniform current
and circular Fourier modes up to `k_max` per box side times Legendre polynomials to `degree` in time over the
whole window (lagda.assimilation.methods.basis.basis_model); the prior's spectrum and the error model of the
velocity the basis leaves out are chosen from the tile's own tracks (methods.prior_search), exactly as `lagda
assimilate --method linear --basis circular` does for one box. Drifter segments are split at gaps longer than
`lagda.io.fixes.MAX_GAP_S` (or 1.5 times a drifter's median step, up to 36 h: `Fixes.gap_limits`), so that no finite
difference spans a drifter's absence from the box. The drifters' velocities over chunks of `LOCAL_CHUNK_S`, less
the basis field's, are then mapped by a space-time Gaussian process (lagda.mapping.residual) fitted to them, whose
mean is added to the field (`local_gp_correction`).
`lagda assimilate`'s ocean path gives its one box the same correction (`box_local_gp`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.local_gp import interpolate_lattice, lattice, local_gp_correction
from lagda.io.fixes import Fixes
from lagda.mapping.tiles import Tile

NO_SEGMENT = "no drifter segment"  # the "skipped" reason of a tile without one (nothing to invert)
# a tile of fewer drifter segments is mapped by the local GP of its drifter's velocities alone (`_lone_segment`) and
# fills only the cells that no tile of more segments reaches (`is_fallback`): a lone drifter's map is far poorer
FULL_SEGMENTS = 2


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


def invert_tile(fixes: Fixes, tile: Tile, grid: Grid, k_max: float, degree: int, local_gp: bool = True,
                lone_floor: float = 0.0) -> dict:
    """Returns the tile's piece of the map: {"u", "v", "u_std", "v_std"} `(day, lat, lon)` float32 m/s on the cells
    of `grid.window(tile)`, and "info" (a dict of what the inversion chose), or {"info": ...} alone when the tile has
    no drifter segment (nothing to invert). A tile of one segment is the local GP of its velocities alone
    (`_lone_segment`, its piece a fallback: `is_fallback`), its variance away from the drifter at least
    `lone_floor` (m/s)^2 per component (the whole archive's `mean_square_velocity`).

    `fixes` are the tile's own (`tile_fixes`). u_std, v_std are the total predictive std: the posterior std of the
    field in the basis and the std of the velocity it leaves out (the error model's), in quadrature.
    """
    segments = fixes.segments()
    info = {"tile": tile.key, "fixes": int(len(fixes)), "segments": len(segments)}
    if not segments:
        return {"info": {**info, "skipped": NO_SEGMENT}}
    mapping, tracks = tile_tracks(fixes, segments, tile)
    days, rows, cols = grid.window(tile)
    lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
    cells = (lon2, lat2, grid.days[days])
    if len(segments) < FULL_SEGMENTS:
        return _lone_segment(fixes, segments, mapping, tile, cells, k_max, local_gp, info, lone_floor)
    mean, cov, rep_std, chosen = _posterior(tracks, k_max, degree)
    model = chosen.pop("model")
    field = _on_grid(mean, cov, model, mapping, tile, grid)
    info.update(chosen)
    if not local_gp:
        return _finish(field, rep_std, info)
    kept = [(rep_std * field[f]) ** 2 for f in ("fu", "fv")]  # the error model's variance, if the fit is rejected
    corrected, info["local_gp"] = local_gp_correction(field, cells, fixes, segments, mean, model, mapping, tile,
                                                      k_max, bool(info.get("zero_guard")), kept_var=kept)
    if corrected is None:
        return _finish(field, rep_std, info)
    u, v, var_u, var_v = corrected
    return {"u": u, "v": v, "u_std": np.sqrt(var_u).astype(np.float32), "v_std": np.sqrt(var_v).astype(np.float32),
            "info": info}


def _lone_segment(fixes: Fixes, segments, mapping, tile: Tile, cells, k_max: float, local_gp: bool, info: dict,
                  far_floor: float = 0.0) -> dict:
    """Returns the piece of a tile of one drifter segment: the local GP of its velocities alone, about zero (as a
    tile whose basis answered zero has it), its variance away from the drifter at least `far_floor` (m/s)^2, or
    {"info": ...} with why not. One track leaves the basis's prior unchosen: fitted from it, the field away from the
    drifter erred more than a map of zero and its bands held the truth on a third of the cells of some tiles (the
    basin-year archive); one drifter's own velocities say too little of the ocean's around it, hence the floor."""
    if not local_gp:
        return {"info": {**info, "skipped": "one drifter segment, mapped by the local GP alone (--no-local-gp)"}}
    zero = np.zeros((len(cells[2]), *cells[0].shape))
    field = {"u": zero, "v": zero, "var_u": zero, "var_v": zero}
    corrected, record = local_gp_correction(field, cells, fixes, segments, None, None, mapping, tile, k_max,
                                            zero_guard=True, far_floor=far_floor)
    if corrected is None:
        return {"info": {**info, "skipped": f"one drifter segment, its local GP {record}"}}
    u, v, var_u, var_v = corrected
    return {"u": u.astype(np.float32), "v": v.astype(np.float32), "u_std": np.sqrt(var_u).astype(np.float32),
            "v_std": np.sqrt(var_v).astype(np.float32), "info": {**info, "local_gp": record}}


def is_fallback(info: dict) -> bool:
    """Whether an inverted tile's piece, of fewer than FULL_SEGMENTS drifter segments, enters the map only on the
    cells where no piece of more segments has any weight (one drifter's answer fills a gap, never blends into a
    better one)."""
    return "skipped" not in info and info.get("segments", FULL_SEGMENTS) < FULL_SEGMENTS


def tile_tracks(fixes: Fixes, segments: list[np.ndarray], tile: Tile):
    """Returns (the tile's Mapping: its box through the tangent plane at its centre as the model domain, its window
    as the model window; the segments as model-unit Tracks, one track per segment)."""
    from lagda.io.physical import MODEL_WINDOW, Mapping
    from lagda.io.tracks import pack_tracks

    mapping = Mapping(tuple(float(b) for b in tile.box), "lonlat", float(tile.start_s),
                      (tile.end_s - tile.start_s) / MODEL_WINDOW)
    times = [mapping.time_to_model(fixes.time[s]) for s in segments]
    positions = [np.stack(mapping.to_model(fixes.lon[s], fixes.lat[s]), axis=-1) for s in segments]
    return mapping, pack_tracks(times, positions, np.arange(len(segments)), np.zeros(len(segments), np.int64),
                                mapping=mapping)


def _finish(field: dict, rep_std: float, info: dict) -> dict:
    """Returns the tile's piece without the local GP: the velocity the basis leaves out is the error model's std."""
    return {"u": field["u"], "v": field["v"], "info": info,
            "u_std": np.sqrt(field["var_u"] + (rep_std * field["fu"]) ** 2).astype(np.float32),
            "v_std": np.sqrt(field["var_v"] + (rep_std * field["fv"]) ** 2).astype(np.float32)}


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
    keep = ("cv_ratio", "representation_std", "representation_time", "zero_guard", "velocity_noise_std",
            "velocity_outliers_dropped", "noise_note")
    return mean, cov, float(found["representation_std"]), {"model": model, **{k: found[k] for k in keep
                                                                               if k in found}}


def _on_grid(mean, cov, model, mapping, tile: Tile, grid: Grid) -> dict:
    """Returns u, v `(day, lat, lon)` m/s on the tile's cells of `grid`, the variance of the field in the basis
    var_u, var_v `(day, lat, lon)` (m/s)^2, and fu, fv `(lat, lon)`, m/s per model velocity unit.

    The basis has no frequencies (omega = 0): a mode's velocity at (z, t) is its spatial part at z times the
    Legendre polynomial L_p(t) of its degree p. So the velocity is sum_p L_p(t) w_p with one w_p per degree, and
    its variance is separable too (lagda.assimilation.fields.separable_variance): the matrix products are made
    once, not once a day.
    """
    from lagda.assimilation.fields import separable_variance
    from simulate.flow import temporal_factor, velocity_basis

    days, rows, cols = grid.window(tile)
    lon, lat, seconds = tile.relative_lon(grid.lon[cols]), grid.lat[rows], grid.days[days]
    lon2, lat2 = np.meshgrid(lon, lat)  # (lat, lon)
    points = np.stack(mapping.to_model(lon2, lat2), axis=-1)
    fu, fv = mapping.velocity_factors(lat2)
    shape = (len(seconds), len(lat), len(lon))
    k1, k2, omega, time = model.modes
    assert not np.any(omega), "a chosen basis has no frequencies"
    n_degrees = time.select.shape[-1]
    legendre = lambda s: temporal_factor(mapping.time_to_model(s), time._replace(select=np.eye(n_degrees)), np)
    by_degree = [np.flatnonzero(np.tile(time.degree, 2) == p) for p in range(n_degrees)]
    # at the window's end every Legendre polynomial is 1: the spatial part alone
    space = velocity_basis(points, time.start + time.length, k1, k2, omega, time).reshape(-1, 2 * len(k1))
    per_degree = np.stack([space[:, i] @ mean[i] for i in by_degree], axis=-1)  # (cell x 2, degree)
    w = (legendre(seconds) @ per_degree.T).reshape(*shape, 2)
    u, v = (w[..., 0] * fu).astype(np.float32), (w[..., 1] * fv).astype(np.float32)
    # the std varies on the basis's scales: computed on a coarser lattice, then interpolated
    sub_d, sub_y, sub_x = (lattice(n) for n in shape)
    sub = space.reshape(len(lat), len(lon), 2, -1)[np.ix_(sub_y, sub_x)].reshape(-1, space.shape[-1])
    var = separable_variance(sub, cov, np.tile(time.degree, 2), legendre(seconds[sub_d]))
    var = var.reshape(len(sub_d), len(sub_y), len(sub_x), 2)
    var = interpolate_lattice(np.maximum(var, 0.0), (sub_d, sub_y, sub_x), shape)
    return {"u": u, "v": v, "var_u": var[..., 0] * fu**2, "var_v": var[..., 1] * fv**2, "fu": fu, "fv": fv}

