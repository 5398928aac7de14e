"""A drifter archive read lazily, a chunk of fixes at a time: one ragged netCDF file or Zarr store, any other track
file, or several files.

An archive is a contiguous ragged array (clouddrift's and the GDP's layout: a per-trajectory count such as
`rowsize` over the trajectory dimension, `lon`, `lat`, `time` over the observation dimension) in netCDF or Zarr,
local or at a URL. Only slices of `chunk_fixes` observations are in memory at a time (`_Ragged.chunks`), so memory
follows what the caller keeps of each slice, not the archive. Given a period, a slice's positions are read only
from its first to its last fix in it, and the drifters whose stated life (`start_date` or `deploy_date`, and
`end_date`) misses it are not read, so a year of a decades-long archive reads about that year. Any other
longitude/latitude track file lagda reads (lagda.io.formats: CSV, Parquet, other netCDF layouts) is read whole and
laid out as a ragged array in memory; several files or a folder of them (a file per drifter, as the GDP's hourly
files come) are read a group of whole files at a time (`Archive`), given a period only the files whose drifters'
stated lives meet it (`_file_life`). A drifter's `drogue_status` is carried per fix when the archive has it.
`scan_archive` reads an archive again with every fix when its stated lives disagree with its fixes.
lagda.mapping.archive selects an archive's fixes by region and period.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from lagda.io.cf_time import calendar_note, cf_seconds, without_fills
from lagda.io.fixes import Fixes
from lagda.io.formats import read_raw
from lagda.io.locations import is_url, open_zarr_url
from lagda.io.readers.cf_dataset import assumed_ragged
from lagda.io.sources import SeveralFiles, merge_raw, source_name, track_files
from lagda.io.tracks import RawTracks, id_text

CHUNK_FIXES = 2_000_000  # observations read at a time
LIFE_SLACK_S = 86400.0  # a drifter's stated life (start_date..end_date) is widened by this before it is trusted
_LON_NAMES, _LAT_NAMES = ("lon", "longitude"), ("lat", "latitude")  # an archive's position variables


class LivesDisagree(ValueError):
    """An archive's per-drifter dates (start_date, end_date) disagree with the times of its fixes."""


