"""Reading drifter track files of any format the ecosystem writes, into `Tracks` in model units.

`read_tracks` is the entry: `read_raw` reads the fixes of a file, a folder of files or several (lagda.io.sources),
each file by the reader of its format, told from its content, not its name (lagda.io.readers.registry); `to_tracks`
cleans them and maps physical ones onto the model. The formats, one reader module each (lagda.io.readers):

- netCDF or Zarr (Parcels v3, a store at a URL too; `cf_dataset`): a lagda dataset (global attribute
  `lagda_schema_version`) or a CF trajectory file in the incomplete multidimensional, orthogonal or contiguous
  ragged layout (clouddrift's and the GDP's `rowsize`), a layout its attributes leave unsaid found from its
  dimensions (a warning says what was assumed); one trajectory without a trajectory dimension and a flat table of
  fixes, ERDDAP's tabledap `.nc` (`cf_trajectory`). The GDP variables are read when present, a GDP file's
  `drogue_lost_date` gives `drogue_status` (`gdp_fields`); values CF quality flags mark bad, and -1e34 (the GDP's
  missing value), are read as missing (`cf_variables`).
- Parquet, Parcels v4 output (`parquet`): one row per particle and observation.
- The GDP's 6-hourly interpolated text files (`gdp_text`: `buoydata_*.dat`, no header).
- CSV with a header (`csv`): `id,time,x,y[,field]` in model units, or `id,time,lon,lat[,field]` with ISO 8601
  datetimes, ERDDAP's tabledap CSV as downloaded (`.csv` with its row of units, `.csvp`).

Text files (CSV, 6-hourly) may be gzip-compressed, as AOML serves the 6-hourly files (`.dat.gz`).

Several files, or a folder of them, are read as one (`read_raw`: a drifter id in several files is one drifter).

Every track file is quality-controlled before it is mapped (lagda.io.clean: duplicates, order,
spikes, fixes off their track, undrogued fixes; a count and a note for each rule that acted).

Without a `field` variable (or column), each model-unit trajectory is its own flow, while
physical tracks all sample one flow (field 0): real drifters of one file share one ocean.

Positions are model units (x, y, units "1"), longitude/latitude in degrees, or projected x/y in
metres; times are model units ("1") or CF times ("UNIT since DATE", lagda.io.cf_time). Physical tracks are mapped
onto the model's torus by a `lagda.io.physical.Mapping`: the `box` and `time_scale` given, else
the mapping the file stores (`lagda_mapping_*` attributes), else one inferred from the tracks.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from lagda.io.clean import clean_fixes
from lagda.io.physical import Mapping, infer_mapping, unwrap_longitudes
from lagda.io.readers.cf_dataset import file_dt
from lagda.io.readers.reader import check_units
from lagda.io.readers.registry import read_file
from lagda.io.sources import SeveralFiles, merge_raw, source_name, track_files
from lagda.io.tracks import RawTracks, Tracks, pack_tracks


def read_tracks(path, box=None, time_scale: float | None = None, *, keep_undrogued: bool = False,
                low_pass: bool = False) -> Tracks:
    """Returns the tracks of a file (or of several: `read_raw`) in model units, detecting its format and layout.

    Formats (lagda.io.readers): CF trajectory netCDF (incomplete multidimensional, orthogonal or
    contiguous ragged, e.g. clouddrift's), a lagda dataset, Parcels output (v4 Parquet, v3 zarr)
    and CSV. Physical tracks (lon/lat or x/y metres, CF times) are mapped onto the torus
    (lagda.io.physical): through `box` and `time_scale` when given, else the file's stored
    mapping, else an inferred one; `Tracks.mapping` and `Tracks.notes` say which. Track files
    (not lagda datasets) are quality-controlled first (lagda.io.clean.clean_fixes: duplicates,
    order, spikes and fixes off their track, undrogued fixes); `Tracks.clean` holds its report and
    `Tracks.notes` its lines.

    Parameters
    ----------
    path : str or os.PathLike, or a list of them
        The track file (a directory for zarr), a folder of track files, or several paths (`read_raw`).
    box : tuple of float, optional
        `(west, east, south, north)` in degrees (metres for projected x/y).
    time_scale : float, optional
        Seconds per model time unit.
    keep_undrogued : bool, default False
        Keep the fixes a GDP `drogue_status` marks undrogued (dropped by default).
    low_pass : bool, default False
        For longitude/latitude fixes with dates: average each drifter segment's positions over its local inertial
        period and two M2 tidal periods once cleaned (lagda.io.fixes.Fixes.low_passed; a note says so).

    Returns
    -------
    Tracks
        Positions `(trajectory, obs, 2)` in domain lengths and times `(trajectory, obs)` in model time units
        (NaN-padded), with `mapping` (None for model-unit files), `notes` and `clean`.

    Raises
    ------
    FileNotFoundError
        If a path does not exist.
    ValueError
        One line, if a file is none of these formats or is inconsistent.

    Examples
    --------
    The shipped GDP-like file (a clouddrift ragged array in lon/lat, hourly fixes):

    >>> from lagda.examples import shipped
    >>> tracks = read_tracks(shipped("gdp_like.nc"))
    >>> tracks.n_trajectory, tracks.mapping.coordinates, tracks.positions.shape[-1]
    (8, 'lonlat', 2)
    """
    raw = read_raw(path)
    path = source_name(path)
    if isinstance(raw, Tracks):  # a lagda dataset
        if box is not None or time_scale is not None:
            raise ValueError(f"{path}: --box and --time-scale apply to physical tracks; this lagda dataset is in model "
                             "units")
        return raw
    return to_tracks(raw, path, box, time_scale, keep_undrogued=keep_undrogued, low_pass=low_pass)


def read_raw(source) -> RawTracks | Tracks:
    """Returns the fixes of one track file or several as read (`RawTracks`, not cleaned), or the `Tracks` of a lagda
    dataset; the format of each file is detected from its content (`read_tracks`' formats).

    `source` is a path (a file, or a Zarr store), a folder of track files, or a list of such paths
    (lagda.io.sources.track_files). The fixes of several files are one `RawTracks` (lagda.io.sources.SeveralFiles,
    `merge_raw`): a drifter id found in more than one file is one drifter (a file per drifter and year, say); its
    notes say so.

    Raises
    ------
    FileNotFoundError
        if a path does not exist.
    ValueError
        one line, if a file is none of the formats, or several files hold a lagda dataset or tracks in model units.
    """
    files = track_files(source)
    if len(files) == 1:
        return read_file(files[0])
    several = SeveralFiles(files)
    raws = [several.read(path) for path in files]
    for line in several.warnings():
        warnings.warn(line, stacklevel=2)
    return merge_raw(raws, several.notes())


def to_tracks(raw: RawTracks, path, box=None, time_scale: float | None = None, *,
              keep_undrogued: bool = False, low_pass: bool = False) -> Tracks:
    """Returns `Tracks` in model units of `raw`, cleaned (lagda.io.clean) and mapping physical tracks.

    Every file goes through `clean_fixes` (so duplicated or unsorted times never refuse it); in model
    units its rules that need metres (averaging close duplicates, spikes) do not apply: conflicting
    duplicates are dropped. `Tracks.clean` is the report, its notes end `Tracks.notes`, and the GDP errors
    become `Tracks.position_std_m` and `Tracks.velocity_std_m_s`. With `low_pass`, longitude/latitude fixes with
    dates are then low-passed (`read_tracks`).

    Raises
    ------
    ValueError
        for model positions with CF times or the reverse, a box or time scale given for
        tracks in model units, or a stored mapping that is inconsistent.
    """
    check_units(raw, path)
    if raw.coordinates == "model" and (box is not None or time_scale is not None):
        raise ValueError(f"{path}: --box and --time-scale apply to physical tracks; this file is in model units")
    raw, report = clean_fixes(raw, keep_undrogued=keep_undrogued)
    per_fix = {name: raw.per_fix[name] for name in ("position_std_m", "velocity_std_m_s") if name in raw.per_fix}
    if raw.coordinates == "model":
        field = np.arange(len(raw.ids)) if raw.field is None else raw.field
        return pack_tracks(raw.times, raw.positions, raw.ids, field, raw.release, dt=file_dt(raw.attrs),
                           notes=raw.notes + report.notes(), clean=report, per_fix=per_fix, **raw.truth)
    positions = [np.asarray(p, np.float64).reshape(-1, 2).copy() for p in raw.positions]
    lowpass_notes = ()
    if low_pass and raw.coordinates == "lonlat" and raw.physical_time:
        positions, lowpass_notes = _low_passed(raw.times, positions)
    try:
        stored = Mapping.from_attrs(raw.attrs)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if stored is not None and stored.coordinates != raw.coordinates:
        stored = None
    if raw.coordinates == "lonlat":
        reference = None
        if box is not None:
            reference = 0.5 * (box[0] + box[1])
        elif stored is not None:
            reference = stored.centre[0]
        for p, lon in zip(positions, unwrap_longitudes([p[:, 0] for p in positions], reference)):
            p[:, 0] = lon
    notes, truth = [], dict(raw.truth)
    if stored is not None:
        notes.append("mapping from the file's lagda_mapping_* attributes"
                     + (", with the --box / --time-scale given" if box is not None or time_scale is not None else ""))
        same = ((box is None or np.allclose(box, stored.box))
                and (time_scale is None or np.isclose(time_scale, stored.time_scale_s)))
        if truth.get("true_coef") is not None and not same:
            truth.pop("true_coef")
            notes.append("the file's true coefficients belong to its own mapping: not used with another --box / "
                         "--time-scale")
    try:
        mapping = infer_mapping(
            positions, raw.times, raw.coordinates,
            box=box if box is not None else (stored.box if stored else None),
            time_scale_s=time_scale if time_scale is not None else (stored.time_scale_s if stored else None),
            time_origin=stored.time_origin if stored else None)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    mapping = dataclasses.replace(mapping, notes=tuple(notes) + mapping.notes)
    model_pos = [np.stack(mapping.to_model(p[:, 0], p[:, 1]), axis=-1) for p in positions]
    if box is not None:
        _warn_outside(model_pos, path)
    model_t = [mapping.time_to_model(t) for t in raw.times]
    field = np.zeros(len(raw.ids), np.int64) if raw.field is None else raw.field
    return pack_tracks(model_t, model_pos, raw.ids, field, raw.release, mapping=mapping,
                       notes=raw.notes + mapping.notes + report.notes() + lowpass_notes, dt=file_dt(raw.attrs),
                       clean=report, per_fix=per_fix, **truth)


def _low_passed(times: list, positions: list) -> tuple[list, tuple[str, ...]]:
    """Returns the positions `[(n, 2)]` lon/lat of each trajectory at `times` `[(n,)]` seconds, each drifter segment
    low-passed as a map's are (lagda.io.fixes.Fixes.low_passed), and its note."""
    from lagda.io.fixes import Fixes

    sizes = [len(t) for t in times]
    if not sum(sizes):
        return positions, ()
    flat = np.concatenate(positions)
    fixes = Fixes(np.repeat(np.arange(len(sizes)), sizes), np.concatenate(times), flat[:, 0], flat[:, 1],
                  np.arange(len(sizes))).low_passed()
    smooth = np.split(np.stack([fixes.lon, fixes.lat], -1), np.cumsum(sizes)[:-1])
    return smooth, fixes.notes


def _warn_outside(model_pos: list, path) -> None:
    """Warns when fixes lie outside the box given: the periodic model would wrap them in."""
    xy = np.concatenate(model_pos) if model_pos else np.zeros((0, 2))
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    outside = int(np.sum(np.any((xy < 0) | (xy > 1), axis=1)))
    if outside:
        warnings.warn(f"{path}: {outside} of {len(xy)} fixes ({100 * outside / len(xy):.0f}%) lie outside --box; the "
                      "periodic model wraps them in across the opposite edge: widen --box, or leave it out to fit "
                      "the tracks", stacklevel=3)

