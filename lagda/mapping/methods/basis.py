"""The basis tile method (`BasisMethod`, `lagda map --tile-method basis`): each tile's inversion, its fixes on its
own tangent plane, the `linear` posterior in a chosen basis, a local Gaussian process of what that basis leaves out,
and the velocity with its predictive std on the tile's map cells.

The tile's box (core and halo) is the model's periodic domain through the tangent plane at its centre
(lagda.io.physical.Mapping) and its time window is the model window [0, 0.1]; the basis is the uniform current
and circular Fourier modes up to `k_max` per box side times Legendre polynomials to `degree` in time over the
whole window (lagda.assimilation.methods.basis.basis_model); the prior's spectrum and the error model of the
velocity the basis leaves out are chosen from the tile's own tracks (methods.prior_search), exactly as `lagda
assimilate --method linear --basis circular` does for one box. Drifter segments are split at gaps longer than
`lagda.io.fixes.MAX_GAP_S` (or 1.5 times a drifter's median step, up to 36 h: `Fixes.gap_limits`), so that no finite
difference spans a drifter's absence from the box. The drifters' velocities over chunks of `LOCAL_CHUNK_S`, less
the basis field's, are then mapped by a space-time Gaussian process fitted to them, whose mean is added to the
field (lagda.assimilation.local_gp: `lagda assimilate`'s ocean path gives its one box the same correction).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.local_gp import interpolate_lattice, lattice, local_gp_correction, mean_square_velocity
from lagda.io.fixes import Fixes
from lagda.mapping.methods.interface import TileMethod, TileSummary
from lagda.mapping.tiles import Grid, Tile
from lagda.report import counted

NO_SEGMENT = "no drifter segment"  # the "skipped" reason of a tile without one (nothing to invert)
# a tile of fewer drifter segments is mapped by the local GP of its drifter's velocities alone (`_lone_segment`) and
# fills only the cells that no tile of more segments reaches (`is_fallback`): a lone drifter's map is far poorer
FULL_SEGMENTS = 2


def tile_fixes(fixes: Fixes, tile: Tile) -> Fixes:
    """Returns the fixes inside the tile's box and window, longitudes in the tile's convention."""
    lon = tile.relative_lon(fixes.lon)
    keep = tile.holds(lon, fixes.lat) & (fixes.time >= tile.start_s) & (fixes.time <= tile.end_s)
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


def local_gp_summary(infos: list[dict]) -> list[str]:
    """Returns the lines on the tiles' local Gaussian processes: how many, their fitted scales (the median, and the
    10-90% range over the tiles when it is one), how many were not fitted or rejected; then, if any, in how many
    tiles the basis field was held at the edge of the drifters' velocities away from them; [] when none ran."""
    fitted = [i["local_gp"] for i in infos if isinstance(i.get("local_gp"), dict)]
    said = [i["local_gp"] for i in infos if isinstance(i.get("local_gp"), str)]
    rejected = sum(s.startswith("rejected") for s in said)
    if not fitted and not said:
        return []
    others = ("; " + ", ".join(words for words in (
        f"{len(said) - rejected} with too few velocities" if len(said) > rejected else "",
        f"{rejected} rejected (a correction over twice the drifters' largest residual)" if rejected else "")
        if words)) if said else ""
    if not fitted:
        return [f"near the drifters: no tile's correction kept{others}"]

    def spread(key, fmt):  # the median over the tiles, and their 10-90% range where it is one
        low, middle, high = (fmt.format(v) for v in np.percentile([f[key] for f in fitted], [10, 50, 90]))
        return middle if low == high else f"{middle} ({low}-{high})"

    spans = [f["span_h"] for f in fitted if "span_h" in f]  # (tiles of a map begun by an earlier lagda lack it)
    over = f"{np.median(spans):.2g}-h " if spans else ""
    dense = [f["nearest_per_day"] for f in fitted if "nearest_per_day" in f]
    over += f"velocities (in {counted(len(dense), 'dense tile')} each day the {dense[0]:,} nearest)" if dense else \
        "velocities"
    beyond = [f["beyond_drifters"] for f in fitted if f.get("beyond_drifters", 0.0) > 0]
    beyond = [f"away from the drifters, in {counted(len(beyond), 'tile')}, on up to {100 * max(beyond):.3g}% of the "
              "cells: the flow departed from their mean more than any of them did: held at their edge, the excess in "
              "the std"] if beyond else []
    tiles = f"{len(fitted)} of {counted(len(fitted) + len(said), 'tile')}" if said else counted(len(fitted), "tile")
    return [f"near the drifters, in {tiles}: what the flow leaves out, fitted to {over}, correlated over "
            f"{spread('ell_km', '{:.0f}')} km and {spread('tau_days', '{:.1f}')} days, std "
            f"{spread('std_m_s', '{:.3f}')} m/s (--no-local-gp){others}", *beyond]


