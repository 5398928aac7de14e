"""The reader of the GDP's 6-hourly interpolated text files (`GDP_TEXT`: `buoydata_*.dat`, gzip-compressed too as
AOML serves them, `.dat.gz`): no header, each line
`ID MM DD.ddd YYYY LAT LON SST VE VN SPD VAR.LAT VAR.LON VAR.TEMP`."""

from __future__ import annotations

import numpy as np

from lagda.io.cf_time import seconds_since_1970
from lagda.io.readers.reader import FileHead, Reader, group_rows
from lagda.io.tracks import RawTracks

BUOYDATA_MISSING = 999.0  # the GDP 6-hourly text files' missing values are 999.99 and 999.999


def is_buoydata(head: bytes) -> bool:
    """Returns whether a file starts as the GDP's 6-hourly interpolated text files (`buoydata_*.dat`) do: no
    header, each line `ID MM DD.ddd YYYY LAT LON SST VE VN SPD VAR.LAT VAR.LON VAR.TEMP`."""
    try:
        fields = head.decode("ascii").splitlines()[0].split()
        month, day, year = int(fields[1]), float(fields[2]), int(fields[3])
        int(fields[0]), float(fields[4]), float(fields[5])
    except (UnicodeDecodeError, IndexError, ValueError):
        return False
    return len(fields) >= 10 and 1 <= month <= 12 and 1 <= day < 32 and 1900 <= year <= 2200


def read_buoydata(head: FileHead) -> RawTracks:
    """Returns the tracks of a GDP 6-hourly interpolated text file (`buoydata_*.dat`, `is_buoydata`): times from
    month, fractional day and year (UTC), longitude 0..360 east, latitude; 999.99 (missing) as missing; the
    position variances (degrees squared, written with Fortran's D or E exponents) as `err_lat`, `err_lon`.

    Raises
    ------
    ValueError
        one line, for a line that is not of this format.
    """
    import pandas as pd

    path, compression = head.path, head.compression
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
    seconds = seconds_since_1970(month_start.to_numpy("datetime64[ns]")) + (day - 1.0) * 86400.0
    missing = (np.abs(lat) >= BUOYDATA_MISSING) | (np.abs(lon) >= BUOYDATA_MISSING)
    lat, lon = np.where(missing, np.nan, lat), np.where(missing, np.nan, lon)
    error = lambda variance: np.sqrt(np.where((variance >= 0) & (variance < BUOYDATA_MISSING), variance, np.nan))
    grouped, t, pos, _, per_fix = group_rows(ids.astype(np.int64), seconds, lon, lat,
                                             per_row={"err_lat": error(var_lat), "err_lon": error(var_lon)})
    return RawTracks(t, pos, grouped, None, "lonlat", True, per_fix=per_fix)


GDP_TEXT = Reader("GDP 6-hourly text", (".dat", ".dat.gz"), lambda head: is_buoydata(head.text), read_buoydata)
"""The GDP's 6-hourly text files, recognised by their first line (`is_buoydata`)."""
