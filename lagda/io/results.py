"""The assimilation result file: `write_result` writes a `Result` (lagda.assimilation.fields makes one from a
posterior), `read_result` reads it back.

The file has dims `field`, `mode`, `rank`, `model_time`, `y`, `x`: the model's modes `k1`, `k2`,
`omega(mode)`; the posterior coefficient mean and std `coef_mean_re/_im`, `coef_std_re/_im
(field, mode)`; for retrieval `candidate_coef_re/_im (field, rank, mode)` and `candidate_weight
(field, rank)`; and the posterior mean and std of psi, u, v on the regular grid x_i = i / n_grid
`(field, model_time, y, x)`; in a chosen basis, where the method modelled the velocity the basis leaves out
(`linear`'s representation error, std r per component), also `u_total_std`, `v_total_std` = sqrt(std^2 + r^2),
the predictive std of the full velocity. When the observed tracks are given they are stored too (`track_x`,
`track_y`, `track_time (trajectory, obs)`, `track_field (trajectory)`, in model units), and so is
the truth when the tracks know it. The global attribute `diagnostics` holds, as a JSON list with
one object per field, what the method decided (Posterior.diagnostics: chosen lag, noise
estimate, prior, refinement, ...).

Model time is not a CF time: the grid times are the coordinate `model_time` (units "1"). For
tracks with a `Mapping` (physical units) the fields are written in physical units (psi in
m^2/s, u eastward and v northward in m/s; lagda.io.physical) with auxiliary coordinates
`lon(x)`, `lat(y)` (or `x_m(x)`, `y_m(y)` in metres) and `time(model_time)` (a CF time), the
observed fixes as `track_lon`, `track_lat`, and the mapping in the global attributes; the
coefficients stay in model units.

A result of one flow from longitude/latitude tracks speaks its user's coordinates: its fields are on dims
(time, lat, lon) with CF coordinates `time`, `lat`, `lon` (longitudes as the tracks have them, east of 180 only
where the grid crosses the dateline, so that they increase), the means named `u`, `v`, `psi` (the std keep their
names), and the model grid as auxiliary coordinates `x(lon)`, `y(lat)`, `model_time(time)`. `read_result` reads
both layouts.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from lagda.io.netcdf import trajectory_ids, write_netcdf_atomic
from lagda.io.physical import TIME_UNITS, Mapping
from lagda.io.tracks import FILL, Tracks
from lagda.version import __version__
from simulate.schema import CONVENTIONS

FIELD_NAMES = ("psi", "u", "v")
LONG_NAMES = {"psi": "streamfunction psi", "u": "velocity component u = -d psi/dy",
              "v": "velocity component v = d psi/dx"}
TOTAL_NAMES = ("u_total_std", "v_total_std")  # only where the method modelled the velocity the basis leaves out
PHYSICAL = {  # name -> (units, long name, standard name of the mean) in physical units
    "psi": ("m2 s-1", "streamfunction psi on the tangent plane", None),
    "u": ("m s-1", "eastward velocity u", "eastward_sea_water_velocity"),
    "v": ("m s-1", "northward velocity v", "northward_sea_water_velocity"),
}


def write_result(path, result: "Result") -> None:
    """Writes the assimilation result netCDF (module docstring) via a temporary file + rename.

    Parameters
    ----------
    path : str or os.PathLike
        The output file.
    result : Result
        What to write (`lagda.assimilation.fields.posterior_result` makes it from a posterior): coefficients
        `(field, mode)` in model units, fields `(field, model_time, y, x)` in model units, or in physical units
        (psi m^2/s, u, v m/s) when `result.mapping` is set.
    """
    import xarray as xr

    mapping, n_grid = result.mapping, len(result.x)
    one = lambda name: {"units": "1", "long_name": name}
    data = {
        "k1": ("mode", np.asarray(result.k1, np.int32), one("wavenumber k1 (x direction) of the Fourier mode")),
        "k2": ("mode", np.asarray(result.k2, np.int32), one("wavenumber k2 (y direction) of the Fourier mode")),
        "omega": ("mode", np.asarray(result.omega, np.float64), one("frequency omega_k of the Fourier mode")),
        "coef_mean_re": (("field", "mode"), result.coef_mean.real, one("posterior mean of Re c_k")),
        "coef_mean_im": (("field", "mode"), result.coef_mean.imag, one("posterior mean of Im c_k")),
        "coef_std_re": (("field", "mode"), result.coef_std_re, one("posterior standard deviation of Re c_k")),
        "coef_std_im": (("field", "mode"), result.coef_std_im, one("posterior standard deviation of Im c_k")),
    }
    time = result.time_basis
    if time is not None:
        data["degree"] = ("mode", time.degree, {**one("Legendre degree p_k of the mode's temporal factor L_p(s)"),
                                                "window_start": float(time.start), "window_length": float(time.length),
                                                "comment": "s = 2 (t - window_start) / window_length - 1, model time"})
        if time.current is not None:
            data["current"] = ("mode", np.asarray(time.current, np.int8), {
                **one("1 where the mode is the uniform current: u = Re(c L_p), v = Im(c L_p) everywhere"),
                "flag_values": np.array([0, 1], np.int8), "flag_meanings": "periodic_mode uniform_current"})
    grid_dims = ("field", "model_time", "y", "x")
    for name in FIELD_NAMES:
        for stat, word in (("mean", "posterior mean"), ("std", "posterior standard deviation")):
            var_attrs = one(f"{word} of {LONG_NAMES[name]}")
            if mapping is not None:
                units, long_name, standard_name = PHYSICAL[name]
                var_attrs = {"units": units, "long_name": f"{word} of {long_name}"}
                if stat == "mean" and standard_name:
                    var_attrs["standard_name"] = standard_name
            data[f"{name}_{stat}"] = (grid_dims, result.fields[f"{name}_{stat}"], var_attrs)
    for name in TOTAL_NAMES:
        if name in result.fields:
            component = name.split("_")[0]
            what = PHYSICAL[component][1] if mapping is not None else LONG_NAMES[component]
            long_name = f"posterior predictive standard deviation of {what}, the velocity the basis leaves out included"
            data[name] = (grid_dims, result.fields[name], {"units": PHYSICAL[component][0], "long_name": long_name}
                          if mapping is not None else one(long_name))
    if result.candidates is not None:
        cand = np.asarray(result.candidates, np.complex128)
        data["candidate_coef_re"] = (("field", "rank", "mode"), cand.real,
                                     one("Re c_k of the retrieved candidates, best first"))
        data["candidate_coef_im"] = (("field", "rank", "mode"), cand.imag,
                                     one("Im c_k of the retrieved candidates, best first"))
        data["candidate_weight"] = (("field", "rank"), np.asarray(result.candidate_weights, np.float64),
                                    one("weight of the retrieved candidate"))
    if result.seconds is not None:
        data["seconds"] = ("field", np.asarray(result.seconds, np.float64),
                           {"units": "s", "long_name": "wall seconds spent on the field"})
    data.update(_track_variables(result.tracks))
    coords = {"x": ("x", result.x, one("model grid x (domain lengths)")),
              "y": ("y", result.y, one("model grid y (domain lengths)")),
              "model_time": ("model_time", np.asarray(result.time, np.float64), one("nondimensional model time"))}
    if mapping is not None:
        coords.update(_physical_coordinates(mapping, result.x, np.asarray(result.time, np.float64)))
    ds = xr.Dataset(data, coords=coords)
    if "track_lon" in ds:  # CF 5.6: the observed positions point at their true longitude/latitude
        for name in ("track_x", "track_y", "track_time"):
            ds[name].encoding["coordinates"] = "track_lat track_lon"
    ds.attrs = {"Conventions": CONVENTIONS, "title": "lagda assimilation result", "method": result.method,
                "source": f"lagda {__version__}", "lagda_version": __version__, "n_grid": int(n_grid),
                "diagnostics": json.dumps(result.diagnostics or []),
                "history": f"written by lagda.io.results.write_result (lagda {__version__})",
                **({} if mapping is None else mapping.attrs()), **result.attrs}
    if mapping is not None and mapping.coordinates == "lonlat" and ds.sizes["field"] == 1:
        ds = user_layout(ds)
    encoding = {name: {"_FillValue": None} for name in ds.variables}
    encoding.update({name: {"_FillValue": FILL} for name in ("track_x", "track_y", "track_time", "track_lon",
                                                                              "track_lat") if name in ds})
    write_netcdf_atomic(ds, path, encoding)


USER_NAMES = {"u_mean": "u", "v_mean": "v", "psi_mean": "psi"}  # the means' names on (time, lat, lon)


def user_layout(ds):
    """Returns a one-flow lon/lat result dataset on (time, lat, lon) with the means named u, v, psi (module
    docstring); the model grid stays as auxiliary coordinates x(lon), y(lat), model_time(time)."""
    grid = [name for name, var in ds.data_vars.items() if var.dims == ("field", "model_time", "y", "x")]
    ds = ds.swap_dims({"x": "lon", "y": "lat", "model_time": "time"})
    for name in grid:
        ds[name] = ds[name].isel(field=0, drop=True)
    ds = ds.rename({old: new for old, new in USER_NAMES.items() if old in ds})
    for name, axis in (("lon", "X"), ("lat", "Y"), ("time", "T")):
        ds[name].attrs["axis"] = axis
    if np.any(ds["lon"].values >= 180.0):
        ds["lon"].attrs["comment"] = "the grid crosses the dateline: longitudes east of it are given above 180"
    return ds


def mean_velocity(ds, component: str) -> np.ndarray:
    """Returns the posterior-mean velocity `component` ("u" or "v") of flow 0 of an opened result dataset,
    `(time, lat, lon)` (or `(model_time, y, x)`), in either layout (`user_layout` or the per-flow one)."""
    if component in ds.variables and f"{component}_mean" not in ds.variables:
        return ds[component].values
    return ds[f"{component}_mean"].values[0]


def _physical_coordinates(mapping: Mapping, grid, times) -> dict:
    """Returns the auxiliary coordinates of a physical result: lon(x), lat(y) (or metres) and time(model_time)."""
    a, b = mapping.from_model(grid, grid)
    if mapping.coordinates == "lonlat":
        out = {"lon": ("x", a,
                       {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude of the grid"}),
               "lat": ("y", b,
                       {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude of the grid"})}
    else:
        out = {"x_m": ("x", a, {"units": "m", "standard_name": "projection_x_coordinate", "long_name": "grid x"}),
               "y_m": ("y", b, {"units": "m", "standard_name": "projection_y_coordinate", "long_name": "grid y"})}
    out["time"] = ("model_time", mapping.time_from_model(times),
                   {"units": TIME_UNITS, "standard_name": "time", "calendar": "standard",
                    "units_metadata": "leap_seconds: none",
                    "long_name": "time of the grid"})
    return out


def _track_variables(tracks: Tracks | None) -> dict:
    """Returns the result-file variables holding the observed tracks and the truth (if known)."""
    if tracks is None:
        return {}
    one = lambda name: {"units": "1", "long_name": name}
    dims = ("trajectory", "obs")
    out = {
        "track_x": (dims, tracks.positions[..., 0],
                    one("observed drifter position x, unwrapped (model domain lengths)")),
        "track_y": (dims, tracks.positions[..., 1],
                    one("observed drifter position y, unwrapped (model domain lengths)")),
        "track_time": (dims, tracks.times, one("observation time (nondimensional model time)")),
        "track_field": ("trajectory", np.asarray(tracks.field, np.int64), one("field sampled by the drifter")),
        "track_id": ("trajectory", _id_values(tracks.trajectory_id), {"long_name": "drifter identifier"}),
    }
    mapping = tracks.mapping
    if mapping is not None and mapping.coordinates == "lonlat":
        lon, lat = mapping.from_model(tracks.positions[..., 0], tracks.positions[..., 1])
        out["track_lon"] = (dims, lon, {"units": "degrees_east", "standard_name": "longitude",
                                        "long_name": "observed drifter longitude"})
        out["track_lat"] = (dims, lat, {"units": "degrees_north", "standard_name": "latitude",
                                        "long_name": "observed drifter latitude"})
    if tracks.release is not None:
        out["track_x0"] = ("trajectory", tracks.release[:, 0], one("drifter release position x at t = 0"))
        out["track_y0"] = ("trajectory", tracks.release[:, 1], one("drifter release position y at t = 0"))
    if tracks.true_coef is not None:
        out["true_coef_re"] = (("field", "mode"), tracks.true_coef.real, one("real part of the true coefficient c_k"))
        out["true_coef_im"] = (("field", "mode"), tracks.true_coef.imag,
                               one("imaginary part of the true coefficient c_k"))
    return out


def _id_values(ids) -> np.ndarray:
    """Returns ids as int64, or as an object array of str (netCDF variable-length strings)."""
    ids = np.asarray(ids)
    return ids.astype(np.int64) if ids.dtype.kind in "iu" else ids.astype(str).astype(object)


@dataclasses.dataclass(frozen=True)
class Result:
    """An assimilation result file's contents (see the module docstring for the variables).

    `fields` are in the file's units: model units, or physical ones when `mapping` is set;
    `x`, `y` are the model grid and `time` the model times.
    """

    k1: np.ndarray
    k2: np.ndarray
    omega: np.ndarray
    coef_mean: np.ndarray  # complex (field, mode)
    coef_std_re: np.ndarray
    coef_std_im: np.ndarray
    fields: dict  # {psi_mean, psi_std, u_mean, ...}: (field, time, y, x)
    x: np.ndarray
    y: np.ndarray
    time: np.ndarray
    method: str
    attrs: dict
    candidates: np.ndarray | None = None  # complex (field, rank, mode)
    candidate_weights: np.ndarray | None = None
    seconds: np.ndarray | None = None
    tracks: Tracks | None = None
    true_coef: np.ndarray | None = None
    diagnostics: list | None = None  # per field, the method's decisions (a dict each)
    mapping: Mapping | None = None  # physical units (lagda.io.physical), else None
    time_basis: object | None = None  # simulate.flow.TimeBasis of the modes (file: `degree` and the window), or None


def physical_axes(result) -> tuple[np.ndarray, np.ndarray]:
    """Returns a physical result's grid as longitudes `(x,)` and latitudes `(y,)` in degrees (or x, y metres),
    through its `mapping`."""
    x, y = np.asarray(result.x, np.float64), np.asarray(result.y, np.float64)
    return result.mapping.from_model(x, np.zeros(len(x)))[0], result.mapping.from_model(np.zeros(len(y)), y)[1]


def read_result(path) -> Result:
    """Returns the contents of an assimilation result file written by `write_result`, of any format version.

    Parameters
    ----------
    path : str or os.PathLike
        A result file (either layout of the module docstring).

    Returns
    -------
    Result
        Fields `(field, model_time, y, x)` in the file's units (model units, or physical ones when
        `Result.mapping` is set), the model grid `x`, `y` and times `time`, coefficients `(field, mode)`.

    Raises
    ------
    FileNotFoundError
        If `path` does not exist.
    ValueError
        One line, if the file is not a lagda assimilation result.
    """

    import xarray as xr

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such result file: {path}")
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False).load()
    except Exception:
        raise ValueError(f"{path} is not a netCDF file") from None
    if "u" in ds.variables and "u_mean" not in ds.variables:  # user_layout: back to (field, model_time, y, x)
        ds = ds.rename({new: old for old, new in USER_NAMES.items() if new in ds.variables})
        for name, var in list(ds.data_vars.items()):
            if var.dims == ("time", "lat", "lon"):
                ds[name] = var.expand_dims("field")
        ds = ds.swap_dims({"lon": "x", "lat": "y", "time": "model_time"})
    missing = [n for n in ("k1", "coef_mean_re", "coef_std_re", "psi_mean", "u_std") if n not in ds.variables]
    if missing:
        raise ValueError(f"{path} is not a lagda assimilation result (lacks {missing})")
    try:
        mapping = Mapping.from_attrs(ds.attrs)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    get = lambda name: ds[name].values if name in ds.variables else None
    cplx = lambda base: None if get(base + "_re") is None else get(base + "_re") + 1j * get(base + "_im")
    tracks = None
    if "track_x" in ds.variables:
        release = None if get("track_x0") is None else np.stack([get("track_x0"), get("track_y0")], axis=-1)
        tracks = Tracks(np.stack([get("track_x"), get("track_y")], axis=-1), get("track_time"), get("track_field"),
                        trajectory_ids(get("track_id")), true_coef=cplx("true_coef"), k1=get("k1"), k2=get("k2"),
                        omega=get("omega"), release=release, mapping=mapping)
    fields = {f"{n}_{s}": get(f"{n}_{s}") for n in FIELD_NAMES for s in ("mean", "std")}
    fields |= {name: get(name) for name in TOTAL_NAMES if name in ds.variables}
    times = get("model_time") if "model_time" in ds.variables else get("time")  # before format 2: time(time), units "1"
    time_basis = None
    if "degree" in ds.variables:
        from simulate.flow import time_basis as make_time_basis

        attrs = ds["degree"].attrs
        time_basis = make_time_basis(get("degree"), float(attrs["window_start"]), float(attrs["window_length"]),
                                     None if get("current") is None else get("current").astype(bool))
    return Result(get("k1"), get("k2"), get("omega"), cplx("coef_mean"), get("coef_std_re"), get("coef_std_im"), fields,
                  get("x"), get("y"), times, str(ds.attrs.get("method", "")), dict(ds.attrs),
                  cplx("candidate_coef"), get("candidate_weight"), get("seconds"), tracks, cplx("true_coef"),
                  json.loads(ds.attrs["diagnostics"]) if "diagnostics" in ds.attrs else None, mapping, time_basis)
