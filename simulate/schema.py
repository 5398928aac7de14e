"""The dataset schema, declared once: variables, dimensions, dtypes, units and global attributes.

A lagda dataset is a netCDF4 file of paired samples (Fourier coefficients c, drifter tracks v)
written through xarray (docs/design/forward-model.md, "Datasets"). It follows CF conventions for units and
long names but is not a CF discrete-sampling-geometry file, so it has no `featureType`.
Everything is nondimensional (units "1"). Every `SimConfig` field is a global attribute, so
`config_from_attrs` rebuilds the exact generator settings from the file.

`to_dataset` builds the xarray.Dataset, `validate_dataset` checks one, and `open_dataset` is
the single reader (generation, training and assimilation all open files through it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr

from simulate.config import SimConfig

SCHEMA_VERSION = "1"
CONVENTIONS = "CF-1.11"
TITLE = "lagda dataset: Fourier coefficients of a streamfunction paired with drifter tracks"
DIMS = ("sample", "drifter", "obs", "mode")
PRECISION = "precision"  # dtype placeholder: float32 or float64, the config's `precision`


class Variable(NamedTuple):
    """One variable of the schema: its dimensions, dtype, units and long name."""

    dims: tuple[str, ...]
    dtype: str
    units: str
    long_name: str


VARIABLES: dict[str, Variable] = {
    "time": Variable(("obs",), "float64", "1", "observation time t_j = j * stride * dt, j = 1..n_obs"),
    "k1": Variable(("mode",), "int32", "1", "wavenumber k1 (x direction) of the Fourier mode"),
    "k2": Variable(("mode",), "int32", "1", "wavenumber k2 (y direction) of the Fourier mode"),
    "omega": Variable(("mode",), "float64", "1", "frequency omega_k of the Fourier mode"),
    "prior_scale": Variable(("mode",), "float64", "1", "prior standard deviation a_k = sqrt(E|c_k|^2)"),
    "coef_re": Variable(("sample", "mode"), "float64", "1", "real part of the streamfunction coefficient c_k"),
    "coef_im": Variable(("sample", "mode"), "float64", "1", "imaginary part of the streamfunction coefficient c_k"),
    "x0": Variable(("sample", "drifter"), "float64", "1", "drifter release position x at t = 0"),
    "y0": Variable(("sample", "drifter"), "float64", "1", "drifter release position y at t = 0"),
    "x": Variable(("sample", "drifter", "obs"), PRECISION, "1", "drifter position x, unwrapped (not reduced mod 1)"),
    "y": Variable(("sample", "drifter", "obs"), PRECISION, "1", "drifter position y, unwrapped (not reduced mod 1)"),
}
COORDINATES = ("time",)  # stored as a coordinate of `obs`; the rest are data variables
CONFIG_FIELDS = tuple(field.name for field in dataclasses.fields(SimConfig))
REQUIRED_ATTRS = ("Conventions", "title", "history", "lagda_schema_version", "source") + CONFIG_FIELDS


def _attr_value(value):
    """Returns a netCDF-storable attribute value (netCDF has no booleans: 0/1)."""
    return int(value) if isinstance(value, bool) else value


def config_attrs(config: SimConfig) -> dict:
    """Returns every SimConfig field as a global attribute, `{name: value}`."""
    return {name: _attr_value(value) for name, value in dataclasses.asdict(config).items()}


def config_from_attrs(ds: xr.Dataset) -> SimConfig:
    """Returns the SimConfig stored in a dataset's global attributes.

    Parameters
    ----------
    ds : xarray.Dataset
        A lagda dataset.

    Returns
    -------
    SimConfig

    Raises
    ------
    ValueError
        If an attribute is missing or cannot be converted to the field's type.
    """
    values = {}
    for field in dataclasses.fields(SimConfig):
        if field.name not in ds.attrs:
            raise ValueError(f"missing global attribute {field.name!r}")
        raw, kind = ds.attrs[field.name], type(field.default)
        try:
            values[field.name] = bool(int(raw)) if kind is bool else kind(raw.item() if hasattr(raw, "item") else raw)
        except (TypeError, ValueError):
            raise ValueError(f"global attribute {field.name} = {raw!r} is not a {kind.__name__}") from None
    return SimConfig(**values)


def _real_dtype(precision: str) -> np.dtype:
    return np.dtype(precision)


SHARD_ATTRS = ("lagda_shard_index", "lagda_shard_count", "lagda_sample_start", "lagda_sample_stop")


def shard_block(n_samples: int, index: int, count: int) -> tuple[int, int]:
    """Returns the samples [start, stop) of shard `index` of `count`: contiguous, sizes differing by at most one."""
    return index * n_samples // count, (index + 1) * n_samples // count


def to_dataset(config: SimConfig, *, k1, k2, omega, prior_scale, coef, release, positions, history: str,
               shard: tuple[int, int] | None = None, time_basis=None) -> xr.Dataset:
    """Returns the dataset of a generation run, following `VARIABLES` exactly.

    Parameters
    ----------
    config : SimConfig
        The resolved generator settings (stored as global attributes).
    k1, k2 : array_like
        Integer `(mode,)` wavevectors.
    omega, prior_scale : array_like
        `(mode,)` frequencies (radians per model time unit) and prior standard deviations a_k.
    coef : array_like
        Complex `(sample, mode)`, stored as float64 real and imaginary parts.
    release : array_like
        `(sample, drifter, 2)` release points, stored as float64.
    positions : array_like
        `(sample, drifter, obs, 2)` unwrapped, stored in the config's precision.
    history : str
        One line saying how the file was made (CF `history`).
    shard : tuple of int, optional
        `(index, count)` of a shard file holding the samples `shard_block(n_samples, index, count)` of the run
        (`SHARD_ATTRS`), or None (or count 1) for a whole run.
    time_basis : simulate.flow.TimeBasis, optional
        For pairs in a chosen basis (its modes, not the config's rectangle), the time basis of the modes,
        stored as `time_basis_degree`, `time_basis_current` `(mode,)` and the attributes `time_basis_start`,
        `time_basis_length`; None for lagda's own modes.

    Returns
    -------
    xarray.Dataset
        Everything in model units ("1").

    Raises
    ------
    ValueError
        If the result does not satisfy the schema (shapes inconsistent with config).
    """
    real = _real_dtype(config.precision)
    positions, release, coef = np.asarray(positions), np.asarray(release), np.asarray(coef)
    time = np.arange(1, config.n_obs + 1, dtype=np.float64) * (config.stride * config.dt)
    values = {
        "time": time, "k1": np.asarray(k1, np.int32), "k2": np.asarray(k2, np.int32),
        "omega": np.asarray(omega, np.float64), "prior_scale": np.asarray(prior_scale, np.float64),
        "coef_re": np.real(coef).astype(np.float64), "coef_im": np.imag(coef).astype(np.float64),
        "x0": release[..., 0].astype(np.float64), "y0": release[..., 1].astype(np.float64),
        "x": positions[..., 0].astype(real), "y": positions[..., 1].astype(real),
    }
    variables = {}
    for name, spec in VARIABLES.items():
        variables[name] = xr.Variable(spec.dims, values[name], {"units": spec.units, "long_name": spec.long_name})
    coords = {name: variables.pop(name) for name in COORDINATES}
    attrs = {
        "Conventions": CONVENTIONS, "title": TITLE, "history": history,
        "lagda_schema_version": SCHEMA_VERSION,
        "source": "simulate.generate: RK4 drifters in a random-Fourier streamfunction on the torus",
        **config_attrs(config),
    }
    if shard is not None and shard[1] > 1:
        index, count = (int(v) for v in shard)
        attrs.update(zip(SHARD_ATTRS, (index, count, *shard_block(config.n_samples, index, count))))
    if time_basis is not None:
        current = np.zeros(len(values["k1"])) if time_basis.current is None else time_basis.current
        variables["time_basis_degree"] = xr.Variable("mode", time_basis.degree.astype(np.int32),
                                                     {"long_name": "Legendre degree of the mode in time"})
        variables["time_basis_current"] = xr.Variable("mode", np.asarray(current, np.int8),
                                                      {"long_name": "1 where the mode is the uniform current"})
        attrs.update(time_basis_start=float(time_basis.start), time_basis_length=float(time_basis.length))
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    validate_dataset(ds)
    return ds


def encoding(ds: xr.Dataset) -> dict:
    """Returns the netCDF encoding: no _FillValue (there is no missing data in a dataset)."""
    return {name: {"_FillValue": None} for name in ds.variables}


def _check_variables(ds: xr.Dataset, precision: str) -> None:
    for name, spec in VARIABLES.items():
        if name not in ds.variables:
            raise ValueError(f"missing variable {name!r}")
        var = ds.variables[name]
        if var.dims != spec.dims:
            raise ValueError(f"variable {name!r} has dims {var.dims}, expected {spec.dims}")
        dtype = np.dtype(precision if spec.dtype == PRECISION else spec.dtype)
        if var.dtype != dtype:
            raise ValueError(f"variable {name!r} has dtype {var.dtype}, expected {dtype}")
        for key in ("units", "long_name"):
            if key not in var.attrs:
                raise ValueError(f"variable {name!r} has no {key!r} attribute")


def validate_dataset(ds: xr.Dataset) -> SimConfig:
    """Returns the dataset's SimConfig after checking the schema; raises on the first problem.

    Checks: global attributes (Conventions, schema version, every SimConfig field), every
    variable's presence, dims, dtype, units and long_name, and that the sizes agree with the
    stored settings (n_samples, n_drifters, n_obs, the rectangular mode set).

    Parameters
    ----------
    ds : xarray.Dataset
        The dataset to check.

    Returns
    -------
    SimConfig
        The settings stored in its attributes.

    Raises
    ------
    ValueError
        One line naming the first problem found.
    """
    for key in REQUIRED_ATTRS:
        if key not in ds.attrs:
            raise ValueError(f"missing global attribute {key!r}")
    if str(ds.attrs["lagda_schema_version"]) != SCHEMA_VERSION:
        raise ValueError(f"schema version {ds.attrs['lagda_schema_version']!r} is not {SCHEMA_VERSION!r}")
    if "featureType" in ds.attrs:
        raise ValueError("has a featureType attribute: this is a CF track file, not a dataset")
    config = config_from_attrs(ds)
    if config.precision not in ("float32", "float64"):
        raise ValueError(f"global attribute precision = {config.precision!r} is not float32 or float64")
    _check_variables(ds, config.precision)
    n_modes = (config.k1_max - config.k1_min + 1) * (config.k2_max - config.k2_min + 1)
    if "time_basis_degree" in ds:  # pairs in a chosen basis: its modes
        n_modes = ds.sizes["mode"]
    n_samples = config.n_samples
    if "lagda_shard_count" in ds.attrs:  # one shard: the block of samples it says, as shard_block gives it
        index, count, start, stop = (int(ds.attrs[name]) for name in SHARD_ATTRS)
        if not 0 <= index < count or (start, stop) != shard_block(config.n_samples, index, count):
            raise ValueError(f"shard attributes {index}/{count} [{start}, {stop}) do not fit n_samples = "
                             f"{config.n_samples}")
        n_samples = stop - start
    expected = {"sample": n_samples, "drifter": config.n_drifters, "obs": config.n_obs, "mode": n_modes}
    for dim, size in expected.items():
        if ds.sizes[dim] != size:
            raise ValueError(f"dimension {dim!r} has size {ds.sizes[dim]}, but the stored settings give {size}")
    return config


def open_dataset(path, *, load: bool = False) -> xr.Dataset:
    """Returns a validated lagda dataset read from a netCDF file (lazily unless `load`).

    Parameters
    ----------
    path : str, os.PathLike or list of them
        The file, or the shard files of one run (`lagda simulate --shard I/N`, in any order): they are joined
        along `sample` into the dataset a single run writes (`join_shards`).
    load : bool, default False
        Read the arrays into memory.

    Returns
    -------
    xarray.Dataset
        Coefficients `coef_re`, `coef_im` `(sample, mode)`, positions `x`, `y` `(sample, drifter, obs)`,
        times `time` `(obs,)`, everything in model units (`VARIABLES`).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        "not a lagda dataset: ..." for a file that is not netCDF or breaks the schema.
    """
    if isinstance(path, (list, tuple)):
        return join_shards([open_dataset(p, load=load) for p in path], [str(p) for p in path])
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such dataset file: {path}")
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)
    except Exception as error:  # netCDF4 raises OSError, xarray ValueError/KeyError on foreign files
        raise ValueError(f"not a lagda dataset: {path}: cannot be read as netCDF ({type(error).__name__})") from None
    try:
        validate_dataset(ds)
        if load:
            ds.load()
    except ValueError as error:
        ds.close()
        raise ValueError(f"not a lagda dataset: {path}: {error}") from None
    return ds


def join_shards(shards: list[xr.Dataset], names: list[str]) -> xr.Dataset:
    """Returns the dataset of a whole run from all its shard datasets (validated), ordered by sample.

    Raises
    ------
    ValueError
        one line if a file is not a shard, the shards come from different runs, or
        a shard is missing or repeated.
    """
    for ds, name in zip(shards, names):
        if "lagda_shard_count" not in ds.attrs:
            raise ValueError(f"cannot join {name}: not a shard file (made without lagda simulate --shard)")
    same = [key for key in CONFIG_FIELDS + ("lagda_shard_count",) if key != "chunk_size"]
    for ds, name in zip(shards[1:], names[1:]):
        differ = [key for key in same if ds.attrs[key] != shards[0].attrs[key]]
        if differ:
            raise ValueError(f"cannot join {names[0]} and {name}: shards of different runs ({', '.join(differ)} "
                             "differ)")
    count = int(shards[0].attrs["lagda_shard_count"])
    indices = sorted(int(ds.attrs["lagda_shard_index"]) for ds in shards)
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        raise ValueError(f"cannot join the shards: {count} expected, got indices {indices}"
                         + (f" (missing {missing})" if missing else " (repeated)"))
    ordered = sorted(shards, key=lambda ds: int(ds.attrs["lagda_shard_index"]))
    joined = xr.concat(ordered, dim="sample", data_vars="minimal", coords="minimal", compat="override",
                       combine_attrs="override")
    joined.attrs = {k: v for k, v in ordered[0].attrs.items() if k not in SHARD_ATTRS}
    joined.attrs["history"] = "; ".join(dict.fromkeys(str(ds.attrs["history"]) for ds in ordered))
    validate_dataset(joined)
    return joined


def markdown_table() -> str:
    """Returns the schema's variables as a Markdown table (data/README.md embeds it)."""
    rows = ["| variable | dims | dtype | units | long_name |", "|---|---|---|---|---|"]
    for name, spec in VARIABLES.items():
        dtype = "float32 or float64 (the `precision` attribute)" if spec.dtype == PRECISION else spec.dtype
        long_name = spec.long_name.replace("|", "\\|")
        rows.append(f"| `{name}` | ({', '.join(spec.dims)}) | {dtype} | {spec.units} | {long_name} |")
    return "\n".join(rows)
