"""The written map: the pieces blended (lagda.mapping.blend) into one CF dataset on (time, lat, lon) with the fixes
per cell, the distance to the nearest fix and the sea fraction, its attributes (settings, notes, the tiles'
records), and the check against withheld drifters. The dataset is written to a temporary name and renamed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil

import numpy as np

from lagda.io.fixes import Fixes
from lagda.io.land import SOURCE as LAND_SOURCE
from lagda.mapping.blend import blend_block
from lagda.mapping.methods.interface import TileMethod
from lagda.mapping.resume import VARIABLES, load_info
from lagda.mapping.settings import MapSettings
from lagda.mapping.store import add_attributes, open_map
from lagda.mapping.tiles import Grid
from lagda.version import __version__
from simulate.atomic import fault_point, temporary_name, write_netcdf
from simulate.provenance import code_digest

BLEND_DAYS = 32  # map times blended and written at once


def write_map(out, partial, tiles, grid: Grid, settings: MapSettings, method: TileMethod, fixes: Fixes,
              manifest: dict, sea: np.ndarray, held: Fixes | None = None) -> tuple[list[dict], dict | None]:
    """Blends the pieces of the tile `method` (in layout order) and writes the dataset, BLEND_DAYS map times at a
    time (the blend's memory is a block's, not the period's), the land cells NaN if the settings say so; with
    `held` (withheld drifters' fixes), checks the written map against them and adds the scores to its attributes
    before it takes its name. Returns (the pieces' infos, the check's attributes or None)."""
    import dask
    import dask.array as da

    infos = [load_info(partial, tile.key) for tile in tiles]
    n = len(grid.days)
    blocks = [(lo, min(lo + BLEND_DAYS, n)) for lo in range(0, n, BLEND_DAYS)]
    cells = (len(grid.lat), len(grid.lon))
    land = (sea == 0) if settings.land_mask else None
    blended = da.concatenate([da.from_delayed(dask.delayed(blend_block)(partial, tiles, grid, method, lo, hi, land),
                                              (len(VARIABLES), hi - lo, *cells), np.float32) for lo, hi in blocks],
                             axis=1)
    counts = da.concatenate([da.from_delayed(dask.delayed(_fix_counts)(fixes, grid, settings, lo, hi),
                                             (hi - lo, *cells), np.int32) for lo, hi in blocks])
    distance = da.concatenate([da.from_delayed(dask.delayed(fix_distance)(fixes, grid, settings, lo, hi),
                                               (hi - lo, *cells), np.float32) for lo, hi in blocks])
    ds = _dataset(grid, settings, method, dict(zip(VARIABLES, blended)), counts, infos, sea, distance)
    ds.attrs.update({"notes": json.dumps(list(fixes.notes)), "manifest": json.dumps(manifest), **fixes.clean})
    checked = {}

    def check(tmp):  # on the written map, before it takes its name
        if held is not None:
            checked.update(_check_attrs(tmp, held, fixes))
            add_attributes(tmp, checked)

    with dask.config.set(scheduler="synchronous"):  # one block at a time, in this process
        if out.endswith(".nc"):
            write_netcdf(ds, out, fault="map-final", finish=check)
            return infos, checked or None
        tmp = temporary_name(out)
        ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)  # v2: read by every zarr
    check(tmp)
    fault_point("map-final:written")
    if os.path.isdir(out):  # a store being overwritten: moved aside to a temporary name, then removed
        old = temporary_name(out).with_name(temporary_name(out).name + "-old")
        os.rename(out, old)
        shutil.rmtree(old)
    os.rename(tmp, out)
    fault_point("map-final:renamed")
    return infos, checked or None


def _check_attrs(path, held: Fixes, mapped: Fixes | None = None) -> dict:
    """Returns the map's attributes of its check against the withheld drifters (lagda.mapping.check), by distance
    to the `mapped` fixes when given."""
    from lagda.io.tracks import id_text
    from lagda.mapping.check import check_lines, check_map

    with open_map(path) as maps:
        scores = check_map(maps, held, mapped)
    ids = sorted({id_text(held.ids[t]) for t in np.unique(held.traj)})
    drifters = None if mapped is None else len(ids) + len({id_text(mapped.ids[t]) for t in np.unique(mapped.traj)})
    return {"check": "\n".join(check_lines(scores, len(ids), drifters)), "check_withheld_ids": json.dumps(ids),
            **{f"check_{name}": value for name, value in scores.items()}}


def check_notes(check) -> list[str]:
    """Returns the note lines of a map's check against withheld drifters: its "check" (a key of `_check_attrs`, or
    of the map's attributes) holds them joined by newlines."""
    return str(check["check"]).split("\n")


def land_note(sea: np.ndarray, fixes: Fixes, grid: Grid, settings: MapSettings) -> str:
    """Returns the note on the land cells (sea fraction 0): how many, what becomes of them, the fixes in them."""
    land = sea == 0
    j, i, ok = _cells_of(fixes.lon, fixes.lat, grid, settings)
    ashore = int(land[j[ok], i[ok]].sum())
    share = f"{int(land.sum()):,} of {land.size:,} cells ({land.mean():.1%}) have no sea in {LAND_SOURCE}"
    fixes_there = (f"; {ashore:,} fixes lie in them (drifters ashore, or a coast finer than the mask)" if ashore
                   else "")
    if settings.land_mask:
        return f"land: {share}: left NaN (--no-land-mask maps them){fixes_there}"
    return f"land: {share}: mapped all the same (--no-land-mask){fixes_there}"


def _cells_of(lon, lat, grid: Grid, settings: MapSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the cell (row j, column i) of each fix at lon, lat `(fix,)` and whether it lies in the region."""
    res, west, south = settings.resolution, settings.region[0], settings.region[2]
    i = np.floor(((lon - west) % 360.0) / res).astype(np.int64)
    j = np.floor((lat - south) / res).astype(np.int64)
    return j, i, (i >= 0) & (i < len(grid.lon)) & (j >= 0) & (j < len(grid.lat))


def _fix_counts(fixes: Fixes, grid: Grid, settings: MapSettings, lo: int, hi: int) -> np.ndarray:
    """Returns the fixes in each cell within half a cadence of map times lo..hi-1 `(hi - lo, lat, lon)`."""
    k = np.floor((fixes.time - grid.days[0]) / settings.cadence_s + 0.5).astype(np.int64)
    near = (k >= lo) & (k < hi)
    j, i, ok = _cells_of(fixes.lon[near], fixes.lat[near], grid, settings)
    k = k[near] - lo
    counts = np.zeros((hi - lo, len(grid.lat), len(grid.lon)), np.int32)
    np.add.at(counts, (k[ok], j[ok], i[ok]), 1)
    return counts


def fix_distance(fixes: Fixes, grid: Grid, settings: MapSettings, lo: int, hi: int) -> np.ndarray:
    """Returns float32 `(hi - lo, lat, lon)`: the great-circle distance in km from each cell centre to the nearest
    fix within half a map interval of map times lo..hi-1 (NaN where no fix is that near in time)."""
    from scipy.spatial import cKDTree

    from lagda.mapping.covariance import great_circle_km, unit_vectors

    lon2, lat2 = np.meshgrid(grid.lon, grid.lat)
    cells = unit_vectors(lon2.ravel(), lat2.ravel())
    k = np.floor((fixes.time - grid.days[0]) / settings.cadence_s + 0.5).astype(np.int64)
    out = np.full((hi - lo, *lon2.shape), np.nan, np.float32)
    points = unit_vectors(fixes.lon, fixes.lat)
    for d in range(lo, hi):
        near = k == d
        if near.any():
            out[d - lo] = great_circle_km(cKDTree(points[near]).query(cells)[0]).reshape(lon2.shape)
    return out


def _dataset(grid: Grid, settings: MapSettings, method: TileMethod, fields: dict, counts, infos, sea: np.ndarray,
             distance=None):
    import xarray as xr

    times = (grid.days * 1e9).astype("datetime64[ns]")
    names = {"u": ("eastward_sea_water_velocity", "eastward velocity"),
             "v": ("northward_sea_water_velocity", "northward velocity")}
    data = {}
    for c in ("u", "v"):
        standard, long = names[c]
        data[c] = (("time", "lat", "lon"), fields[c].astype(np.float32),
                   {"standard_name": standard, "long_name": f"{long}, posterior mean", "units": "m s-1"})
        data[f"{c}_std"] = (("time", "lat", "lon"), fields[f"{c}_std"].astype(np.float32),
                            {"long_name": f"{long}, total predictive standard deviation{method.std_meaning}",
                             "units": "m s-1"})
    data["n_fixes"] = (("time", "lat", "lon"), counts,
                       {"long_name": "drifter fixes in the cell within half a map interval", "units": "1"})
    if distance is not None:
        data["distance_to_fix"] = (("time", "lat", "lon"), distance, {
            "long_name": "distance to the nearest drifter fix the map used within half a map interval (NaN: none)",
            "units": "km"})
    data["sea_area_fraction"] = (("lat", "lon"), sea, {
        "standard_name": "sea_area_fraction", "units": "1",
        "long_name": "fraction of the cell that is sea in the GLOBE 1-km land mask (0: land)"})
    ds = xr.Dataset(data, coords={
        "time": ("time", times, {"standard_name": "time", "axis": "T"}),
        "lat": ("lat", grid.lat, {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"}),
        "lon": ("lon", grid.lon, {"standard_name": "longitude", "units": "degrees_east", "axis": "X"})})
    skipped = sum("skipped" in i for i in infos)
    ds.attrs = {"Conventions": "CF-1.11", "title": "lagda map: daily velocity maps from drifters",
                "source": f"lagda {__version__}",
                "history": f"written by lagda map (lagda {__version__}, source digest {code_digest()})",
                "tile_size_deg": settings.tile_deg,
                "halo_deg": settings.halo_deg, "window_days": settings.window_days,
                "window_step_days": settings.step_days, "k_max": settings.k_max, "degree": settings.degree,
                "tiles": len(infos), "tiles_skipped": skipped,
                "tiles_zero_guard": sum(bool(i.get("zero_guard")) for i in infos),
                "tile_velocity_outliers_dropped": sum(i.get("velocity_outliers_dropped", 0) for i in infos),
                "local_gp": "\n".join(method.local_gp_lines(infos)) or "off",
                "land_mask": (f"{LAND_SOURCE}: cells without sea left NaN" if settings.land_mask
                              else "off: land cells mapped as sea"),
                "tile_records": json.dumps(infos),
                "settings": json.dumps(dataclasses.asdict(settings)),
                "settings_hash": hashlib.sha256(json.dumps(dataclasses.asdict(settings)).encode()).hexdigest()[:16]}
    ds.time.encoding["units"] = "seconds since 1970-01-01T00:00:00Z"
    for name in ("lat", "lon"):  # CF: a coordinate variable has no fill value (xarray gives floats NaN)
        ds[name].encoding["_FillValue"] = None
    return ds