class Archive:
    """A drifter archive, read a piece at a time (`pieces`): one ragged netCDF file or Zarr store (opened lazily),
    one other track file (read whole), or several files (read a group of whole files of about `group_fixes` fixes
    at a time, so that memory follows the group and the selection, not the files). Each piece is a `_Ragged` with
    the numbers of its trajectories in the whole archive: a drifter id named in several files is one drifter.
    After the pieces, `ids()`, `n_total` and `notes` (what reading said, one line each) hold for the whole."""

    def __init__(self, source):
        self.files = track_files(source)
        self.name = source_name(self.files)
        self.index, self.n_total, self.notes, self._ids = {}, 0, (), None
        self.use_lives, self.read_note = True, None

    def chunks(self, chunk_fixes: int, desc: str, progress: bool = False, period=None):
        """Yields (piece, numbers, slice, lon, lat, seconds): `pieces` read in slices of whole trajectories
        (`_Ragged.chunks`), with a progress bar `desc` on stderr (in files read, or fixes of one archive). With
        `period` (start, end) seconds, what lies outside it may be left unread (`_Ragged.chunks`; with `use_lives`,
        the drifters, or of several files the files, whose stated lives miss it); `read_note` then says what was
        read, when not every fix.

        Raises
        ------
        LivesDisagree
            the archive's drifter lives disagree with its fixes (read again with `use_lives` off).
        """
        from tqdm import tqdm

        several = len(self.files) > 1
        with tqdm(total=len(self.files) if several else None, unit="file" if several else "fix", desc=desc,
                  disable=not progress, leave=False, dynamic_ncols=True) as bar:
            for piece, numbers, n_files in self.pieces(chunk_fixes, period if self.use_lives else None):
                lives = piece.lives() if period is not None and self.use_lives and not several else None
                if not several:
                    bar.total = piece.n_total
                for sl, lon, lat, seconds in piece.chunks(chunk_fixes, True, period, lives and lives[:2]):
                    yield piece, numbers, sl, lon, lat, seconds
                    bar.update(0 if several else sl.stop - bar.n)
                bar.update(n_files if several else piece.n_total - bar.n)
                if period is not None and not several and piece.positions_read < piece.n_total:
                    self.read_note = (f"read the times of {piece.times_read} and the positions of "
                                      f"{piece.positions_read} of the {piece.n_total} fixes" +
                                      (f" (the drifters whose life, {lives[2]} widened by {LIFE_SLACK_S / 86400:g}"
                                       " day, meets the period)" if lives else "") +
                                      ": the positions from the first to the last fix in the period of each slice")
            bar.update(bar.total - bar.n if several else 0)  # the files passed over after the last one read

    def pieces(self, group_fixes: int = CHUNK_FIXES, period=None):
        """Yields (piece: `_Ragged`, traj: int64 `(piece trajectory,)` its trajectories' numbers in the archive,
        the number of files read or passed over for it). Of several files, given `period` (start, end) seconds,
        a file whose drifters' stated lives (`_file_life`) miss it is not read (`read_note` says how many were).

        Raises
        ------
        LivesDisagree
            a file read has a fix outside the lives its drifters state.
        """
        if len(self.files) == 1:
            path = self.files[0]
            ds = _lazy_ragged(path)
            if ds is None:
                stat = None if is_url(path) else os.stat(path)
                ds = _ragged_in_memory(path, stat and stat.st_mtime_ns, stat and stat.st_size)
            self.notes = tuple(ds.attrs.get("lagda_read_notes", ()))
            with ds:
                piece = _Ragged(ds, self.name)
                self.notes += tuple(f"assumed: {self.name}: {line}" for line in [calendar_note(piece.calendar)]
                                    if line)
                if "sample_dimension" not in ds[piece.count].attrs:  # a ragged file opened as it is, undeclared
                    self.notes += (assumed_ragged(self.name, "no CF sample_dimension attribute", piece.count,
                                                  ds[piece.count].dims[0], piece.obs_dim),)
                self._ids, self.n_total = np.asarray(piece.ids()), piece.n_total
                yield piece, np.arange(len(self._ids), dtype=np.int64), 1
            return
        several, batch, size, passed, stated = SeveralFiles(self.files), [], 0, 0, set()
        for k, path in enumerate(self.files):
            life = None if period is None else _file_life(path)
            if life is not None and (life[1] < period[0] or life[0] > period[1]):
                passed += 1
            else:
                batch.append(several.read(path))
                if life is not None:
                    _check_life(batch[-1], life, path)
                size += sum(np.size(t) for t in batch[-1].times)
            if life is not None:
                stated.add(life[2])
            if batch and (size >= group_fixes or k == len(self.files) - 1):
                piece = _Ragged(_ragged_dataset(merge_raw(batch), self.name, several=True), self.name)
                traj = np.array([self.index.setdefault(id_text(t), len(self.index)) for t in piece.ids()], np.int64)
                self.n_total += piece.n_total
                yield piece, traj, len(batch) + passed
                batch, size, passed = [], 0, 0
        self.notes = several.notes() + tuple(f"assumed: {line}" for line in several.warnings())
        skipped = len(self.files) - len(several.file_notes)
        if skipped:
            self.read_note = (f"read {len(several.file_notes)} of the {len(self.files)} files: the other {skipped} "
                              f"state lives of their drifters ({' or '.join(sorted(stated))}, widened by "
                              f"{LIFE_SLACK_S / 86400:g} day) that miss the period")

    def ids(self) -> np.ndarray:
        """Returns the archive's drifter ids `(trajectory,)` (after the pieces)."""
        return self._ids if self._ids is not None else np.array(list(self.index), dtype=object)


