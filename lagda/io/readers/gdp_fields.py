"""The Global Drifter Program's quality fields, as every reader takes them: the variables read when a file has them
(`GDP_VARIABLES`: drogue status, location type, position and velocity errors), and a fix's `drogue_status` from its
drifter's `drogue_lost_date` (drogued before that date)."""

from __future__ import annotations

import numpy as np

from lagda.io.cf_time import time_values

GDP_VARIABLES = ("drogue_status", "location_type", "err_lat", "err_lon", "err_ve", "err_vn")  # read when present
DROGUE_FROM_LOST_NOTE = "drogue_status from each drifter's drogue_lost_date (drogued before it)"


def drogue_from_lost_note(lost) -> str:
    """Returns the note on drogue_status taken from a table's `drogue_lost_date` column, seconds (NaN: no date),
    which says when no drifter of the table has a date (an empty column: every fix taken as drogued)."""
    if not np.isfinite(np.asarray(lost, np.float64)).any():
        return "drogue_lost_date holds no date: every fix taken as drogued"
    return DROGUE_FROM_LOST_NOTE


def drogued(times, lost) -> np.ndarray:
    """Returns the GDP drogue_status int8 (1 drogued, 0 not) of fixes at `times` whose drifter lost its drogue at
    `lost` (broadcast; seconds since 1970, NaN: never): drogued before it."""
    return np.where(np.asarray(times) >= lost, 0, 1).astype(np.int8)


def drogue_from_lost_date(var, instance_dim, times: list, path) -> list:
    """Returns per trajectory the GDP drogue_status `(n,)` (1 drogued, 0 not) of its fixes' `times` (seconds since
    1970) from its `drogue_lost_date` (the GDP per-drifter files' variable over `instance_dim`): drogued before
    that date, and throughout when the date is missing (the drogue never lost)."""
    if var.dims != (instance_dim,):
        raise ValueError(f"{path}: drogue_lost_date has dims {var.dims}, expected ({instance_dim!r},)")
    lost, _ = time_values(var, path)
    return [drogued(np.asarray(t), when) for t, when in zip(times, lost)]


def gdp_variables(ds, instance_dim, obs_dims, split, sizes) -> dict:
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
