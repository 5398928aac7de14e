"""The reader of CSV track files (`CSV`, the last resort of the dispatch: a file no other reader recognises is read
as CSV, or refused in one line).

A header names the columns: `id,time,x,y[,field]` in model units, or `id,time,lon,lat[,field]` with ISO 8601
datetimes (longitude/latitude also accepted as column names, in any order, other columns ignored). ERDDAP's
tabledap CSV of the GDP's datasets is read as downloaded (`.csv`, whose second row holds the units, or `.csvp`,
"time (UTC)"); numeric times are read in the CF units that row or the column's name states, and refused without
them. Without an `id` column, the first of `CSV_ID_COLUMNS` present names each fix's drifter, said in a warning,
and without a `time` column the first of `CSV_TIME_COLUMNS` holds its time. Columns may be separated by semicolons
(a comma in a number its decimal point) or tabs, said in a note; a byte-order mark is ignored. Rows without a
position or a time are left out, counted in a note. The file may be gzip-compressed.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from lagda.io.cf_time import cf_seconds, seconds_since_1970
from lagda.io.readers.gdp_fields import drogue_from_lost_note, drogued
from lagda.io.readers.reader import NOT_TRACKS, FileHead, Reader, group_rows
from lagda.io.tracks import RawTracks

# the columns that may name a CSV fix's drifter when it has no id column, first found first: the id of OSMC's and
# the Copernicus in-situ ERDDAP datasets, CF's and Parcels' trajectory, and common names of others
CSV_ID_COLUMNS = ("id", "platform_code", "platform_id", "trajectory", "trajectory_id", "drifter_id", "buoy_id",
                  "wmo")
# the columns that may hold a CSV fix's time, first found first, as `_csv_name` matches them ("Time (UTC)" is time)
CSV_TIME_COLUMNS = ("time", "datetime", "date_time", "timestamp", "time_utc", "datetime_utc", "date", "date_utc")
TIME_OF_DAY = r"\d{1,2}:\d{2}(:\d{2}(\.\d*)?)?"  # a time column that holds only this takes its date from `date`
CSV_DELIMITERS = {",": "commas", ";": "semicolons", "\t": "tabs"}  # a CSV's delimiter: the header's most frequent
CSV_MISSING = ("", "NA", "nan", "NaN")  # a CSV value that is missing


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

    Raises
    ------
    ValueError
        when none is, one line listing the file's `columns`.
    """
    found = next((name for name in names if name in header), None)
    if found is None:
        raise ValueError(f"{path}: a CSV of fixes needs a column naming each fix's {what} ({names[0]}, or one of "
                         f"{', '.join(names[1:])}); its columns are {columns}")
    if found != names[0]:
        warnings.warn(f"{path}: no {names[0]} column; assumed {found} names each fix's {what}", stacklevel=6)
    return found


def read_csv(file: FileHead) -> RawTracks:
    """Returns the tracks of a CSV file with header id,time,x,y[,field] or id,time,lon,lat[,field]
    (module docstring); ERDDAP's tabledap CSV is read too: its row of units under the header (.csv) or units in
    the column names, "time (UTC)" (.csvp), with the ID column of the GDP's datasets. A byte-order mark is
    ignored; columns may be separated by semicolons (a comma in a number then its decimal point) or tabs, said in
    a note. Rows without a position or a time are left out, counted in a note.

    Raises
    ------
    ValueError
        one line: not a CSV of fixes, a column missing (the columns listed), no rows, bad values.
    """
    path, head, compression = file.path, file.text, file.compression
    try:
        first = head.decode("utf-8-sig").splitlines()[0] if head else ""
    except UnicodeDecodeError:
        first = ""
    delimiter = _csv_delimiter(first)
    header = {_csv_name(h) for h in first.split(delimiter)}
    lonlat = [pair for pair in (("lon", "lat"), ("longitude", "latitude")) if set(pair) <= header]
    names = lonlat[0] if lonlat else ("x", "y")
    if not set(names) <= header:
        raise ValueError(f"{path} {NOT_TRACKS}")
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
        per_row["drogue_status"] = drogued(times, lost)
        notes.append(drogue_from_lost_note(lost))
    kept = np.isfinite(a) & np.isfinite(b) & np.isfinite(times)
    if not kept.all():
        notes.append(f"{int(np.sum(~kept))} rows with no position or time left out")
    fields = column("field").to_numpy(str)[kept].tolist() if "field" in table.columns else None
    ids, t, pos, field, per_fix = group_rows(column(id_name).to_numpy(str)[kept], times[kept], a[kept], b[kept],
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
    return seconds_since_1970(values), True


CSV = Reader("CSV", (".csv", ".csvp", ".tsv", ".csv.gz", ".tsv.gz"), lambda head: True, read_csv)
"""CSV files (tab-separated too): recognised by no mark of their own, so last in the registry, where every file
the readers before it left is read as CSV (a file with no such header is refused in one line)."""
