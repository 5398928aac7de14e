"""CF times as lagda reads them: seconds since 1970-01-01T00:00:00Z, and the fill values a time or position takes.

Every reader turns its times into float64 seconds since 1970 (`cf_seconds` for numbers in CF units "UNIT since
DATE", `seconds_since_1970` for datetime64 values, `time_values` for a CF time variable, which may also be model time,
units "1"). A model's calendar (noleap, 360_day, ...) is read as the same dates of the standard calendar
(`calendar_note` words it). A value of magnitude `FILL_MAGNITUDE` or more is a fill value, declared or not
(`without_fills`: the GDP writes -1e34).
"""

from __future__ import annotations

import warnings

import numpy as np

from lagda.io.physical import EPOCH

FILL_MAGNITUDE = 1e30  # a time or position this large is a fill value (GDP: -1e34; netCDF's default: 9.97e36)
_STANDARD_CALENDARS = ("standard", "gregorian", "proleptic_gregorian")


def without_fills(values) -> np.ndarray:
    """Returns float64 `values` with fill values, declared or not (magnitude `FILL_MAGNITUDE` or more: the GDP's
    -1e34), as NaN."""
    values = np.asarray(values, np.float64)
    return np.where(np.abs(values) >= FILL_MAGNITUDE, np.nan, values)


def cf_seconds(values, units: str, calendar, path="", warn: bool = True) -> np.ndarray:
    """Returns seconds since 1970-01-01T00:00:00Z of CF time `values` ("UNIT since DATE"); NaN and fill values
    (magnitude `FILL_MAGNITUDE` or more) are NaN. A model's calendar (noleap, 360_day, ...) is read as the
    same dates of the standard calendar (`calendar_note` words it; `warn`: as a warning).

    Raises
    ------
    ValueError
        for unreadable units, or a model calendar's date the standard one lacks (30 February).
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
    return seconds_since_1970(np.asarray(dates))


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
        out[finite] = seconds_since_1970(np.array(text, dtype="datetime64[us]"))
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


def seconds_since_1970(dates: np.ndarray) -> np.ndarray:
    """Returns float64 seconds since 1970-01-01T00:00:00 of datetime64 `dates`, of any shape; NaT is NaN.

    Parameters
    ----------
    dates : numpy.ndarray
        datetime64 values of any unit.

    Returns
    -------
    numpy.ndarray
        float64, the shape of `dates`.

    Examples
    --------
    >>> seconds_since_1970(np.array(["1970-01-02T00:00:00", "NaT"], dtype="datetime64[s]"))
    array([86400.,    nan])
    """
    out = (dates.astype("datetime64[ns]") - EPOCH.astype("datetime64[ns]")).astype(np.int64) / 1e9
    return np.where(np.isnat(dates), np.nan, out)


def time_values(var, path) -> tuple[np.ndarray, bool]:
    """Returns (times as float64, physical) of a time variable: seconds since 1970 for CF times, else model time.

    Parameters
    ----------
    var : xarray.Variable or xarray.DataArray
        datetime64 values, or numbers with CF units ("UNIT since DATE", an optional `calendar`) or units "1" (or
        none): model time.
    path : str
        How messages name the file.

    Returns
    -------
    tuple of (numpy.ndarray, bool)
        The times, float64 of the variable's shape, and whether they are physical (seconds since 1970).

    Raises
    ------
    ValueError
        One line, for units that are neither CF time units nor "1".
    """
    values = np.asarray(var.values)
    if values.dtype.kind == "M":
        return seconds_since_1970(values), True
    units = str(var.attrs.get("units", "1")).strip()
    if " since " in units:
        return cf_seconds(values, units, var.attrs.get("calendar"), path), True
    if units not in ("", "1"):
        raise ValueError(f"{path}: time has units {units!r}; lagda reads CF times (\"seconds since ...\") or "
                         "nondimensional model time (units \"1\")")
    return values.astype(np.float64), False