def basis_summary(infos: list[dict]) -> TileSummary:
    """Returns what the basis tiles did: the line on the tiles mapped (those of a single drifter segment, those
    without a drifter, answered zero, with velocities left out, whose tracks could not be inverted), the local GPs'
    lines (`local_gp_summary`), the tiles skipped, and a warning when no tile was inverted."""
    skipped = [i for i in infos if "skipped" in i]
    zero = sum(bool(i.get("zero_guard")) for i in infos)
    outliers = [i.get("velocity_outliers_dropped", 0) for i in infos]
    empty = sum(i["skipped"] == NO_SEGMENT for i in skipped)
    n_lone = sum(is_fallback(i) for i in infos)
    failed = [f"{i['tile']}: {i['skipped']}" for i in skipped if i["skipped"] != NO_SEGMENT]
    # a tile whose tracks cannot be inverted (drifters that never move: no velocity variance) is said with why
    unusable = (f"; {len(failed)} whose tracks could not be inverted (left to the others, else NaN; "
                f"{failed[0]}{' and others in tile_records' if len(failed) > 1 else ''})" if failed else "")
    lone = (f" ({n_lone} of a single drifter segment: about zero, its std at least the drifters' RMS velocity "
            f"away from it, used where no tile of {FULL_SEGMENTS} or more segments reaches)" if n_lone else "")
    said = [f"{empty} without a drifter (left to the others, else NaN)" if empty else "",
            f"{zero} answered zero (their drifters predicted held-out ones no better)" if zero else "",
            f"{counted(sum(outliers), 'velocity', 'velocities')} far off their tile's fitted field left out (fixes off "
            "their track that the cleaning kept)" if sum(outliers) else ""]
    notes = [f"{counted(len(infos) - len(skipped), 'tile')} mapped from their drifters{lone}"
             + "".join(f"; {words}" for words in said if words) + unusable]
    warning = ""
    if len(skipped) == len(infos):
        why = failed or ["no tile holds a drifter segment"]
        warning = f"no tile was inverted, so the map holds no velocity (NaN everywhere): {'; '.join(why[:2])}"
    return TileSummary(notes + local_gp_summary(infos), len(skipped), warning)


@dataclasses.dataclass(frozen=True)
class TimeOrderedFixes:
    """The map's fixes with their order in time, so that a tile's are found by a binary search in time.

    Attributes
    ----------
    fixes : lagda.io.fixes.Fixes
        The fixes the map is made from, in (drifter, time) order.
    by_time : numpy.ndarray
        int `(fix,)`: the fixes' indices in time order (stable).
    sorted_time : numpy.ndarray
        float `(fix,)`: their times in that order, seconds.
    """

    fixes: Fixes
    by_time: np.ndarray
    sorted_time: np.ndarray

    @classmethod
    def of(cls, fixes: Fixes) -> "TimeOrderedFixes":
        """Returns the fixes with their order in time."""
        by_time = np.argsort(fixes.time, kind="stable")
        return cls(fixes, by_time, fixes.time[by_time])

    def in_tile(self, tile: Tile) -> Fixes:
        """Returns the fixes in the tile's box and window (`tile_fixes`), in (drifter, time) order: the window's
        found first by a binary search, then the box's among them."""
        return tile_fixes(self.fixes.subset(np.sort(self.by_time[tile.window(self.sorted_time)])), tile)


class BasisMethod(TileMethod):
    """The tile basis: each tile the `linear` posterior in a Fourier-Legendre basis of its box (`k_max`, `degree`
    of the settings) with the local GP of what it leaves out (`local_gp`), far from the drifters the basis's
    extrapolation; a tile of one drifter segment is that segment's local GP alone, used only where no other tile
    reaches (`invert_tile`)."""

    name = "basis"
    summary = ("the linear posterior in a Fourier-Legendre basis of the tile's box with a local GP; --k-max, "
               "--degree, --no-local-gp")
    std_meaning = " (the field in the tile basis and the velocity it leaves out)"

    def __init__(self, settings):
        super().__init__(settings)
        self.lone_floor = 0.0  # (m/s)^2, the drifters' mean square velocity, set by `prepare`

    def prepare(self, fixes: Fixes) -> tuple[TimeOrderedFixes, tuple[str, ...]]:
        """Returns (the fixes in time order, no notes); keeps the drifters' mean square velocity, the least
        variance of a lone segment's tile away from its drifter."""
        self.lone_floor = mean_square_velocity(fixes)
        return TimeOrderedFixes.of(fixes), ()

    def map_tile(self, data: Fixes, tile: Tile, grid: Grid) -> dict:
        """Returns the tile's inversion (`invert_tile`) with the settings' basis and local GP."""
        s = self.settings
        return invert_tile(data, tile, grid, s.k_max, s.degree, s.local_gp, self.lone_floor)

    def summarise(self, infos: list[dict]) -> TileSummary:
        """Returns `basis_summary` of the tiles."""
        return basis_summary(infos)

    def is_fallback(self, info: dict) -> bool:
        """Returns `is_fallback(info)`: a piece of one drifter segment fills the gaps only."""
        return is_fallback(info)

    def local_gp_lines(self, infos: list[dict]) -> list[str]:
        """Returns `local_gp_summary(infos)`."""
        return local_gp_summary(infos)
