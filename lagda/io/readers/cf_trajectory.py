"""CF trajectory files without a trajectory dimension, told apart from the others by their variables: one trajectory
(CF's single-trajectory layout, a file per drifter: positions and time 1-D of one length; `is_single_trajectory`,
named by `single_id`) and a flat table of fixes (positions, time and a trajectory id over one dimension, a row per
fix, as ERDDAP's tabledap `.nc` files are; `table_ids`). `lagda.io.readers.cf_dataset` reads them."""

from __future__ import annotations

import os
import warnings

import numpy as np

from lagda.io.readers.cf_variables import id_names, position_names, time_name
from lagda.io.tracks import id_text


def table_ids(ds, path, why: str | None) -> np.ndarray | None:
    """Returns the trajectory id of each fix `(row,)` of a flat table (positions, time and a trajectory id over one
    dimension, as ERDDAP's tabledap `.nc` files are), or None when `ds` is no such table: its id is the variable
    with `cf_role = "trajectory_id"` over the fixes' dimension, else one named id or ID (said in a warning), and it
    names more than one trajectory. Text ids are stripped strings."""
    try:
        a, b, _ = position_names(ds, path)
        t = time_name(ds, path)
    except ValueError:
        return None
    dims = ds[a].dims
    if len(dims) != 1 or ds[b].dims != dims or ds[t].dims != dims:
        return None
    named, guessed = id_names(ds, dims)
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


def is_single_trajectory(ds, path, why: str | None) -> bool:
    """Returns whether `ds` is one trajectory without a trajectory dimension (CF's single-trajectory layout, as a
    file per drifter often is): positions and time 1-D of one length (their dimensions may differ, as POSITION
    and TIME do in the Copernicus in-situ files). A file without featureType is said in a warning."""
    try:
        a, b, _ = position_names(ds, path)
        t = time_name(ds, path)
    except ValueError:
        return False
    single = all(ds[name].ndim == 1 for name in (a, b, t)) and ds[a].size == ds[b].size == ds[t].size > 0
    if single and why is not None:
        warnings.warn(f"{path}: {why}; assumed a single trajectory {a}{ds[a].dims}", stacklevel=7)
    return single


def single_id(ds, path) -> tuple[np.ndarray, bool]:
    """Returns (ids `(1,)`, whether the file names it) of a single-trajectory file: its `cf_role =
    "trajectory_id"` variable, else a variable `id` or `ID` of one value, else its `platform_code` or
    `wmo_platform_code` attribute, else the file's name."""
    for name in id_names(ds)[0]:
        value = np.asarray(ds.variables[name].values)
        if value.dtype.kind == "S" and value.ndim == 1 and value.dtype.itemsize == 1:  # chars not joined by the reader
            return np.array([b"".join(value).decode().strip()]), True
        if value.size and np.all(value == value.flat[0]):  # one id, or the same id on every fix (a table's rows)
            return np.array([id_text(value.flat[0]).strip()]), True
    for key in ("platform_code", "wmo_platform_code"):
        if str(ds.attrs.get(key, "")).strip():
            return np.array([str(ds.attrs[key]).strip()]), True
    return np.array([os.path.basename(os.fspath(path).rstrip(os.sep))]), False
