"""The fixes of a drifter archive inside a region and period (`select_fixes`), the region and period an archive's
fixes span (`archive_extent`), and lagda's cleaning rules applied to a selection (`clean`).

The archive is read lazily, a chunk at a time (lagda.io.archive: a ragged netCDF file or Zarr store, any other
longitude/latitude track file, or several files): what is kept of each chunk is the fixes of the region (widened by
a margin) and period, so memory follows the region and period, not the archive. GDP variables are used when
present: `drogue_status` is carried per fix, and `clean` applies lagda's cleaning rules (lagda.io.clean:
duplicates, order, spikes, undrogued fixes) to the selection.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.io.archive import CHUNK_FIXES, scan_archive
from lagda.io.fixes import Fixes, unsegmented_text
from lagda.mapping.tiles import region_width

# the cleaning counts (CleanReport fields) of fixes left out of the archive's extent, and how a note names them
_EXTENT_RULES = {"impossible_positions_dropped": "at no place on the sphere (fill values)",
                 "spikes_dropped": "position spikes", "off_track_dropped": "off their track",
                 "undrogued_dropped": "undrogued",
                 "exact_duplicates_dropped": "exact duplicates", "conflict_fixes_dropped": "conflicting duplicates",
                 "lone_fixes_dropped": "lone fixes at a track's end (a wrong time)",
                 "short_trajectory_fixes_dropped": "on trajectories of fewer than 3 fixes"}


def _in_region(lon, lat, region, margin_deg: float = 0.0) -> np.ndarray:
    """Returns where finite fixes lie in `region` (west, east, south, north degrees) widened by `margin_deg`."""
    west, south, north = float(region[0]), float(region[2]), float(region[3])
    east_of_west = (lon - west + margin_deg) % 360.0
    return ((east_of_west <= region_width(region) + 2 * margin_deg) & (lat >= south - margin_deg)
            & (lat <= north + margin_deg) & np.isfinite(lon) & np.isfinite(lat))


def select_fixes(path, region, period, margin_deg: float = 0.0, margin_s: float = 0.0,
                 chunk_fixes: int = CHUNK_FIXES, progress: bool = False) -> Fixes:
    """Returns the fixes of archive `path` in `region` widened by `margin_deg` and `period` widened by `margin_s`.

    Of a ragged archive only what may lie in the period is read (lagda.io.archive: the drifters' stated lives,
    then each slice's span of the period), of several files only those whose drifters' stated lives meet it; the
    fixes' notes say how many fixes or files were read, and whether the lives were set aside because a drifter's
    fixes fall outside its stated life (every fix read then).

    Parameters
    ----------
    path
        the archive: a ragged netCDF file or Zarr store, any lon/lat track file, several, or a folder of them
        (lagda.io.sources.track_files)
    region
        (west, east, south, north) degrees (east < west crosses the dateline)
    period
        (start, end) seconds since 1970-01-01T00:00:00Z.
    progress
        a bar on stderr.

    Raises
    ------
    FileNotFoundError
        missing archive.
    ValueError
        not a ragged archive, or no fix in the region and period.
    """
    widened = (period[0] - margin_s, period[1] + margin_s)

    def select(source):
        parts = []
        for piece, numbers, sl, lon, lat, seconds in source.chunks(chunk_fixes, "selecting fixes", progress, widened):
            keep = _in_region(lon, lat, region, margin_deg) & (seconds >= widened[0]) & (seconds <= widened[1])
            parts.append(piece.fixes(sl, lon, lat, seconds, keep, numbers))
        return parts

    parts, source, distrust = scan_archive(path, select)
    traj = np.concatenate([p.traj for p in parts]) if parts else np.zeros(0, np.int64)
    if not len(traj):
        raise ValueError(f"{source.name}: no fix inside the region {tuple(region)} and period")
    read = distrust + ((source.read_note,) if source.read_note else ())
    notes = source.notes + read + (f"archive {source.name}: {len(traj)} of {source.n_total} fixes in the region and "
                                   f"period (with a margin of {margin_deg:.3g} degrees and "
                                   f"{margin_s / 86400:.3g} days), {len(np.unique(traj))} drifters",)
    drogues = [p.drogue for p in parts]
    if any(d is not None for d in drogues):  # a piece without drogue_status: its fixes' status unknown (NaN)
        drogues = [np.full(len(p), np.nan) if d is None else d for p, d in zip(parts, drogues)]
    fixes = Fixes(traj, *(np.concatenate([getattr(p, name) for p in parts]) for name in ("time", "lon", "lat")),
                  source.ids(), np.concatenate(drogues) if drogues[0] is not None else None, notes)
    # a piece's slices end at trajectory ends, each trajectory's fixes together: in trajectory order unless a
    # drifter is in several pieces (files read in groups), whose numbers then decrease somewhere
    if np.any(np.diff(fixes.traj) < 0):
        fixes = fixes.subset(np.argsort(fixes.traj, kind="stable"))
    return fixes


def archive_extent(path, resolution: float, cadence_s: float, region=None, period=None, keep_undrogued: bool = False,
                   chunk_fixes: int = CHUNK_FIXES, progress: bool = False) -> tuple[tuple, tuple, list[str]]:
    """Returns (region, period, notes): the smallest region and period that hold the archive's fixes the map can
    use, for the ones not given, read in one pass over the archive.

    The fixes the map can use are those `clean` keeps (a position spike or an undrogued fix, unless
    `keep_undrogued`, does not stretch the map) that lie in a drifter segment (`Fixes.segments`: a lone fix days
    away from the rest of its track, such as a wrong time, gives no velocity and does not stretch the period).

    The region (west, east, south, north) is rounded out to multiples of `resolution` degrees; its longitudes are
    the shortest arc that holds every fix (across the dateline when that is shorter), its latitudes are clipped to
    -80..80 (the map's limit; the fixes beyond are counted in the note). The period (start, end) in seconds since
    1970-01-01T00:00:00Z runs from the map time (a multiple of `cadence_s`) at or before the first fix to the one at
    or before the last. Only fixes inside the `region` or `period` given count. `notes` says, for each, what was
    chosen and from how many fixes. `progress` draws a bar on stderr.

    Raises
    ------
    FileNotFoundError
        missing archive.
    ValueError
        not a ragged archive, or no fix to take an extent from.

    Examples
    --------
    >>> from lagda.examples import shipped
    >>> region, period, notes = archive_extent(shipped("gdp_like.nc"), 0.5, 86400.0)
    >>> region  # the 8 drifters' fixes lie within 40.84-37.15 W, 32.43-36.72 N
    (-41.0, -37.0, 32.0, 37.0)
    >>> notes[1].split(": ")[-1]  # the period: the first and the last fix's days
    '2025-03-01T00:00:00 to 2025-03-31T00:00:00'
    """
    n_bins = int(round(360.0 / resolution))

    def scan(source):
        occupied, lat_range, time_range, kept, poleward = np.zeros(n_bins, bool), [np.inf, -np.inf], [np.inf,
                                                                                                      -np.inf], 0, 0
        dropped = dict.fromkeys([*_EXTENT_RULES, "unsegmented"], 0)
        for piece, numbers, sl, lon, lat, seconds in source.chunks(chunk_fixes, "finding the extent", progress,
                                                                   period):
            keep = np.isfinite(lon) & np.isfinite(lat) & np.isfinite(seconds)
            if region is not None:
                keep &= _in_region(lon, lat, region)
            if period is not None:
                keep &= (seconds >= period[0]) & (seconds <= period[1])
            fixes = clean(piece.fixes(sl, lon, lat, seconds, keep, numbers), keep_undrogued)
            for rule in _EXTENT_RULES:
                dropped[rule] += fixes.clean[f"clean_{rule}"]
            usable = np.zeros(len(fixes), bool)
            usable[np.concatenate(fixes.segments() or [np.zeros(0, np.int64)])] = True
            dropped["unsegmented"] += int(np.sum(~usable))
            fixes = fixes.subset(usable)
            if region is None:
                poleward += int(np.sum(np.abs(fixes.lat) > 80.0))
                fixes = fixes.subset(np.abs(fixes.lat) <= 80.0)
            if not len(fixes):
                continue
            kept += len(fixes)
            occupied[np.floor((fixes.lon + 180.0) % 360.0 / resolution).astype(np.int64) % n_bins] = True
            lat_range = [min(lat_range[0], fixes.lat.min()), max(lat_range[1], fixes.lat.max())]
            time_range = [min(time_range[0], fixes.time.min()), max(time_range[1], fixes.time.max())]
        return occupied, lat_range, time_range, kept, poleward, dropped

    (occupied, lat_range, time_range, kept, poleward, dropped), source, _ = scan_archive(path, scan)
    names = {**_EXTENT_RULES, "unsegmented": unsegmented_text()}
    removed = ", ".join(f"{n} {names[rule]}" for rule, n in dropped.items() if n)
    of = f" the map can use ({removed} left out)" if removed else ""
    if not kept:
        missing = " and ".join(name for name, value in (("region", region), ("period", period)) if value is None)
        where = " and ".join(name for name, value in (("region", region), ("period", period)) if value is not None)
        raise ValueError(f"{source.name}: no fix{f' in the {where} given' if where else ''}"
                         f"{' within latitudes -80..80' if poleward else ''}{of} to take the map's {missing} from")
    notes, region_given = [], region is not None
    if region is None:
        region = (*_shortest_arc(occupied, resolution), max(-80.0, np.floor(lat_range[0] / resolution) * resolution),
                  min(80.0, np.floor(lat_range[1] / resolution) * resolution + resolution))
        region = tuple(round(float(r), 9) for r in region)
        notes.append(f"--region not given: the extent of the {kept} fixes{' in the period' if period else ''}{of}, "
                     f"rounded out to the {resolution:g}-degree cells: {' '.join(f'{r:g}' for r in region)} "
                     "(west east south north)" + (f"; {poleward} fixes poleward of 80 degrees left out"
                                                   if poleward else ""))
    if period is None:
        start = np.floor(time_range[0] / cadence_s) * cadence_s
        end = max(np.floor(time_range[1] / cadence_s) * cadence_s, start + cadence_s)
        period = (float(start), float(end))
        day = lambda t: str(np.datetime64(int(t), "s"))
        notes.append(f"--period not given: the map times from the first to the last of the {kept} fixes"
                     f"{' in the region' if region_given else ''}{'' if notes else of}: {day(start)} to {day(end)}")
    return region, period, notes


def _shortest_arc(occupied: np.ndarray, resolution: float) -> tuple[float, float]:
    """Returns (west, east) degrees of the shortest arc holding every occupied cell of a longitude circle of cells
    `(360 / resolution,)` starting at -180: the complement of its longest run of empty cells (the whole circle,
    -180 to 180, when no cell is empty)."""
    n, cells = len(occupied), np.flatnonzero(occupied)
    gaps = np.diff(cells, append=cells[0] + n)  # from each occupied cell to the next one round the circle
    if gaps.max() == 1:
        return -180.0, 180.0
    i = int(np.argmax(gaps))  # the longest empty run follows cells[i]
    west, east = -180.0 + cells[(i + 1) % len(cells)] * resolution, -180.0 + (cells[i] + 1) * resolution
    return west, east


def clean(fixes: Fixes, keep_undrogued: bool = False) -> Fixes:
    """Returns the fixes after lagda's cleaning rules (lagda.io.clean.clean_fixes: exact and conflicting duplicates,
    order, position spikes, undrogued fixes unless `keep_undrogued`), its notes and counts added."""
    from lagda.io.clean import clean_fixes
    from lagda.io.tracks import RawTracks

    splits = np.flatnonzero(np.diff(fixes.traj)) + 1
    present = fixes.traj[np.append(0, splits)] if len(fixes) else np.zeros(0, np.int64)
    split = lambda values: np.split(values, splits) if len(fixes) else []  # no fix: no trajectory
    per_fix = {} if fixes.drogue is None else {"drogue_status": split(fixes.drogue)}
    raw = RawTracks(split(fixes.time), split(np.stack([fixes.lon, fixes.lat], -1)), present, None, "lonlat", True,
                    per_fix=per_fix)
    cleaned, report = clean_fixes(raw, keep_undrogued=keep_undrogued)
    sizes = [len(t) for t in cleaned.times]
    pos = np.concatenate(cleaned.positions) if sizes else np.zeros((0, 2))
    drogue = cleaned.per_fix.get("drogue_status")
    return dataclasses.replace(
        fixes, traj=np.repeat(np.asarray(cleaned.ids, np.int64), sizes),
        time=np.concatenate(cleaned.times) if sizes else np.zeros(0), lon=pos[:, 0], lat=pos[:, 1],
        drogue=None if drogue is None else np.concatenate(drogue),
        notes=fixes.notes + tuple(report.notes()), clean=report.attrs())
