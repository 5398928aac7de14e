"""The studies' CSV files: rows merged into a file by a key, numbers written to four significant digits."""

from __future__ import annotations

import csv
import math
import pathlib
from typing import Callable


def merge_rows(path: pathlib.Path, rows: list[dict], columns, key: Callable[[dict], object]) -> pathlib.Path:
    """Returns `path` with `rows` merged in: an old row whose `key` one of `rows` has is replaced, the others kept
    first; `columns` in that order (other fields left out), floats to 4 significant digits, NaN as an empty cell."""
    old = []
    if path.exists():
        with open(path, newline="") as f:
            old = list(csv.DictReader(f))
    keys = {key(r) for r in rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for r in [r for r in old if key(r) not in keys] + rows:
            writer.writerow({k: cell(r.get(k, "")) for k in columns})
    return path


def cell(value):
    """Returns a CSV cell of `value`: a float to 4 significant digits, NaN empty, anything else as it is."""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return value
