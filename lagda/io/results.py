"""Assimilation results: posterior fields on a grid, and the result netCDF file.

The file has dims `field`, `mode`, `rank`, `time`, `y`, `x`: the model's modes `k1`, `k2`, `omega(mode)`; the posterior coefficient mean and std
`coef_mean_re/_im`, `coef_std_re/_im (field, mode)`; for retrieval `candidate_coef_re/_im
(field, rank, mode)` and `candidate_weight (field, rank)`; and the posterior mean and std of
psi, u, v on the regular grid x_i = i / n_grid `(field, time, y, x)`. When the observed tracks
are given they are stored too (`track_x`, `track_y`, `track_time (trajectory, obs)`,
`track_field (trajectory)`), and so is the truth when the tracks know it. The global attribute
`diagnostics` holds, as a JSON list with one object per field, what the method decided
(Posterior.diagnostics: chosen lag, noise estimate, prior, refinement, ...).
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
from lagda.io.tracks import Tracks
from simulate.flow import grid_fields

FIELD_NAMES = ("psi", "u", "v")
LONG_NAMES = {"psi": "streamfunction psi", "u": "velocity component u = -d psi/dy", "v": "velocity component v = d psi/dx"}


_grid = jax.jit(grid_fields, static_argnames="n_grid")


@functools.partial(jax.jit, static_argnames="n_grid")
def _moments_batch(dcoef, weights, k1, k2, omega, times, n_grid):
    """Returns sum_m w_m f(dcoef_m)^2 for f = psi, u, v: each `(time, y, x)`."""
    return tuple(jnp.einsum("m,mtyx->tyx", weights, f**2) for f in grid_fields(dcoef, k1, k2, omega, times, n_grid))


def grid_posterior(posterior: Posterior, k1, k2, omega, times, n_grid: int = 32, batch: int = 64) -> dict:
    """Returns posterior mean and std of psi, u, v on the grid: `{psi_mean, psi_std, ...}`, each `(field, time, y, x)`.

    psi, u, v are linear in c, so the mean field is the field of the mean coefficient and the
    variance is sum_m w_m f(c_m - mean)^2; members are processed `batch` at a time (padded with
    zero weight, so one compilation serves all batches) to bound memory.

    Args:
        posterior: weighted samples `(field, member, mode)`.
        k1, k2: integer `(mode,)`; omega `(mode,)`; times `(time,)`; n_grid: points per side.
    """
    k1, k2 = jnp.asarray(k1), jnp.asarray(k2)
    omega, times = jnp.asarray(omega, jnp.float64), jnp.asarray(times, jnp.float64)
    mean = posterior.mean
    means = [np.asarray(f) for f in _grid(jnp.asarray(mean), k1, k2, omega, times, n_grid=n_grid)]
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
                                   k1, k2, omega, times, n_grid)
            for v, part in zip(var, parts):
                v[f] += np.asarray(part)
    out.update({f"{name}_std": np.sqrt(np.maximum(v, 0.0)) for name, v in zip(FIELD_NAMES, var)})
    return out


def write_result(path, posterior: Posterior, k1, k2, omega, times, n_grid: int = 32, tracks: Tracks | None = None,
                 attrs: dict | None = None) -> None:
    """Writes the assimilation result netCDF (module docstring) via a temporary file + rename.

    Args:
        path: output file.
        posterior: the DA method's posterior.
        k1, k2, omega: the model's modes `(mode,)`; times `(time,)` at which fields are gridded.
        n_grid: grid points per side.
        tracks: the observed tracks (stored for plots and scores), optional.
        attrs: extra global attributes (e.g. the resolved AssimConfig, the model run).
    Raises:
        ValueError: if the posterior's mode count differs from `k1`'s.
    """
    import xarray as xr

    if np.shape(posterior.samples)[2] != np.size(k1):
        raise ValueError(f"posterior has {np.shape(posterior.samples)[2]} modes but the model has {np.size(k1)}")
    one = lambda name: {"units": "1", "long_name": name}
    grid = np.arange(n_grid) / n_grid
    mean, fields = posterior.mean, grid_posterior(posterior, k1, k2, omega, times, n_grid)
    data = {
        "k1": ("mode", np.asarray(k1, np.int32), one("wavenumber k1 (x direction) of the Fourier mode")),
        "k2": ("mode", np.asarray(k2, np.int32), one("wavenumber k2 (y direction) of the Fourier mode")),
        "omega": ("mode", np.asarray(omega, np.float64), one("frequency omega_k of the Fourier mode")),
        "coef_mean_re": (("field", "mode"), mean.real, one("posterior mean of Re c_k")),
        "coef_mean_im": (("field", "mode"), mean.imag, one("posterior mean of Im c_k")),
        "coef_std_re": (("field", "mode"), posterior.std_re, one("posterior standard deviation of Re c_k")),
        "coef_std_im": (("field", "mode"), posterior.std_im, one("posterior standard deviation of Im c_k")),
    }
    for name in FIELD_NAMES:
        for stat, word in (("mean", "posterior mean"), ("std", "posterior standard deviation")):
            data[f"{name}_{stat}"] = (("field", "time", "y", "x"), fields[f"{name}_{stat}"], one(f"{word} of {LONG_NAMES[name]}"))
    if posterior.candidates is not None:
        cand = np.asarray(posterior.candidates, np.complex128)
        data["candidate_coef_re"] = (("field", "rank", "mode"), cand.real, one("Re c_k of the retrieved candidates, best first"))
        data["candidate_coef_im"] = (("field", "rank", "mode"), cand.imag, one("Im c_k of the retrieved candidates, best first"))
        data["candidate_weight"] = (("field", "rank"), np.asarray(posterior.candidate_weights, np.float64),
                                    one("weight of the retrieved candidate"))
    if posterior.seconds is not None:
        data["seconds"] = ("field", np.asarray(posterior.seconds, np.float64), {"units": "s", "long_name": "wall seconds spent on the field"})
    data.update(_track_variables(tracks))
    coords = {"x": ("x", grid, one("grid x (domain lengths)") | {"axis": "X"}),
              "y": ("y", grid, one("grid y (domain lengths)") | {"axis": "Y"}),
              "time": ("time", np.asarray(times, np.float64), one("nondimensional time") | {"axis": "T"})}
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = {"Conventions": "CF-1.10", "title": "lagda assimilation result", "method": posterior.method,
                "lagda_version": lagda_version(), "n_grid": int(n_grid), "diagnostics": json.dumps(posterior.diagnostics()),
                "history": f"written by lagda.io.results.write_result (lagda {lagda_version()})", **(attrs or {})}
    encoding = {name: {"_FillValue": None} for name in ds.variables}
    encoding.update({name: {"_FillValue": 9.969209968386869e36} for name in ("track_x", "track_y", "track_time") if name in ds})
    write_netcdf_atomic(ds, path, encoding)


def _track_variables(tracks: Tracks | None) -> dict:
    """Returns the result-file variables holding the observed tracks and the truth (if known)."""
    if tracks is None:
        return {}
    one = lambda name: {"units": "1", "long_name": name}
    dims = ("trajectory", "obs")
    out = {
        "track_x": (dims, tracks.positions[..., 0], one("observed drifter position x, unwrapped") | {"coordinates": "track_time"}),
        "track_y": (dims, tracks.positions[..., 1], one("observed drifter position y, unwrapped") | {"coordinates": "track_time"}),
        "track_time": (dims, tracks.times, one("observation time")),
        "track_field": ("trajectory", np.asarray(tracks.field, np.int64), one("field sampled by the drifter")),
        "track_id": ("trajectory", _id_values(tracks.trajectory_id), {"long_name": "drifter identifier", "cf_role": "trajectory_id"}),
    }
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
    """An assimilation result file's contents (see the module docstring for the variables)."""

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