def _lazy_ragged(path: str):
    """Returns a ragged netCDF file or Zarr store (a local path or a URL) opened lazily, or None for a track file of
    another kind."""
    import xarray as xr

    ds = None
    if is_url(path):
        ds = open_zarr_url(path)
    elif os.path.isdir(path):
        try:
            ds = xr.open_zarr(path, decode_times=False, consolidated=None)
        except Exception:  # not a Zarr store: read_raw says why in one line
            return None
    else:
        with open(path, "rb") as handle:
            head = handle.read(8)
        if not head.startswith((b"CDF", b"\x89HDF")):
            return None
        try:
            ds = xr.open_dataset(path, decode_times=False)
        except Exception as error:
            raise ValueError(f"{path} cannot be read as netCDF ({type(error).__name__}: {error})") from None
    try:  # a count over obs, and positions over obs (a GDP per-drifter file has a rowsize, its positions 2-D)
        _, obs_dim = _ragged_names(ds, path)
        if all(ds[_variable(ds, names, path, "")].dims == (obs_dim,) for names in (_LON_NAMES, _LAT_NAMES)):
            return ds
    except ValueError:
        pass
    ds.close()
    return None


@functools.lru_cache(maxsize=1)  # the extent's pass and the selection read one file once
def _ragged_in_memory(path: str, mtime_ns: int, size: int):
    """Returns a track file that is not a ragged archive (lagda.io.formats.read_raw) as an in-memory ragged Dataset
    (`_ragged_dataset`); its attribute `lagda_read_notes` holds what reading said, its warnings as notes.

    Raises
    ------
    ValueError
        not a track file, or not in longitude/latitude with CF times (lagda assimilate maps those).
    """
    with warnings.catch_warnings(record=True) as caught:  # a reader's assumption becomes a note of the map
        warnings.simplefilter("always")
        raw = read_raw(path)
    ds = _ragged_dataset(raw, path)
    if not ds.sizes["obs"]:
        raise ValueError(f"{path}: no drifter fixes")
    ds.attrs["lagda_read_notes"] = [*raw.notes, *(f"assumed: {w.message}" for w in caught)]
    return ds


def _ragged_dataset(raw, name: str, several: bool = False):
    """Returns the `RawTracks` of a track file (or of several) as an in-memory ragged Dataset of its
    longitude/latitude fixes (`rowsize`, `id`, `lon`, `lat`, `time`), with `drogue_status` when it has it.

    Raises
    ------
    ValueError
        a lagda dataset, or fixes not in longitude/latitude with CF times (lagda assimilate maps those).
    """
    import xarray as xr

    if not isinstance(raw, RawTracks) or raw.coordinates != "lonlat" or not raw.physical_time:
        kind = ("a lagda dataset in model units" if not isinstance(raw, RawTracks) else
                f"{raw.coordinates} positions" + ("" if raw.physical_time else " at model times"))
        holds = "these files hold" if several else "this file holds"
        raise ValueError(f"{name}: lagda map maps longitude/latitude fixes at dated times; {holds} {kind} "
                         "(lagda assimilate reads it)")
    # a padded (trajectory, obs) file's empty slots (no time, no position) are not fixes: left out, not counted
    slots = [np.isfinite(t) | np.any(np.isfinite(p), axis=-1) for t, p in zip(raw.times, raw.positions)]
    positions = np.concatenate([p[k] for p, k in zip(raw.positions, slots)]) if raw.times else np.zeros((0, 2))
    variables = {"rowsize": ("traj", np.array([k.sum() for k in slots], np.int64), {"sample_dimension": "obs"}),
                 "id": ("traj", raw.ids),
                 "lon": ("obs", positions[:, 0]), "lat": ("obs", positions[:, 1]),
                 "time": ("obs", np.concatenate([t[k] for t, k in zip(raw.times, slots)]) if raw.times else np.zeros(0),
                          {"units": "seconds since 1970-01-01T00:00:00Z"})}
    if "drogue_status" in raw.per_fix:
        variables["drogue_status"] = ("obs", np.concatenate([d[k] for d, k in zip(raw.per_fix["drogue_status"],
                                                                                   slots)]))
    return xr.Dataset(variables)


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


