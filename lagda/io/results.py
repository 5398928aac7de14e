"""Assimilation results: posterior fields on a grid, and the result netCDF file.

The file has dims `field`, `mode`, `rank`, `model_time`, `y`, `x`: the model's modes `k1`, `k2`,
`omega(mode)`; the posterior coefficient mean and std `coef_mean_re/_im`, `coef_std_re/_im
(field, mode)`; for retrieval `candidate_coef_re/_im (field, rank, mode)` and `candidate_weight
(field, rank)`; and the posterior mean and std of psi, u, v on the regular grid x_i = i / n_grid
`(field, model_time, y, x)`. When the observed tracks are given they are stored too (`track_x`,
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
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.posterior import Posterior
from lagda.io.netcdf import lagda_version, trajectory_ids, write_netcdf_atomic
from lagda.io.physical import TIME_UNITS, Mapping
from lagda.io.tracks import FILL, Tracks
from simulate.schema import CONVENTIONS
from simulate.flow import grid_fields

FIELD_NAMES = ("psi", "u", "v")
LONG_NAMES = {"psi": "streamfunction psi", "u": "velocity component u = -d psi/dy", "v": "velocity component v = d psi/dx"}
PHYSICAL = {  # name -> (units, long name, standard name of the mean) in physical units
    "psi": ("m2 s-1", "streamfunction psi on the tangent plane", None),
    "u": ("m s-1", "eastward velocity u", "eastward_sea_water_velocity"),
    "v": ("m s-1", "northward velocity v", "northward_sea_water_velocity"),
}


_grid = jax.jit(grid_fields, static_argnames="n_grid")


@functools.partial(jax.jit, static_argnames="n_grid")
def _moments_batch(dcoef, weights, k1, k2, omega, times, n_grid, time=None):
    """Returns sum_m w_m f(dcoef_m)^2 for f = psi, u, v: each `(time, y, x)`."""
    return tuple(jnp.einsum("m,mtyx->tyx", weights, f**2) for f in grid_fields(dcoef, k1, k2, omega, times, n_grid, time))


def grid_posterior(posterior: Posterior, k1, k2, omega, times, n_grid: int = 32, batch: int = 64, time=None) -> dict:
    """Returns posterior mean and std of psi, u, v on the grid: `{psi_mean, psi_std, ...}`, each `(field, time, y, x)`.

    psi, u, v are linear in c, so the mean field is the field of the mean coefficient and the
    variance is sum_m w_m f(c_m - mean)^2; members are processed `batch` at a time (padded with
    zero weight, so one compilation serves all batches) to bound memory.

    Args:
        posterior: weighted samples `(field, member, mode)`.
        k1, k2: integer `(mode,)`; omega `(mode,)`; times `(time,)`; n_grid: points per side;
        time: the model's `simulate.flow.TimeBasis`, or None.
    """
    k1, k2 = jnp.asarray(k1), jnp.asarray(k2)
    omega, times = jnp.asarray(omega, jnp.float64), jnp.asarray(times, jnp.float64)
    mean = posterior.mean
    means = [np.asarray(f) for f in _grid(jnp.asarray(mean), k1, k2, omega, times, n_grid=n_grid, time=time)]
    out = {f"{name}_mean": m for name, m in zip(FIELD_NAMES, means)}
    samples, weights = np.asarray(posterior.samples, np.complex128), np.asarray(posterior.weights, np.float64)
    n_member = samples.shape[1]
    size = min(batch, n_member)
    n_pad = -n_member % size
    dev = np.concatenate([samples - mean[:, None, :], np.zeros((samples.shape[0], n_pad, samples.shape[2]))], axis=1)
    w = np.concatenate([weights, np.zeros((weights.shape[0], n_pad))], axis=1)
    var = [np.zeros_like(m) for m in means]
    for f in range(samples.shape[0]):
        for start in range(0, n_member + n_pad, size):
            parts = _moments_batch(jnp.asarray(dev[f, start : start + size]), jnp.asarray(w[f, start : start + size]),
                                   k1, k2, omega, times, n_grid, time)
            for v, part in zip(var, parts):
                v[f] += np.asarray(part)
    out.update({f"{name}_std": np.sqrt(np.maximum(v, 0.0)) for name, v in zip(FIELD_NAMES, var)})
    return out


def physical_fields(fields: dict, mapping: Mapping, y) -> dict:
    """Returns gridded model fields `{psi_mean, u_std, ...}` `(..., y, x)` in physical units (lagda.io.physical).

    psi times L_x L_y / T (m^2/s); u times L_x / T cos(lat) / cos(lat_c) (eastward, m/s); v times
    L_y / T (northward, m/s); a std scales like its mean.

    Args:
        fields: arrays whose last two axes are (y, x) of the model grid; mapping: the track mapping;
        y: model grid y `(y,)` in domain lengths.
    """
    lat = mapping.from_model(np.zeros_like(np.asarray(y, np.float64)), y)[1]
    fu, fv = mapping.velocity_factors(lat)
    factor = {"psi": mapping.psi_factor, "u": fu[:, None], "v": fv[:, None]}
    return {key: np.asarray(value) * factor[key.split("_")[0]] for key, value in fields.items()}


def write_result(path, posterior: Posterior, k1, k2, omega, times, n_grid: int = 32, tracks: Tracks | None = None,
                 attrs: dict | None = None, time=None) -> None:
    """Writes the assimilation result netCDF (module docstring) via a temporary file + rename.

    Args:
        path: output file.
        posterior: the DA method's posterior.
        k1, k2, omega: the model's modes `(mode,)`; times `(time,)` model times at which fields are gridded.
        n_grid: grid points per side.
        tracks: the observed tracks (stored for plots and scores), optional; with a mapping, the
            fields are written in physical units.
        attrs: extra global attributes (e.g. the resolved AssimConfig, the model run).
        time: the model's `simulate.flow.TimeBasis` (stored as `degree` and the window's attributes), or None.
    Raises:
        ValueError: if the posterior's mode count differs from `k1`'s.
    """
    import xarray as xr

    if np.shape(posterior.samples)[2] != np.size(k1):
        raise ValueError(f"posterior has {np.shape(posterior.samples)[2]} modes but the model has {np.size(k1)}")
    mapping = None if tracks is None else tracks.mapping
    one = lambda name: {"units": "1", "long_name": name}
    grid = np.arange(n_grid) / n_grid
    mean, fields = posterior.mean, grid_posterior(posterior, k1, k2, omega, times, n_grid, time=time)
    data = {
        "k1": ("mode", np.asarray(k1, np.int32), one("wavenumber k1 (x direction) of the Fourier mode")),
        "k2": ("mode", np.asarray(k2, np.int32), one("wavenumber k2 (y direction) of the Fourier mode")),
        "omega": ("mode", np.asarray(omega, np.float64), one("frequency omega_k of the Fourier mode")),
        "coef_mean_re": (("field", "mode"), mean.real, one("posterior mean of Re c_k")),
        "coef_mean_im": (("field", "mode"), mean.imag, one("posterior mean of Im c_k")),
        "coef_std_re": (("field", "mode"), posterior.std_re, one("posterior standard deviation of Re c_k")),
        "coef_std_im": (("field", "mode"), posterior.std_im, one("posterior standard deviation of Im c_k")),
    }
    if time is not None:
        data["degree"] = ("mode", time.degree, {**one("Legendre degree p_k of the mode's temporal factor L_p(s)"),
                                                "window_start": float(time.start), "window_length": float(time.length),
                                                "comment": "s = 2 (t - window_start) / window_length - 1, model time"})
    if mapping is not None:
        fields = physical_fields(fields, mapping, grid)
    grid_dims = ("field", "model_time", "y", "x")
    for name in FIELD_NAMES:
        for stat, word in (("mean", "posterior mean"), ("std", "posterior standard deviation")):
            var_attrs = one(f"{word} of {LONG_NAMES[name]}")
            if mapping is not None:
                units, long_name, standard_name = PHYSICAL[name]
                var_attrs = {"units": units, "long_name": f"{word} of {long_name}"}
                if stat == "mean" and standard_name:
                    var_attrs["standard_name"] = standard_name
            data[f"{name}_{stat}"] = (grid_dims, fields[f"{name}_{stat}"], var_attrs)
    if posterior.candidates is not None:
        cand = np.asarray(posterior.candidates, np.complex128)
        data["candidate_coef_re"] = (("field", "rank", "mode"), cand.real, one("Re c_k of the retrieved candidates, best first"))
        data["candidate_coef_im"] = (("field", "rank", "mode"), cand.imag, one("Im c_k of the retrieved candidates, best first"))
        data["candidate_weight"] = (("field", "rank"), np.asarray(posterior.candidate_weights, np.float64),
                                    one("weight of the retrieved candidate"))
    if posterior.seconds is not None:
        data["seconds"] = ("field", np.asarray(posterior.seconds, np.float64), {"units": "s", "long_name": "wall seconds spent on the field"})
    data.update(_track_variables(tracks))
    coords = {"x": ("x", grid, one("model grid x (domain lengths)")),
              "y": ("y", grid, one("model grid y (domain lengths)")),
              "model_time": ("model_time", np.asarray(times, np.float64), one("nondimensional model time"))}
    if mapping is not None:
        coords.update(_physical_coordinates(mapping, grid, np.asarray(times, np.float64)))
    ds = xr.Dataset(data, coords=coords)
    if "track_lon" in ds:  # CF 5.6: the observed positions point at their true longitude/latitude
        for name in ("track_x", "track_y", "track_time"):
            ds[name].encoding["coordinates"] = "track_lat track_lon"
    ds.attrs = {"Conventions": CONVENTIONS, "title": "lagda assimilation result", "method": posterior.method,
                "source": f"lagda {lagda_version()}", "lagda_version": lagda_version(), "n_grid": int(n_grid),
                "diagnostics": json.dumps(posterior.diagnostics()),
                "history": f"written by lagda.io.results.write_result (lagda {lagda_version()})",
                **({} if mapping is None else mapping.attrs()), **(attrs or {})}
    encoding = {name: {"_FillValue": None} for name in ds.variables}
    encoding.update({name: {"_FillValue": FILL} for name in ("track_x", "track_y", "track_time", "track_lon",
                                                                              "track_lat") if name in ds})
    write_netcdf_atomic(ds, path, encoding)


def _physical_coordinates(mapping: Mapping, grid, times) -> dict:
    """Returns the auxiliary coordinates of a physical result: lon(x), lat(y) (or metres) and time(model_time)."""
    a, b = mapping.from_model(grid, grid)
    if mapping.coordinates == "lonlat":
        out = {"lon": ("x", a, {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude of the grid"}),
               "lat": ("y", b, {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude of the grid"})}
    else:
        out = {"x_m": ("x", a, {"units": "m", "standard_name": "projection_x_coordinate", "long_name": "grid x"}),
               "y_m": ("y", b, {"units": "m", "standard_name": "projection_y_coordinate", "long_name": "grid y"})}
    out["time"] = ("model_time", mapping.time_from_model(times),
                   {"units": TIME_UNITS, "standard_name": "time", "calendar": "standard", "units_metadata": "leap_seconds: none",
                    "long_name": "time of the grid"})
    return out


def _track_variables(tracks: Tracks | None) -> dict:
    """Returns the result-file variables holding the observed tracks and the truth (if known)."""
    if tracks is None:
        return {}
    one = lambda name: {"units": "1", "long_name": name}
    dims = ("trajectory", "obs")
    out = {
        "track_x": (dims, tracks.positions[..., 0], one("observed drifter position x, unwrapped (model domain lengths)")),
        "track_y": (dims, tracks.positions[..., 1], one("observed drifter position y, unwrapped (model domain lengths)")),
        "track_time": (dims, tracks.times, one("observation time (nondimensional model time)")),
        "track_field": ("trajectory", np.asarray(tracks.field, np.int64), one("field sampled by the drifter")),
        "track_id": ("trajectory", _id_values(tracks.trajectory_id), {"long_name": "drifter identifier"}),
    }
    mapping = tracks.mapping
    if mapping is not None and mapping.coordinates == "lonlat":
        lon, lat = mapping.from_model(tracks.positions[..., 0], tracks.positions[..., 1])
        out["track_lon"] = (dims, lon, {"units": "degrees_east", "standard_name": "longitude", "long_name": "observed drifter longitude"})
        out["track_lat"] = (dims, lat, {"units": "degrees_north", "standard_name": "latitude", "long_name": "observed drifter latitude"})
    if tracks.release is not None:
        out["track_x0"] = ("trajectory", tracks.release[:, 0], one("drifter release position x at t = 0"))
        out["track_y0"] = ("trajectory", tracks.release[:, 1], one("drifter release position y at t = 0"))
    if tracks.true_coef is not None:
        out["true_coef_re"] = (("field", "mode"), tracks.true_coef.real, one("real part of the true coefficient c_k"))
        out["true_coef_im"] = (("field", "mode"), tracks.true_coef.imag, one("imaginary part of the true coefficient c_k"))
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


def read_result(path) -> Result:
    """Returns the contents of an assimilation result file written by `write_result` (also older ones).

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: one line, if the file is not a lagda assimilation result.
    """

    import xarray as xr

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such result file: {path}")
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False).load()
    except Exception:
        raise ValueError(f"{path} is not a netCDF file") from None
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
    times = get("model_time") if "model_time" in ds.variables else get("time")  # before format 2: time(time), units "1"
    return Result(get("k1"), get("k2"), get("omega"), cplx("coef_mean"), get("coef_std_re"), get("coef_std_im"), fields,
                  get("x"), get("y"), times, str(ds.attrs.get("method", "")), dict(ds.attrs),
                  cplx("candidate_coef"), get("candidate_weight"), get("seconds"), tracks, cplx("true_coef"),
                  json.loads(ds.attrs["diagnostics"]) if "diagnostics" in ds.attrs else None, mapping)
