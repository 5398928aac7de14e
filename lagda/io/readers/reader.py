"""What every track file reader shares: its interface (`Reader`), the head of a file it recognises a format by
(`FileHead`), the one-line refusal of a file no reader reads (`NOT_TRACKS`), the check that positions and times are
in the same units (`check_units`) and the grouping of a table's rows into trajectories (`group_rows`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import numpy as np

from lagda.io.locations import is_url
from lagda.io.tracks import RawTracks, Tracks

NOT_TRACKS = (
    "is not a track file: expected a CF trajectory file (featureType = \"trajectory\", or a clouddrift ragged "
    "array), a lagda dataset, Parcels output (Parquet or zarr), a CSV with header id,time,x,y or id,time,lon,lat, "
    "or a GDP 6-hourly text file (buoydata_*.dat)"
)
HEAD_BYTES = 4096  # how much of a file its format is recognised by


@dataclasses.dataclass(frozen=True)
class FileHead:
    """The start of a track file, as the readers recognise its format by it (`FileHead.of`).

    Attributes
    ----------
    path : str
        The file: a local path, a folder or a URL.
    store : bool
        Whether `path` is a folder or a URL (a Zarr store, read by the store's reader; nothing is read of it here).
    stored : bytes
        The first `HEAD_BYTES` bytes of the file as stored (empty for a store).
    compression : str or None
        "gzip" for a gzip-compressed file (as AOML serves the GDP's 6-hourly files), else None.
    text : bytes
        The first `HEAD_BYTES` bytes of its content: `stored`, decompressed when `compression` says so.
    """

    path: str
    store: bool
    stored: bytes = b""
    compression: str | None = None
    text: bytes = b""

    @classmethod
    def of(cls, path: str) -> FileHead:
        """Returns the head of the file at `path` (no byte read of a folder or a URL).

        Raises
        ------
        OSError
            If the file cannot be opened or a gzip file cannot be decompressed.
        """
        if os.path.isdir(path) or is_url(path):
            return cls(path, True)
        with open(path, "rb") as handle:
            stored = handle.read(HEAD_BYTES)
        compression = "gzip" if stored.startswith(b"\x1f\x8b") else None
        text = stored
        if compression:
            import gzip

            with gzip.open(path, "rb") as handle:
                text = handle.read(HEAD_BYTES)
        return cls(path, False, stored, compression, text)


@dataclasses.dataclass(frozen=True)
class Reader:
    """One format lagda reads: how a file is recognised, and how it is read.

    A format is one module that defines its `Reader`, and one line in `lagda.io.readers.registry.READERS`, the
    ordered list the dispatch (`lagda.io.readers.registry.read_file`) walks: the first reader whose `recognises`
    holds reads the file.

    Attributes
    ----------
    name : str
        The format, as a person names it ("CSV", "netCDF").
    suffixes : tuple of str
        What the format's file names end in, lower case (".csv", ".csv.gz"): the files of a folder that are read
        (`lagda.io.sources.track_files`). The file's content, not its name, says which reader reads it.
    recognises : callable
        `recognises(head: FileHead) -> bool`: whether the file is of this format.
    read : callable
        `read(head: FileHead) -> RawTracks | Tracks`: its fixes as read (`RawTracks`), or the `Tracks` of a lagda
        dataset; raises ValueError, one line naming the file, for a file it cannot read.
    """

    name: str
    suffixes: tuple[str, ...]
    recognises: Callable[[FileHead], bool]
    read: Callable[[FileHead], RawTracks | Tracks]


def check_units(raw, path) -> None:
    """Refuses `RawTracks` whose positions and times are not both physical or both model units.

    Raises
    ------
    ValueError
        one line saying which is which.
    """
    if raw.coordinates == "model" and raw.physical_time:
        raise ValueError(f"{path}: positions are in model units (units \"1\") but times are CF datetimes; "
                         "give physical positions (lon/lat, or x/y in metres) or model times")
    if raw.coordinates != "model" and not raw.physical_time:
        raise ValueError(f"{path}: positions are {'lon/lat' if raw.coordinates == 'lonlat' else 'in metres'} but time "
                         "has no CF units (\"seconds since ...\", or ISO datetimes in CSV)")


def group_rows(ids, times, a, b, fields=None, per_row: dict | None = None):
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