class _Ragged:
    """An open ragged archive: its variable names, trajectory ends and CF time units; `chunks` reads it in slices."""

    def __init__(self, ds, path):
        self.ds, self.path = ds, path
        self.count, self.obs_dim = _ragged_names(ds, path)
        self.lon = _variable(ds, _LON_NAMES, path, "longitude")
        self.lat = _variable(ds, _LAT_NAMES, path, "latitude")
        self.time = _variable(ds, ("time",), path, "time")
        for name in (self.lon, self.lat, self.time):
            if ds[name].dims != (self.obs_dim,):
                raise ValueError(f"{path}: {name} has dims {ds[name].dims}, expected ({self.obs_dim!r},)")
        self.ends = np.cumsum(ds[self.count].values.astype(np.int64))
        self.times_read = self.positions_read = 0  # observations read, for a note
        self.n_total = int(self.ends[-1]) if len(self.ends) else 0
        self.drogue = ("drogue_status" if "drogue_status" in ds.variables
                       and ds["drogue_status"].dims == (self.obs_dim,) else None)
        self.units, self.calendar = ds[self.time].attrs.get("units", ""), ds[self.time].attrs.get("calendar")
        if " since " not in str(self.units):
            has = f"has units {self.units!r}" if self.units else "has no CF units"
            raise ValueError(f"{path}: time {has}; lagda map needs CF times (\"seconds since ...\")")

    def ids(self) -> np.ndarray:
        ds = self.ds
        return ds["id"].values if "id" in ds.variables and ds["id"].dims == ds[self.count].dims else np.arange(
            ds.sizes[ds[self.count].dims[0]])

    def chunks(self, chunk_fixes: int, whole_trajectories: bool = False, period=None, lives=None):
        """Yields (slice, lon, lat, seconds since 1970) float64 of `chunk_fixes` observations at a time; with
        `whole_trajectories`, each slice ends at a trajectory's end (a trajectory longer than `chunk_fixes` is one
        slice), so that rules over a whole track (the spike rule) can run slice by slice.

        With `period` (start, end) seconds, a slice is narrowed to the span from its first to its last fix in the
        period (its times are read first; its positions only over that span) and left out when it has none; with
        `lives` as well (`lives()`), the trajectories whose life misses the period are not read at all. Fixes
        outside the period may still be yielded (the caller selects); none inside it is left out.

        Raises
        ------
        LivesDisagree
            a fix read lies outside its trajectory's life (so the lives cannot be trusted).
        """
        start = 0
        while start < self.n_total:
            stop = min(start + chunk_fixes, self.n_total)
            if whole_trajectories:  # the last trajectory end at or before stop, else the end of start's trajectory
                ended = np.searchsorted(self.ends, stop, side="right")
                below = int(self.ends[ended - 1]) if ended else 0
                stop = below if below > start else int(self.ends[np.searchsorted(self.ends, start, side="right")])
            sl, seconds = (slice(start, stop), None) if period is None else self._in_period(start, stop, period,
                                                                                            lives)
            start = stop
            if sl is None:
                continue
            if seconds is None:
                seconds = self._seconds(sl)
            self.positions_read += sl.stop - sl.start
            yield (sl, without_fills(self.ds[self.lon][sl].values), without_fills(self.ds[self.lat][sl].values),
                   seconds)

    def _seconds(self, sl: slice) -> np.ndarray:
        self.times_read += sl.stop - sl.start
        return cf_seconds(self.ds[self.time][sl].values, self.units, self.calendar, self.path, warn=False)

    def _in_period(self, start: int, stop: int, period, lives) -> tuple[slice | None, np.ndarray | None]:
        """Returns (the span of observations start..stop that holds every fix in `period`, their seconds), or
        (None, None) when none is in it; the trajectories whose `lives` miss the period are not read."""
        if lives is not None:
            first, last = np.searchsorted(self.ends, [start, stop - 1], side="right")
            meet = np.flatnonzero((lives[1][first:last + 1] >= period[0]) & (lives[0][first:last + 1] <= period[1]))
            if not len(meet):
                return None, None
            lo, hi = first + meet[0], first + meet[-1]
            start, stop = max(start, int(self.ends[lo - 1]) if lo else 0), min(stop, int(self.ends[hi]))
        seconds = self._seconds(slice(start, stop))
        if lives is not None:
            traj = np.searchsorted(self.ends, np.arange(start, stop), side="right")
            outside = (seconds < lives[0][traj]) | (seconds > lives[1][traj])
            if np.any(outside):
                k = int(np.argmax(outside))
                raise LivesDisagree(f"drifter {self.ids()[traj[k]]} has a fix at "
                                    f"{np.datetime64(int(seconds[k]), 's')} outside its life")
        inside = np.flatnonzero((seconds >= period[0]) & (seconds <= period[1]))
        if not len(inside):
            return None, None
        return slice(start + int(inside[0]), start + int(inside[-1]) + 1), seconds[inside[0]:inside[-1] + 1]

    def lives(self) -> tuple[np.ndarray, np.ndarray, str] | None:
        """Returns the lives of the archive's trajectories as it states them (`_stated_lives`), or None."""
        return _stated_lives(self.ds.variables, self.path, self.ds[self.count].dims)

    def fixes(self, sl: slice, lon, lat, seconds, keep, numbers) -> Fixes:
        """Returns the `Fixes` (no ids) of the slice `sl` of the archive where bool `keep` holds (lon, lat, seconds:
        the slice's, as `chunks` yields them), in the archive's order: each trajectory's fixes together, as a
        contiguous ragged array holds them (`clean` sorts each one's times and says how many it sorted; the numbers
        may decrease from one trajectory to the next, which `select_fixes` puts in order), each trajectory numbered
        by `numbers` `(trajectory,)` (its number in an archive of several pieces)."""
        index = np.flatnonzero(keep) + sl.start
        traj = numbers[np.searchsorted(self.ends, index, side="right")]
        drogue = None if self.drogue is None else np.asarray(self.ds[self.drogue][sl].values)[keep]
        return Fixes(traj, seconds[keep], lon[keep], lat[keep], None, drogue)


