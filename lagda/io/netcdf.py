"""The one netCDF helper of lagda.io: atomic writes, trajectory ids, the version stamp."""

from __future__ import annotations

import numpy as np

from simulate.atomic import write_netcdf


def trajectory_ids(ids) -> np.ndarray:
    """Returns trajectory ids as int64 when all are integers, else as str."""
    arr = np.asarray(ids)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    strs = np.array([x.decode() if isinstance(x, bytes) else str(x) for x in arr.ravel()], dtype=str)
    try:
        as_int = np.array([int(s) for s in strs], dtype=np.int64)
        return as_int if all(str(v) == s for v, s in zip(as_int, strs)) else strs
    except ValueError:
        return strs


def write_netcdf_atomic(ds, path, encoding) -> None:
    """Writes `ds` to `path` through a temporary file in the same directory, then renames
    (`simulate.atomic.write_netcdf`: a failed write, a full disk's, is an OSError that says the room left)."""
    write_netcdf(ds, path, encoding)
