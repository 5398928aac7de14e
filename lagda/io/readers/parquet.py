"""The reader of Parquet track files, as Parcels v4 writes its output (`PARQUET`): one row per particle and
observation, columns `particle_id` (or `trajectory`, `id`), `t` (or `time`; CF units in the column's metadata, or
datetimes), `x` (or `lon`) = longitude, `y` (or `lat`) = latitude; metres on a flat mesh (the file's
`parcels_grid_mesh` metadata)."""

from __future__ import annotations

from lagda.io.cf_time import cf_seconds, seconds_since_1970
from lagda.io.readers.cf_variables import LON_UNITS
from lagda.io.readers.reader import FileHead, Reader, group_rows
from lagda.io.tracks import RawTracks


def read_parquet(head: FileHead) -> RawTracks:
    """Returns the tracks of a Parcels v4 particle file (Parquet, one row per particle and observation).

    Raises
    ------
    ValueError
        one line: pyarrow missing, an unreadable file, a column missing, or times without CF units.
    """
    path = head.path
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
    coordinates = "projected" if flat else ("lonlat" if meta(a_col).get("units", "degrees_east") in LON_UNITS
                                            else "model")
    t_meta = meta(t_col)
    t = table.column(t_col).to_numpy(zero_copy_only=False)
    if t.dtype.kind == "M":
        seconds, physical = seconds_since_1970(t), True
    elif " since " in t_meta.get("units", ""):
        seconds, physical = cf_seconds(t, t_meta["units"], t_meta.get("calendar"), path), True
    else:
        raise ValueError(f"{path}: column {t_col!r} has units {t_meta.get('units')!r}, not a CF time (\"seconds since "
                         "...\"): run Parcels on a fieldset with datetime times")
    ids, times, positions, field, _ = group_rows(table.column(id_col).to_numpy(zero_copy_only=False), seconds,
                                                table.column(a_col).to_numpy(zero_copy_only=False),
                                                table.column(b_col).to_numpy(zero_copy_only=False))
    return RawTracks(times, positions, ids, field, coordinates, physical, file_meta)


PARQUET = Reader("Parquet", (".parquet",), lambda head: head.stored.startswith(b"PAR1"), read_parquet)
"""Parquet files (Parcels v4 output), recognised by their first bytes."""