def _stated_lives(variables, path, along=None) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Returns (first, last) float64 `(trajectory,)` seconds since 1970 of each trajectory's life as `variables`
    (name -> xarray Variable) state it (the GDP's and clouddrift's per-drifter `start_date`, else `deploy_date`, and
    `end_date`, over the dimensions `along`, or any of at most one dimension when None; widened by LIFE_SLACK_S; a
    date missing or not stated: -inf or +inf) and the variables' names, or None when it states neither end."""
    def stated(name):
        var = variables.get(name)
        return (var is not None and (var.dims == along if along is not None else var.ndim <= 1)
                and " since " in str(var.attrs.get("units", "")))

    names = [next((n for n in names if stated(n)), None) for names in (("start_date", "deploy_date"), ("end_date",))]
    if names == [None, None]:
        return None
    size = next(variables[n].size for n in names if n)
    try:
        first, last = (np.full(size, np.nan) if n is None else
                       cf_seconds(np.ravel(variables[n].values), variables[n].attrs["units"],
                                  variables[n].attrs.get("calendar"), path, warn=False)
                       for n in names)
    except ValueError:
        return None
    return (np.where(np.isnan(first), -np.inf, first - LIFE_SLACK_S),
            np.where(np.isnan(last), np.inf, last + LIFE_SLACK_S), " and ".join(n for n in names if n))


def _file_life(path: str) -> tuple[float, float, str] | None:
    """Returns (first, last) seconds since 1970 of the span of the lives a local netCDF file or Zarr store states
    for its drifters (`_stated_lives`, widened by LIFE_SLACK_S) and the variables' names, or None when it states
    none or is another kind of file (read whole then)."""
    if is_url(path):
        return None
    stat = os.stat(path)
    return _dates_read(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)  # a map's extent pass and its selection read a file's dates once
