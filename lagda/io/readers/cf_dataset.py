"""The reader of CF trajectory files in netCDF (`NETCDF`) or Zarr (`ZARR`, Parcels v3 output, a store at a URL too),
and of lagda datasets.

A lagda dataset (global attribute `lagda_schema_version`) is read as its `Tracks`. A trajectory file
(`featureType = "trajectory"`; Parcels' `feature_type` is read with a warning) is read in the incomplete
multidimensional (`time(trajectory, obs)`), orthogonal (`time(obs)`) or contiguous ragged layout (a count variable
with `sample_dimension`, e.g. clouddrift's `rowsize`). A file without the count's attribute is read when its
dimensions show the layout (`guess_layout`), whatever its featureType; one trajectory without a trajectory dimension
and a flat table of fixes are read too (lagda.io.readers.cf_trajectory). The GDP variables (per fix, or per
trajectory) are read when present (lagda.io.readers.gdp_fields), values that CF quality flags mark bad are read as
missing (lagda.io.readers.cf_variables.without_flagged), and -1e34 (the GDP's missing value) as missing too.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from lagda.io.cf_time import time_values, without_fills
from lagda.io.locations import is_url, is_zarr, open_zarr_url
from lagda.io.readers.cf_trajectory import is_single_trajectory, single_id, table_ids
from lagda.io.readers.cf_variables import id_names, length_factor, position_names, time_name, without_flagged
from lagda.io.readers.gdp_fields import (
    DROGUE_FROM_LOST_NOTE,
    GDP_VARIABLES,
    drogue_from_lost_date,
    drogue_from_lost_note,
    drogued,
    gdp_variables,
)
from lagda.io.readers.reader import NOT_TRACKS, FileHead, Reader, check_units, group_rows
from lagda.io.tracks import RawTracks, Tracks

QG_TRUTH = {"psi", "u", "v", "truth_time"}  # the gridded truth of a QG truth file (lagda simulate --flow qg)


def read_netcdf(head: FileHead):
    """Returns what a netCDF file holds (`from_dataset`), its values loaded.

    Raises
    ------
    ValueError
        one line, for a file netCDF cannot read or that is no track file.
    """
    import xarray as xr

    path = head.path
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)
    except Exception as err:  # netCDF4 raises OSError/RuntimeError on corrupted files
        raise ValueError(f"{path} {NOT_TRACKS} (it cannot be read as netCDF: {err})") from None
    with ds:
        ds.load()
        return checked(from_dataset, ds, path)


def read_zarr(head: FileHead):
    """Returns what a Zarr store (a local folder, or at a URL) holds (`from_dataset`), its values loaded.

    Raises
    ------
    ValueError
        one line, for a folder that is no Zarr store, or a store that cannot be read.
    """
    import xarray as xr

    path = head.path
    if is_url(path):
        ds = open_zarr_url(path)
    elif not is_zarr(path):
        raise ValueError(f"{path} is a directory, not a zarr store (no .zgroup or zarr.json)")
    else:
        try:
            ds = xr.open_zarr(path, decode_times=False, consolidated=None)
        except ImportError:
            raise ValueError(f"{path}: reading zarr needs the zarr package (pip install zarr)") from None
        except Exception as error:
            raise ValueError(f"{path}: cannot be read as zarr ({type(error).__name__})") from None
    with ds:
        ds.load()
        return checked(from_dataset, ds, path)


def raw_from_dataset(ds, name="dataset") -> RawTracks:
    """Returns the `RawTracks` of an xarray Dataset of a trajectory file (e.g. a subset of an archive), not cleaned.

    The layouts and GDP variables of `read_tracks`; the values are loaded (subset a lazy archive first).
    `to_tracks` (or `lagda.io.clean.clean_fixes` alone) takes it on.

    Raises
    ------
    ValueError
        one line naming `name`, for a lagda dataset or a dataset that is no trajectory file.
    """
    raw = checked(from_dataset, ds, name)
    if isinstance(raw, Tracks):
        raise ValueError(f"{name}: a lagda dataset, not a trajectory file: read it with read_tracks")
    return raw


def checked(read, ds, path):
    """Returns read(ds, path), turning a lookup error on a malformed file into one ValueError line; positions and
    times in different units are refused as read (`check_units`), so that every command says the same of them."""
    try:
        raw = read(ds, path)
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(f"{path}: inconsistent track file ({type(error).__name__}: {error})") from None
    if isinstance(raw, RawTracks):
        check_units(raw, path)
    return raw


def from_dataset(ds, path):
    """Returns `Tracks` of a lagda dataset or `RawTracks` of a trajectory file, dispatching on its attributes."""
    if "lagda_schema_version" in ds.attrs:
        from lagda.io.tracks import tracks_from_dataset
        from simulate.schema import validate_dataset

        try:
            validate_dataset(ds)
        except ValueError as error:
            raise ValueError(f"{path}: not a valid lagda dataset: {error}") from None
        return dataclasses.replace(tracks_from_dataset(ds), dt=file_dt(ds.attrs))
    feature, parcels = ds.attrs.get("featureType"), ()
    if feature is None and "feature_type" in ds.attrs:
        feature = ds.attrs["feature_type"]
        if "parcels_version" in ds.attrs:  # Parcels' own output spells it so: a note, not a warning
            parcels = (f"Parcels {ds.attrs['parcels_version']} output: its feature_type read as CF's featureType",)
        else:
            warnings.warn(f"{path}: reading Parcels-style attribute feature_type; CF spells it featureType",
                          stacklevel=5)
    counts = [(name, var.attrs["sample_dimension"]) for name, var in ds.variables.items()
              if "sample_dimension" in var.attrs]
    if feature is not None and str(feature).lower() != "trajectory":
        raise ValueError(f"{path}: featureType is {feature!r}; lagda reads only featureType = \"trajectory\"")
    single, table = False, None
    if not counts:  # the layout from the dimensions, whatever featureType says
        position = None if feature is None else position_names(ds, path)[0]
        why = "no featureType attribute" if feature is None else None
        try:
            counts = guess_layout(ds, path, why, position)
        except ValueError:  # neither a ragged count nor positions over two dimensions: a table, one trajectory, none
            table = table_ids(ds, path, why)
            single = table is None and is_single_trajectory(ds, path, why)
            if table is None and not single:
                raise
    a, b, coordinates = position_names(ds, path)
    t_name = time_name(ds, path)
    ds, flag_note = without_flagged(ds, (a, b, t_name))
    flag_note = parcels + flag_note
    time, physical_time = time_values(ds[t_name], path)
    scale = length_factor(ds[a], coordinates)
    if table is not None:
        per_row = {name: np.asarray(ds[name].values) for name in GDP_VARIABLES
                   if name in ds.variables and ds[name].dims == ds[a].dims}
        notes = flag_note
        lost = ds.variables.get("drogue_lost_date")
        if "drogue_status" not in per_row and physical_time and lost is not None and lost.dims == ds[a].dims:
            lost_s = time_values(lost, path)[0]
            per_row["drogue_status"] = drogued(time, lost_s)
            notes += (drogue_from_lost_note(lost_s),)
        ids, times, positions, _, per_fix = group_rows(table, time, scale * ds[a].values, scale * ds[b].values,
                                                       per_row=per_row)
        return RawTracks(times, [without_fills(p) for p in positions], ids, None, coordinates, physical_time,
                         dict(ds.attrs), per_fix=per_fix, notes=notes)
    if single:
        per_fix = {name: [np.asarray(ds[name].values)] for name in GDP_VARIABLES
                   if name in ds.variables and ds[name].shape == ds[a].shape}
        ids, given = single_id(ds, path)
        positions = scale * np.stack([ds[a].values, ds[b].values], axis=-1).astype(np.float64)
        positions = without_fills(positions)
        return RawTracks([time], [positions], ids, None, coordinates, physical_time, dict(ds.attrs), per_fix=per_fix,
                         ids_given=given, notes=flag_note)
    if counts:
        count_name, sample_dim = counts[0]
        for name in (a, b, t_name):
            if ds[name].dims != (sample_dim,):
                raise ValueError(f"{path}: ragged layout: {name!r} has dims {ds[name].dims}, expected "
                                 f"({sample_dim!r},)")
        sizes = ds[count_name].values.astype(np.int64)
        if sizes.sum() != ds.sizes[sample_dim]:
            raise ValueError(f"{path}: ragged layout: {count_name} sums to {sizes.sum()} but {sample_dim!r} has "
                             f"{ds.sizes[sample_dim]}")
        splits = np.cumsum(sizes)[:-1]
        times = np.split(time, splits)
        positions = np.split(scale * np.stack([ds[a].values, ds[b].values], axis=-1).astype(np.float64), splits)
        instance = ds[count_name].dims[0]
        per_fix = gdp_variables(ds, instance, (sample_dim,), lambda values: np.split(values, splits), sizes)
    else:
        x = ds[a]
        if x.ndim != 2:
            raise ValueError(f"{path}: position {a!r} has dims {x.dims}, expected (trajectory, obs)")
        roles = [v.dims[0] for v in ds.variables.values() if v.attrs.get("cf_role") == "trajectory_id" and v.ndim]
        if roles and x.dims[1] == roles[0]:  # stored (obs, trajectory): the cf_role id says which is which
            x = x.transpose(x.dims[1], x.dims[0])
            flag_note += (f"positions stored over {tuple(reversed(x.dims))}: read over {x.dims}, the dimension of "
                          "the cf_role trajectory id first",)
        order = [d for d in x.dims if d in ds[t_name].dims]
        time = ds[t_name].copy(data=time).transpose(*order).values
        time = np.broadcast_to(time, x.shape) if time.ndim == 1 else time  # orthogonal: time(obs) shared
        positions = list(scale * np.stack([x.values, ds[b].transpose(*x.dims).values], axis=-1).astype(np.float64))
        times, instance = list(time), x.dims[0]
        per_fix = gdp_variables(ds, instance, x.dims, list, np.full(x.shape[0], x.shape[1]))
    positions = [without_fills(p) for p in positions]
    notes = flag_note
    if "drogue_status" not in per_fix and physical_time and "drogue_lost_date" in ds.variables:
        per_fix["drogue_status"] = drogue_from_lost_date(ds["drogue_lost_date"], instance, times, path)
        notes += (DROGUE_FROM_LOST_NOTE,)  # a drifter's own file: no date is a drogue never lost
    return dataclasses.replace(dataset_raw(ds, instance, times, positions, coordinates, physical_time, per_fix),
                               notes=notes)


def assumed_ragged(path, why: str, count: str, count_dim: str, sample_dim: str) -> str:
    """Returns the line that says a file was read as a contiguous ragged array found from its dimensions."""
    return (f"{path}: {why}; assumed a contiguous ragged array (clouddrift layout): {count}({count_dim}) counts the "
            f"observations along {sample_dim!r}")


def guess_layout(ds, path, why: str | None, position: str | None = None) -> list:
    """Returns [(count, sample_dim)] for a ragged array without attributes, [] for (trajectory, obs) arrays.

    Found from the dimensions: a 1-D integer variable (names with "size" or "count" first) that sums to the
    size of another dimension is the count of a contiguous ragged array (clouddrift's `rowsize`); else
    positions over two dimensions are the incomplete multidimensional layout. A warning says which was assumed
    and `why` (the attributes that were missing); `why` None (featureType trajectory was given) warns only of an
    assumed ragged array. With `position` (the name of the x-like variable) the layout is read from its dims.

    Raises
    ------
    ValueError
        if neither layout shows in the dimensions.
    """
    named_first = sorted(ds.variables.items(),
                         key=lambda item: "size" not in item[0].lower() and "count" not in item[0].lower())
    names = ("lon", "longitude", "x") if position is None else (position,)
    two_d = [name for name in names if name in ds.variables and ds[name].ndim == 2]
    if not two_d:
        for name, var in named_first:
            # a quality flag is no count (a drifter's TIME_QC of all 1 sums to its fixes)
            flag = "flag_values" in var.attrs or "flag_meanings" in var.attrs or name.upper().endswith("_QC")
            if var.ndim != 1 or var.dtype.kind not in "iu" or name in ds.dims or flag:
                continue
            for sample_dim, size in ds.sizes.items():
                if position is not None and ds[position].dims != (sample_dim,):
                    continue
                # a count is over fewer trajectories than fixes: one over as many would be a fix a trajectory
                if (sample_dim != var.dims[0] and int(var.values.sum()) == size and size > 0
                        and ds.sizes[var.dims[0]] < size):
                    why = why or "featureType trajectory without CF ragged attributes (sample_dimension)"
                    warnings.warn(assumed_ragged(path, why, name, var.dims[0], sample_dim), stacklevel=6)
                    return [(name, sample_dim)]
    if two_d:
        if why is None:  # featureType trajectory over two dimensions: the CF multidimensional layout
            return []
        warnings.warn(f"{path}: {why}; assumed a trajectory array {two_d[0]}{ds[two_d[0]].dims} "
                      "(incomplete multidimensional layout)", stacklevel=6)
        return []
    why = why or "featureType trajectory, but neither a ragged count nor positions over two dimensions"
    raise ValueError(f"{path} {NOT_TRACKS} ({why})")


def dataset_raw(ds, instance_dim, times, positions, coordinates, physical_time, per_fix=None) -> RawTracks:
    """Returns `RawTracks` from per-trajectory lists plus the instance variables of `ds`."""
    n = ds.sizes[instance_dim]
    id_vars = id_names(ds, (instance_dim,))[0]
    ids = ds[id_vars[0]].values if id_vars else np.arange(n)
    field = ds["field"].values if "field" in ds.variables and ds["field"].dims == (instance_dim,) else None
    release = None
    if "x0" in ds.variables and "y0" in ds.variables and ds["x0"].dims == (instance_dim,):
        release = np.stack([ds["x0"].values, ds["y0"].values], axis=-1)
    truth = {name: ds[name].values for name in ("k1", "k2", "omega") if name in ds.variables}
    if "true_coef_re" in ds.variables:
        truth["true_coef"] = ds["true_coef_re"].values + 1j * ds["true_coef_im"].values
    if QG_TRUTH <= set(ds.variables) and "qg_L" in ds.attrs:  # a QG truth file: its gridded truth, in memory
        truth["gridded_truth"] = ds[sorted(QG_TRUTH)].copy()
    return RawTracks(list(times), list(positions), ids, field, coordinates, physical_time, dict(ds.attrs), release,
                     truth, per_fix or {}, ids_given=bool(id_vars))


def file_dt(attrs) -> float | None:
    """Returns the positive finite global attribute `dt` of a file (the RK4 step it states), else None."""
    value = attrs.get("dt")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) and value > 0 else None


NETCDF = Reader("netCDF", (".nc", ".nc4", ".cdf"), lambda head: head.stored.startswith((b"CDF", b"\x89HDF")),
                read_netcdf)
"""netCDF-3 and netCDF-4 (HDF5) files, recognised by their first bytes."""
ZARR = Reader("Zarr", (".zarr",), lambda head: head.store, read_zarr)
"""Zarr stores: a folder, or a URL."""
