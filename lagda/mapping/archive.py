"""The fixes of a drifter archive inside a region and period, read lazily chunk by chunk.

An archive is a contiguous ragged array (clouddrift's and the GDP's layout: a per-trajectory count such as
`rowsize` over the trajectory dimension, `lon`, `lat`, `time` over the observation dimension) in netCDF or Zarr.
Only slices of `chunk_fixes` observations are in memory at a time: what is kept is the fixes of the region (widened
by a margin) and period, so memory follows the region and period, not the archive. GDP variables are used when
present: `drogue_status` is carried per fix, and `clean` applies lagda's cleaning rules (lagda.io.clean: duplicates,
order, spikes, undrogued fixes) to the selection.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from lagda.mapping.tiles import region_width

CHUNK_FIXES = 2_000_000  # observations read at a time


@dataclasses.dataclass(frozen=True)
class Fixes:
    """Fixes of several drifters, flat and sorted by (trajectory, time).

    Attributes:
        traj: int64 `(fix,)` index into `ids`; ids: `(trajectory,)` the archive's ids as stored.
        time: float64 `(fix,)` seconds since 1970-01-01T00:00:00Z; lon, lat: float64 `(fix,)` degrees.
        drogue: `(fix,)` the archive's drogue_status (0: undrogued), or None when it has none.
        notes: what the selection and cleaning did, one line each; clean: the counts of `clean` (name -> number).
    """

    traj: np.ndarray
    time: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    ids: np.ndarray
    drogue: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    clean: dict = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.time)

    def subset(self, keep) -> "Fixes":
        """Returns the fixes where boolean `keep` `(fix,)` holds (same ids and notes)."""
        return dataclasses.replace(self, traj=self.traj[keep], time=self.time[keep], lon=self.lon[keep],
                                   lat=self.lat[keep], drogue=None if self.drogue is None else self.drogue[keep])


def _open(path):
    import xarray as xr

    path = os.fspath(path)
    if os.path.isdir(path):
        return xr.open_zarr(path, decode_times=False, consolidated=None)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such archive: {path}")
    try:
        return xr.open_dataset(path, decode_times=False)
    except Exception as error:
        raise ValueError(f"{path} cannot be read as netCDF ({type(error).__name__}: {error})") from None


def _ragged_names(ds, path) -> tuple[str, str]:
    """Returns (count variable, observation dimension) of a contiguous ragged array, found from the dimensions."""
    for name in ("rowsize", *sorted(ds.variables)):
        var = ds.variables.get(name)
        if var is None or var.ndim != 1 or var.dtype.kind not in "iu" or name in ds.dims:
            continue
        for dim, size in ds.sizes.items():
            if dim != var.dims[0] and size > 0 and int(var.values.sum()) == size:
                return name, dim
    raise ValueError(f"{path}: not a ragged drifter archive (no count variable such as rowsize that sums to the "
                     "observation dimension); lagda map reads clouddrift/GDP ragged arrays")


def _variable(ds, names, path, what):
    for name in names:
        if name in ds.variables:
            return name
    raise ValueError(f"{path}: no {what} variable (looked for {', '.join(names)})")


def select_fixes(path, region, period, margin_deg: float = 0.0, margin_s: float = 0.0,
                 chunk_fixes: int = CHUNK_FIXES) -> Fixes:
    """Returns the fixes of archive `path` in `region` widened by `margin_deg` and `period` widened by `margin_s`.

    Args:
        path: a ragged netCDF file or Zarr store; region: (west, east, south, north) degrees (east < west crosses
            the dateline); period: (start, end) seconds since 1970-01-01T00:00:00Z.
    Raises:
        FileNotFoundError: missing archive. ValueError: not a ragged archive, or no fix in the region and period.
    """
    from lagda.io.formats import cf_seconds

    with _open(path) as ds:
        count, obs_dim = _ragged_names(ds, path)
        lon_name = _variable(ds, ("lon", "longitude"), path, "longitude")
        lat_name = _variable(ds, ("lat", "latitude"), path, "latitude")
        time_name = _variable(ds, ("time",), path, "time")
        for name in (lon_name, lat_name, time_name):
            if ds[name].dims != (obs_dim,):
                raise ValueError(f"{path}: {name} has dims {ds[name].dims}, expected ({obs_dim!r},)")
        ids = ds["id"].values if "id" in ds.variables and ds["id"].dims == ds[count].dims else np.arange(
            ds.sizes[ds[count].dims[0]])
        ends = np.cumsum(ds[count].values.astype(np.int64))
        drogue = "drogue_status" if "drogue_status" in ds.variables and ds["drogue_status"].dims == (obs_dim,) else None
        units, calendar = ds[time_name].attrs.get("units", ""), ds[time_name].attrs.get("calendar")
        if " since " not in str(units):
            raise ValueError(f"{path}: time has units {units!r}; lagda map needs CF times (\"seconds since ...\")")
        west, south, north = float(region[0]), float(region[2]), float(region[3])
        width = region_width(region)
        parts, n_total = [], int(ends[-1]) if len(ends) else 0
        for start in range(0, n_total, chunk_fixes):
            sl = slice(start, min(start + chunk_fixes, n_total))
            lon = ds[lon_name][sl].values.astype(np.float64)
            lat = ds[lat_name][sl].values.astype(np.float64)
            seconds = cf_seconds(ds[time_name][sl].values, units, calendar, path)
            east_of_west = (lon - west + margin_deg) % 360.0
            keep = ((east_of_west <= width + 2 * margin_deg) & (lat >= south - margin_deg)
                    & (lat <= north + margin_deg) & (seconds >= period[0] - margin_s)
                    & (seconds <= period[1] + margin_s) & np.isfinite(lon) & np.isfinite(lat))
            index = np.flatnonzero(keep) + start
            traj = np.searchsorted(ends, index, side="right")
            status = np.asarray(ds[drogue][sl].values)[keep] if drogue is not None else np.ones(len(index))
            parts.append((traj, seconds[keep], lon[keep], lat[keep], status))
    traj, seconds, lon, lat, status = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0)
                                       for i in range(5))
    if not len(traj):
        raise ValueError(f"{path}: no fix inside the region {tuple(region)} and period")
    order = np.lexsort((seconds, traj))
    notes = [f"archive {os.fspath(path)}: {len(traj)} of {n_total} fixes in the region and period "
             f"(with a margin of {margin_deg:g} degrees and {margin_s / 86400:g} days), "
             f"{len(np.unique(traj))} drifters"]
    return Fixes(traj.astype(np.int64)[order], seconds[order], lon[order], lat[order], np.asarray(ids),
                 status[order] if drogue is not None else None, tuple(notes))


def clean(fixes: Fixes, keep_undrogued: bool = False) -> Fixes:
    """Returns the fixes after lagda's cleaning rules (lagda.io.clean.clean_fixes: exact and conflicting duplicates,
    order, position spikes, undrogued fixes unless `keep_undrogued`), its notes and counts added."""
    from lagda.io.clean import clean_fixes
    from lagda.io.tracks import RawTracks

    splits = np.flatnonzero(np.diff(fixes.traj)) + 1
    present = fixes.traj[np.append(0, splits)] if len(fixes) else np.zeros(0, np.int64)
    per_fix = {} if fixes.drogue is None else {"drogue_status": np.split(fixes.drogue, splits)}
    raw = RawTracks(np.split(fixes.time, splits), np.split(np.stack([fixes.lon, fixes.lat], -1), splits),
                    present, None, "lonlat", True, per_fix=per_fix)
    cleaned, report = clean_fixes(raw, keep_undrogued=keep_undrogued)
    sizes = [len(t) for t in cleaned.times]
    pos = np.concatenate(cleaned.positions) if sizes else np.zeros((0, 2))
    drogue = cleaned.per_fix.get("drogue_status")
    return dataclasses.replace(
        fixes, traj=np.repeat(np.asarray(cleaned.ids, np.int64), sizes),
        time=np.concatenate(cleaned.times) if sizes else np.zeros(0), lon=pos[:, 0], lat=pos[:, 1],
        drogue=None if drogue is None else np.concatenate(drogue),
        notes=fixes.notes + tuple(report.notes()), clean=report.attrs())