def _dates_read(path: str, mtime_ns: int, size: int) -> tuple[float, float, str] | None:
    """`_file_life` of the file as it is (`mtime_ns`, `size`): only its dates are read. A folder may hold thousands
    of files: a netCDF-4 file is read through h5py, which opens one in a tenth of the time netCDF4 takes (that
    reads every variable's header), a netCDF-3 file through netCDF4."""
    import xarray as xr

    names = ("start_date", "deploy_date", "end_date")
    try:
        if os.path.isdir(path):
            with xr.open_zarr(path, decode_times=False, consolidated=None) as ds:
                variables = {n: ds.variables[n].load() for n in names if n in ds.variables}
        else:
            with open(path, "rb") as handle:
                head = handle.read(8)
            if head.startswith(b"\x89HDF"):
                variables = _hdf5_dates(path, names)
            elif head.startswith(b"CDF"):
                import netCDF4

                with netCDF4.Dataset(path) as nc:
                    variables = {n: xr.Variable(v.dimensions, np.ma.filled(np.ma.asarray(v[:], np.float64), np.nan),
                                                {a: v.getncattr(a) for a in v.ncattrs()})
                                 for n, v in nc.variables.items() if n in names}
            else:
                return None
    except Exception:  # read whole, where the reader says what is wrong with it
        return None
    lives = _stated_lives(variables, path)
    if lives is None or not lives[0].size:
        return None
    return float(np.min(lives[0])), float(np.max(lives[1])), lives[2]


def _hdf5_dates(path: str, names) -> dict:
    """Returns the variables `names` of a netCDF-4 file's root group that are numbers as xarray Variables
    (float64, their `_FillValue` and `missing_value` NaN, `scale_factor` and `add_offset` applied; the dimensions
    named by position only)."""
    import h5py
    import xarray as xr

    text = lambda value: value.decode() if isinstance(value, bytes) else value
    variables = {}
    with h5py.File(path, "r") as h5:
        for name in names:
            var = h5.get(name)
            if not isinstance(var, h5py.Dataset) or var.dtype.kind not in "iuf":
                continue
            attrs = {key: text(var.attrs[key]) for key in ("units", "calendar", "_FillValue", "missing_value",
                                                           "scale_factor", "add_offset") if key in var.attrs}
            values = var[()].astype(np.float64)
            for key in ("_FillValue", "missing_value"):
                if key in attrs:
                    values[np.isin(values, np.asarray(attrs[key], np.float64))] = np.nan
            values = values * float(np.ravel(attrs.get("scale_factor", 1.0))[0]) + float(
                np.ravel(attrs.get("add_offset", 0.0))[0])
            variables[name] = xr.Variable(tuple(f"dim_{k}" for k in range(values.ndim)), values, attrs)
    return variables


def _check_life(raw, life, path) -> None:
    """Raises LivesDisagree when a fix of file `path`'s `RawTracks` lies outside the span `life` (`_file_life`)."""
    times = np.concatenate([np.ravel(t) for t in raw.times]) if raw.times else np.zeros(0)
    outside = (times < life[0]) | (times > life[1])
    if np.any(outside):
        k = int(np.argmax(outside))
        raise LivesDisagree(f"{path} has a fix at {np.datetime64(int(times[k]), 's')} outside the lives its "
                            f"drifters state ({life[2]})")


def scan_archive(path, scan) -> tuple:
    """Returns what `scan` makes of an archive, read again with every fix when its stated lives are wrong.

    Parameters
    ----------
    path : str, os.PathLike or list of them
        The archive (lagda.io.sources.track_files: a ragged netCDF file or Zarr store, any track file, several, or
        a folder of them).
    scan : callable
        `scan(archive: Archive)`, which reads the archive (`Archive.chunks`) and returns what it found.

    Returns
    -------
    tuple
        `(scan(archive), archive, notes)`: `notes` is empty, or one line saying the archive's drifter lives were not
        used because a fix lies outside its drifter's stated life (`LivesDisagree`): `scan` then ran again on the
        archive read with every fix (`Archive.use_lives` off).
    """
    source = Archive(path)
    try:
        return scan(source), source, ()
    except LivesDisagree as error:
        source = Archive(path)
        source.use_lives = False
        return scan(source), source, (f"the archive's drifter lives were not used: {error}",)
