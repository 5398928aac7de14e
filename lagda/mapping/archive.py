"""The fixes of a drifter archive inside a region and period, read lazily chunk by chunk.

An archive is a contiguous ragged array (clouddrift's and the GDP's layout: a per-trajectory count such as
`rowsize` over the trajectory dimension, `lon`, `lat`, `time` over the observation dimension) in netCDF or Zarr.
Only slices of `chunk_fixes` observations are in memory at a time: what is kept is the fixes of the region (widened
by a margin) and period, so memory follows the region and period, not the archive. Given a period, a slice's
positions are read only from its first to its last fix in it, and the drifters whose stated life (`start_date` or
`deploy_date`, and `end_date`) misses it are not read (`_Ragged.chunks`), so a year of a decades-long archive reads
about that year. Any other longitude/latitude track file lagda reads (lagda.io.formats: CSV, Parquet, other
netCDF layouts) is read whole and laid out as a ragged array in memory; several files or a folder of them (a file
per drifter, as the GDP's hourly files come) are read a group of whole files at a time (`_Archive`), given a period
only the files whose drifters' stated lives meet it (`_file_life`). GDP
variables are used when present: `drogue_status` is carried per fix, and `clean` applies lagda's cleaning rules
(lagda.io.clean: duplicates, order, spikes, undrogued fixes) to the selection.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings

import numpy as np

from lagda.io.fixes import Fixes, unsegmented_text
from lagda.mapping.tiles import region_width

CHUNK_FIXES = 2_000_000  # observations read at a time
LIFE_SLACK_S = 86400.0  # a drifter's stated life (start_date..end_date) is widened by this before it is trusted
_LON_NAMES, _LAT_NAMES = ("lon", "longitude"), ("lat", "latitude")  # an archive's position variables
# the cleaning counts (CleanReport fields) of fixes left out of the archive's extent, and how a note names them
_EXTENT_RULES = {"impossible_positions_dropped": "at no place on the sphere (fill values)",
                 "spikes_dropped": "position spikes", "off_track_dropped": "off their track",
                 "undrogued_dropped": "undrogued",
                 "exact_duplicates_dropped": "exact duplicates", "conflict_fixes_dropped": "conflicting duplicates",
                 "lone_fixes_dropped": "lone fixes at a track's end (a wrong time)",
                 "short_trajectory_fixes_dropped": "on trajectories of fewer than 3 fixes"}


class LivesDisagree(ValueError):
    """An archive's per-drifter dates (start_date, end_date) disagree with the times of its fixes."""


class _Archive:
    """A map's archive, read a piece at a time (`pieces`): one ragged netCDF file or Zarr store (opened lazily),
    one other track file (read whole), or several files (read a group of whole files of about `group_fixes` fixes
    at a time, so that memory follows the group and the selection, not the files). Each piece is a `_Ragged` with
    the numbers of its trajectories in the whole archive: a drifter id named in several files is one drifter.
    After the pieces, `ids()`, `n_total` and `notes` (what reading said, one line each) hold for the whole."""

    def __init__(self, source):
        from lagda.io.sources import source_name, track_files

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

        Raises:
            LivesDisagree: the archive's drifter lives disagree with its fixes (read again with `use_lives` off).
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

        Raises:
            LivesDisagree: a file read has a fix outside the lives its drifters state.
        """
        from lagda.io.cf_time import calendar_note
        from lagda.io.locations import is_url
        from lagda.io.readers.cf_dataset import assumed_ragged
        from lagda.io.sources import SeveralFiles, merge_raw
        from lagda.io.tracks import id_text

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

    from lagda.io.locations import is_url, open_zarr_url

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

    Raises:
        ValueError: not a track file, or not in longitude/latitude with CF times (lagda assimilate maps those).
    """
    from lagda.io.formats import read_raw

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

    Raises:
        ValueError: a lagda dataset, or fixes not in longitude/latitude with CF times (lagda assimilate maps those).
    """
    import xarray as xr

    from lagda.io.tracks import RawTracks

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

        Raises:
            LivesDisagree: a fix read lies outside its trajectory's life (so the lives cannot be trusted).
        """
        from lagda.io.cf_time import without_fills

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
        from lagda.io.cf_time import cf_seconds

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
    from lagda.io.cf_time import cf_seconds

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
    from lagda.io.locations import is_url

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


def _in_region(lon, lat, region, margin_deg: float = 0.0) -> np.ndarray:
    """Returns where finite fixes lie in `region` (west, east, south, north degrees) widened by `margin_deg`."""
    west, south, north = float(region[0]), float(region[2]), float(region[3])
    east_of_west = (lon - west + margin_deg) % 360.0
    return ((east_of_west <= region_width(region) + 2 * margin_deg) & (lat >= south - margin_deg)
            & (lat <= north + margin_deg) & np.isfinite(lon) & np.isfinite(lat))


def _read_with_lives(path, scan) -> tuple:
    """Returns (scan(source), source, notes) for `source` the `_Archive` of `path`: read again with every fix when
    the archive's drifter lives disagree with its fixes (`LivesDisagree`), which `notes` then says."""
    source = _Archive(path)
    try:
        return scan(source), source, ()
    except LivesDisagree as error:
        source = _Archive(path)
        source.use_lives = False
        return scan(source), source, (f"the archive's drifter lives were not used: {error}",)


def select_fixes(path, region, period, margin_deg: float = 0.0, margin_s: float = 0.0,
                 chunk_fixes: int = CHUNK_FIXES, progress: bool = False) -> Fixes:
    """Returns the fixes of archive `path` in `region` widened by `margin_deg` and `period` widened by `margin_s`.

    Of a ragged archive only what may lie in the period is read (`_Ragged.chunks`: the drifters' stated lives,
    then each slice's span of the period), of several files only those whose drifters' stated lives meet it
    (`_file_life`); the fixes' notes say how many fixes or files were read, and whether the lives were set aside
    because a drifter's fixes fall outside its stated life (every fix read then).

    Args:
        path: the archive: a ragged netCDF file or Zarr store, any lon/lat track file, several, or a folder of
            them (lagda.io.sources.track_files); region: (west, east, south, north) degrees (east < west crosses
            the dateline); period: (start, end) seconds since 1970-01-01T00:00:00Z. progress: a bar on stderr.
    Raises:
        FileNotFoundError: missing archive. ValueError: not a ragged archive, or no fix in the region and period.
    """
    widened = (period[0] - margin_s, period[1] + margin_s)

    def select(source):
        parts = []
        for piece, numbers, sl, lon, lat, seconds in source.chunks(chunk_fixes, "selecting fixes", progress, widened):
            keep = _in_region(lon, lat, region, margin_deg) & (seconds >= widened[0]) & (seconds <= widened[1])
            parts.append(piece.fixes(sl, lon, lat, seconds, keep, numbers))
        return parts

    parts, source, distrust = _read_with_lives(path, select)
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

    Raises:
        FileNotFoundError: missing archive. ValueError: not a ragged archive, or no fix to take an extent from.

    Example:
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

    (occupied, lat_range, time_range, kept, poleward, dropped), source, _ = _read_with_lives(path, scan)
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