def read_result(path) -> Result:
    """Returns the contents of an assimilation result file written by `write_result`.

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
    get = lambda name: ds[name].values if name in ds.variables else None
    cplx = lambda base: None if get(base + "_re") is None else get(base + "_re") + 1j * get(base + "_im")
    tracks = None
    if "track_x" in ds.variables:
        release = None if get("track_x0") is None else np.stack([get("track_x0"), get("track_y0")], axis=-1)
        tracks = Tracks(np.stack([get("track_x"), get("track_y")], axis=-1), get("track_time"), get("track_field"),
                        trajectory_ids(get("track_id")), true_coef=cplx("true_coef"), k1=get("k1"), k2=get("k2"),
                        omega=get("omega"), release=release)
    fields = {f"{n}_{s}": get(f"{n}_{s}") for n in FIELD_NAMES for s in ("mean", "std")}
    return Result(get("k1"), get("k2"), get("omega"), cplx("coef_mean"), get("coef_std_re"), get("coef_std_im"), fields,
                  get("x"), get("y"), get("time"), str(ds.attrs.get("method", "")), dict(ds.attrs),
                  cplx("candidate_coef"), get("candidate_weight"), get("seconds"), tracks, cplx("true_coef"),
                  json.loads(ds.attrs["diagnostics"]) if "diagnostics" in ds.attrs else None)
