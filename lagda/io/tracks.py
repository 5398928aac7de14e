"""Observed drifter tracks: the `Tracks` container and track-file readers/writers.

Track files (docs/design.md, "Track files") are strict CF discrete-sampling-geometry trajectory files:
`featureType = "trajectory"`, dims `trajectory`/`obs`, a `cf_role = "trajectory_id"` variable,
per-trajectory `time(trajectory, obs)` padded with `_FillValue`. Readers also accept the
orthogonal and contiguous-ragged CF layouts, a lagda dataset and CSV (id,time,x,y[,field]).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import warnings

import numpy as np

from lagda.io.netcdf import lagda_version, trajectory_ids, write_netcdf_atomic


@dataclasses.dataclass(frozen=True)
class Tracks:
    """Observed drifter tracks, nondimensional torus units.

    Attributes:
        positions: float64 `(trajectory, obs, 2)` unwrapped x, y; NaN where missing.
        times: float64 `(trajectory, obs)`; NaN where missing (padding).
        field: int64 `(trajectory,)` which flow each track samples (0..n_field-1).
        trajectory_id: `(trajectory,)` ids as read (str or int).
        true_coef: complex128 `(field, mode)` when known (lagda dataset).
        k1, k2: int `(mode,)` wavevectors when the file says (lagda dataset).
        omega: float `(mode,)` frequencies when the file says.
        release: float64 `(trajectory, 2)` release point at t = 0 if known.
    """

    positions: np.ndarray
    times: np.ndarray
    field: np.ndarray
    trajectory_id: np.ndarray
    true_coef: np.ndarray | None = None
    k1: np.ndarray | None = None
    k2: np.ndarray | None = None
    omega: np.ndarray | None = None
    release: np.ndarray | None = None

    def __post_init__(self):
        p, t = np.shape(self.positions), np.shape(self.times)
        if len(p) != 3 or p[2] != 2 or t != p[:2] or np.shape(self.field) != p[:1] or np.shape(self.trajectory_id) != p[:1]:
            raise ValueError(
                f"Tracks: positions {p} must be (trajectory, obs, 2), times {t} (trajectory, obs), "
                f"field {np.shape(self.field)} and trajectory_id {np.shape(self.trajectory_id)} (trajectory,)"
            )

    @property
    def n_field(self) -> int:
        """Returns the number of fields (flows), max(field) + 1."""
        return int(np.max(self.field)) + 1 if len(self.field) else 0

    @property
    def n_trajectory(self) -> int:
        """Returns the number of trajectories."""
        return int(np.shape(self.positions)[0])

    def for_field(self, f: int) -> "Tracks":
        """Returns the trajectories of field `f` as a one-field `Tracks` (field index 0)."""
        sel = np.flatnonzero(np.asarray(self.field) == f)
        return dataclasses.replace(
            self,
            positions=self.positions[sel],
            times=self.times[sel],
            field=np.zeros(len(sel), dtype=np.int64),
            trajectory_id=self.trajectory_id[sel],
            true_coef=None if self.true_coef is None else self.true_coef[f : f + 1],
            release=None if self.release is None else self.release[sel],
        )


FILL = 9.969209968386869e36  # netCDF's default double fill value (NC_FILL_DOUBLE)
TRACK_FORMAT_VERSION = "1"
_NOT_TRACKS = (
    "is not a track file: expected a CF trajectory file (featureType = \"trajectory\"), "
    "a lagda dataset (lagda_schema_version attribute) or a CSV with header id,time,x,y[,field]"
)


def _pack(times, positions, ids, field, release=None, **truth) -> Tracks:
    """Returns canonical `Tracks` from per-trajectory lists of times `(n,)` and positions `(n, 2)`.

    Canonical form: observations with a non-finite time are dropped, leading and trailing
    observations without a position are dropped (the drifter was not yet / no longer at sea),
    interior missing positions stay NaN; each track is left-aligned and NaN-padded to the
    longest. Field numbers are renumbered 0..n_field-1 in sorted order.

    Raises:
        ValueError: if a track's times are not strictly increasing.
    """
    kept_t, kept_p = [], []
    for i, (t, p) in enumerate(zip(times, positions)):
        t, p = np.asarray(t, np.float64), np.asarray(p, np.float64).reshape(-1, 2)
        ok = np.isfinite(t)
        t, p = t[ok], p[ok]
        valid = np.flatnonzero(np.all(np.isfinite(p), axis=1))
        t, p = (t[valid[0] : valid[-1] + 1], p[valid[0] : valid[-1] + 1]) if len(valid) else (t[:0], p[:0])
        if np.any(np.diff(t) <= 0):
            raise ValueError(f"trajectory {ids[i]!r}: times are not strictly increasing")
        kept_t.append(t)
        kept_p.append(p)
    n_obs = max((len(t) for t in kept_t), default=0)
    out_t = np.full((len(kept_t), n_obs), np.nan)
    out_p = np.full((len(kept_t), n_obs, 2), np.nan)
    for i, (t, p) in enumerate(zip(kept_t, kept_p)):
        out_t[i, : len(t)], out_p[i, : len(t)] = t, p
    field = np.unique(np.asarray(field, np.int64), return_inverse=True)[1].astype(np.int64).ravel()
    rel = None if release is None else np.asarray(release, np.float64).reshape(-1, 2)
    return Tracks(out_p, out_t, field, trajectory_ids(ids), release=rel, **truth)


def write_tracks(tracks: Tracks, path, attrs: dict | None = None) -> None:
    """Writes `tracks` as a strict CF DSG trajectory file (incomplete multidimensional array).

    Dims `trajectory`/`obs`; `trajectory(trajectory)` carries `cf_role = "trajectory_id"`;
    `time`, `x`, `y` `(trajectory, obs)` are padded with `_FillValue`; `field(trajectory)`
    groups drifters of one flow; release points and, when known, the true coefficients and the
    mode set are stored too. Written to a temporary name and renamed.
    """
    import xarray as xr

    ids = np.asarray(tracks.trajectory_id)
    ids = ids.astype(np.int64) if ids.dtype.kind in "iu" else ids.astype(str).astype(object)
    one = lambda name, extra=None: {"units": "1", "long_name": name, **(extra or {})}
    dims2 = ("trajectory", "obs")
    ds = xr.Dataset(
        {
            "x": (dims2, tracks.positions[..., 0], one("drifter position x, unwrapped (domain lengths)", {"axis": "X"})),
            "y": (dims2, tracks.positions[..., 1], one("drifter position y, unwrapped (domain lengths)", {"axis": "Y"})),
            "field": ("trajectory", np.asarray(tracks.field, np.int64), one("index of the flow field sampled by the drifter")),
        },
        coords={
            "trajectory": ("trajectory", ids, {"cf_role": "trajectory_id", "long_name": "drifter identifier"}),
            "time": (dims2, tracks.times, one("nondimensional time", {"axis": "T"})),
        },
    )
    if tracks.release is not None:
        for j, name in enumerate("xy"):
            ds[f"{name}0"] = ("trajectory", tracks.release[:, j], one(f"drifter release position {name} at t = 0"))
    _add_truth(ds, tracks)
    ds.attrs = {
        "Conventions": "CF-1.10", "featureType": "trajectory", "title": "lagda drifter tracks",
        "lagda_track_format_version": TRACK_FORMAT_VERSION,
        "history": f"written by lagda.io.tracks.write_tracks (lagda {lagda_version()})", **(attrs or {}),
    }
    encoding = {name: {"_FillValue": FILL} for name in ("x", "y", "time")}
    encoding.update({name: {"_FillValue": None} for name in ds.variables if name not in encoding})
    for name in ("x", "y"):
        ds[name].encoding["coordinates"] = "time trajectory"
    write_netcdf_atomic(ds, path, encoding)


def _add_truth(ds, tracks: Tracks) -> None:
    """Adds the mode set and true coefficients of `tracks` (when known) to `ds` in place.

    The truth's field dimension is named `flow`, since the DSG variable `field(trajectory)`
    already holds the name `field`.
    """
    one = lambda name: {"units": "1", "long_name": name}
    for name, values, dtype in (("k1", tracks.k1, np.int32), ("k2", tracks.k2, np.int32), ("omega", tracks.omega, np.float64)):
        if values is not None:
            ds[name] = ("mode", np.asarray(values, dtype), one(f"Fourier mode {name} of the flow model"))
    if tracks.true_coef is not None:
        c = np.asarray(tracks.true_coef, np.complex128)
        ds["true_coef_re"] = (("flow", "mode"), c.real, one("real part of the true coefficient c_k"))
        ds["true_coef_im"] = (("flow", "mode"), c.imag, one("imaginary part of the true coefficient c_k"))


def read_tracks(path) -> Tracks:
    """Returns the tracks of a file, detecting its layout from its attributes.

    Layouts: a lagda dataset (global attribute `lagda_schema_version`), a CF DSG trajectory
    file (`featureType = "trajectory"`; Parcels' `feature_type` is accepted with a warning)
    as incomplete multidimensional array (time(trajectory, obs)), orthogonal array (time(obs))
    or contiguous ragged array (a count variable with `sample_dimension`, e.g. clouddrift's
    `rowsize`), or a CSV file with header id,time,x,y[,field].

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: one line, if the file is none of these or is inconsistent.
    """

    import xarray as xr

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such track file: {path}")
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if not head.startswith((b"CDF", b"\x89HDF")):
        return _read_csv(path, head)
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)
    except Exception:  # netCDF4 raises OSError/RuntimeError on corrupted files
        raise ValueError(f"{path} {_NOT_TRACKS} (it cannot be read as netCDF)") from None
    with ds:
        ds.load()
        try:
            return _from_netcdf(ds, path)
        except (KeyError, IndexError, TypeError) as error:
            raise ValueError(f"{path}: inconsistent track file ({type(error).__name__}: {error})") from None


def _from_netcdf(ds, path) -> Tracks:
    """Returns the tracks of an open netCDF dataset, dispatching on its attributes."""

    if "lagda_schema_version" in ds.attrs:
        from simulate.schema import validate_dataset

        try:
            validate_dataset(ds)
        except ValueError as error:
            raise ValueError(f"{path}: not a valid lagda dataset: {error}") from None
        return tracks_from_dataset(ds)
    feature = ds.attrs.get("featureType")
    if feature is None and "feature_type" in ds.attrs:
        feature = ds.attrs["feature_type"]
        warnings.warn(f"{path}: reading Parcels-style attribute feature_type; CF spells it featureType", stacklevel=3)
    if feature is None:
        raise ValueError(f"{path} {_NOT_TRACKS} (no featureType attribute)")
    if str(feature).lower() != "trajectory":
        raise ValueError(f"{path}: featureType is {feature!r}; lagda reads only featureType = \"trajectory\"")
    ragged = [name for name, var in ds.variables.items() if "sample_dimension" in var.attrs]
    names = {axis: _find_axis(ds, axis, path) for axis in ("x", "y", "time")}
    units = str(ds[names["time"]].attrs.get("units", "1")).strip()
    if units not in ("", "1"):
        raise ValueError(f"{path}: time has units {units!r}; lagda needs nondimensional time (units \"1\")")
    if ragged:
        return _from_ragged(ds, names, ragged[0])
    x = ds[names["x"]]
    if x.ndim != 2:
        raise ValueError(f"{path}: position {names['x']!r} has dims {x.dims}, expected (trajectory, obs)")
    time = ds[names["time"]].transpose(*[d for d in x.dims if d in ds[names["time"]].dims]).values
    time = np.broadcast_to(time, x.shape) if time.ndim == 1 else time  # orthogonal: time(obs) shared
    pos = np.stack([ds[names["x"]].values, ds[names["y"]].transpose(*x.dims).values], axis=-1)
    return _finish(ds, x.dims[0], list(time), list(pos))


def _from_ragged(ds, names, count_name) -> Tracks:
    """Returns the tracks of a contiguous ragged array (counts `count_name` over instances)."""
    count = ds[count_name]
    sample_dim = count.attrs["sample_dimension"]
    for axis in ("x", "y", "time"):
        if ds[names[axis]].dims != (sample_dim,):
            raise ValueError(f"ragged layout: {names[axis]!r} has dims {ds[names[axis]].dims}, expected ({sample_dim!r},)")
    sizes = count.values.astype(np.int64)
    if sizes.sum() != ds.sizes[sample_dim]:
        raise ValueError(f"ragged layout: {count_name} sums to {sizes.sum()} but {sample_dim!r} has {ds.sizes[sample_dim]}")
    splits = np.cumsum(sizes)[:-1]
    time = np.split(ds[names["time"]].values, splits)
    pos = np.split(np.stack([ds[names["x"]].values, ds[names["y"]].values], axis=-1), splits)
    return _finish(ds, count.dims[0], time, pos)


def _find_axis(ds, axis: str, path) -> str:
    """Returns the name of the variable for `axis` ('x', 'y' or 'time'): by name, else `axis` attribute."""
    if axis in ds.variables:
        return axis
    cf_axis = {"x": "X", "y": "Y", "time": "T"}[axis]
    found = [name for name, var in ds.variables.items() if var.attrs.get("axis") == cf_axis]
    if not found:
        raise ValueError(f"{path}: no {axis!r} variable (by name or axis = {cf_axis!r}); lagda needs torus coordinates x, y")
    return found[0]


def _finish(ds, instance_dim, time, pos) -> Tracks:
    """Returns `Tracks` from per-trajectory lists plus the instance variables of `ds`."""
    n = ds.sizes[instance_dim]
    id_vars = [name for name, var in ds.variables.items() if var.attrs.get("cf_role") == "trajectory_id"]
    ids = ds[id_vars[0]].values if id_vars else np.arange(n)
    field = ds["field"].values if "field" in ds.variables and ds["field"].dims == (instance_dim,) else np.arange(n)
    release = None
    if "x0" in ds.variables and "y0" in ds.variables and ds["x0"].dims == (instance_dim,):
        release = np.stack([ds["x0"].values, ds["y0"].values], axis=-1)
    truth = {name: ds[name].values for name in ("k1", "k2", "omega") if name in ds.variables}
    if "true_coef_re" in ds.variables:
        truth["true_coef"] = ds["true_coef_re"].values + 1j * ds["true_coef_im"].values
    return _pack(time, pos, ids, field, release, **truth)


def _read_csv(path, head: bytes) -> Tracks:
    """Returns the tracks of a CSV file with header id,time,x,y[,field] (rows grouped by id)."""

    try:
        first = head.decode("utf-8").splitlines()[0] if head else ""
    except UnicodeDecodeError:
        first = ""
    header = [h.strip().lower() for h in first.split(",")]
    if not {"id", "time", "x", "y"} <= set(header):
        raise ValueError(f"{path} {_NOT_TRACKS}")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [{k.strip().lower(): v.strip() for k, v in row.items() if k} for row in csv.DictReader(handle)]
    number = lambda s: float(s) if s not in ("", "nan", "NaN", "NA") else np.nan
    groups: dict[str, list] = {}
    try:
        for row in rows:
            groups.setdefault(row["id"], []).append((number(row["time"]), number(row["x"]), number(row["y"]), row.get("field")))
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: bad CSV value ({error})") from None
    ids = list(groups)
    time = [np.array([r[0] for r in groups[i]]) for i in ids]
    pos = [np.array([(r[1], r[2]) for r in groups[i]]).reshape(-1, 2) for i in ids]
    field = [int(groups[i][0][3]) if groups[i][0][3] not in (None, "") else j for j, i in enumerate(ids)]
    return _pack(time, pos, ids, field)


def tracks_from_dataset(ds, samples=None, drifters=None) -> Tracks:
    """Returns the tracks of a lagda dataset, with the truth (coefficients, modes, release).

    Sample s, drifter d becomes trajectory `s{s}d{d}` of field s (renumbered over the selected
    samples), sample-major; times are the dataset's `time(obs)`.

    Args:
        ds: an xarray Dataset with the dataset variables of docs/design.md.
        samples, drifters: optional integer index arrays selecting a subset.
    Raises:
        ValueError: if a required variable is missing.
    """
    needed = ("time", "k1", "k2", "omega", "coef_re", "coef_im", "x", "y", "x0", "y0")
    missing = [name for name in needed if name not in ds.variables]
    if missing:
        raise ValueError(f"lagda dataset lacks variables {missing}")
    s_idx = np.arange(ds.sizes["sample"]) if samples is None else np.atleast_1d(np.asarray(samples, np.int64))
    d_idx = np.arange(ds.sizes["drifter"]) if drifters is None else np.atleast_1d(np.asarray(drifters, np.int64))
    sel = lambda name: np.asarray(ds[name].transpose("sample", "drifter", ...).values)[s_idx][:, d_idx]
    pos = np.stack([sel("x"), sel("y")], axis=-1).astype(np.float64)  # (sample, drifter, obs, 2)
    n_s, n_d, n_obs = pos.shape[:3]
    time = np.broadcast_to(np.asarray(ds["time"].values, np.float64), (n_s * n_d, n_obs))
    coef = np.asarray(ds["coef_re"].values)[s_idx] + 1j * np.asarray(ds["coef_im"].values)[s_idx]
    return _pack(
        list(time), list(pos.reshape(n_s * n_d, n_obs, 2)),
        np.array([f"s{s}d{d}" for s in s_idx for d in d_idx]),
        np.repeat(np.arange(n_s), n_d),
        np.stack([sel("x0"), sel("y0")], axis=-1).reshape(-1, 2),
        true_coef=coef.astype(np.complex128), k1=np.asarray(ds["k1"].values), k2=np.asarray(ds["k2"].values),
        omega=np.asarray(ds["omega"].values, np.float64),
    )


def check_fits_model(tracks: Tracks, model_dt: float, k1=None, k2=None, omega=None) -> list[str]:
    """Returns warnings (gaps, missing positions) after checking that `tracks` fit the model.

    Refused: a track with no valid observation or fewer than 3, observation times that are not
    integer multiples of the model's RK4 step `model_dt` (relative tolerance 1e-6), and a file
    whose mode set or frequencies (when it states them) differ from the model's.

    Args:
        tracks: the observed tracks.
        model_dt: the trained model's / forward model's time step.
        k1, k2: integer `(mode,)` and omega `(mode,)`: the model's modes (optional).
    Raises:
        ValueError: one line naming the first problem (and how many more there are).
    """
    problems, warnings = [], []
    if tracks.n_trajectory == 0:
        raise ValueError("the track file holds no trajectories")
    for i, tid in enumerate(np.asarray(tracks.trajectory_id).tolist()):  # Python ids: `0`, not `np.int64(0)`
        valid = np.all(np.isfinite(tracks.positions[i]), axis=-1) & np.isfinite(tracks.times[i])
        n_valid = int(valid.sum())
        if n_valid == 0:
            problems.append(f"trajectory {tid!r} has no valid observation (all NaN)")
            continue
        if n_valid < 3:
            problems.append(f"trajectory {tid!r} has {n_valid} valid observations; at least 3 are needed")
        t = tracks.times[i][np.isfinite(tracks.times[i])]
        steps = t / model_dt
        off = np.abs(t - np.round(steps) * model_dt) > 1e-6 * np.maximum(np.abs(t), model_dt)
        if np.any(off):
            problems.append(f"trajectory {tid!r}: time {t[off][0]!r} is not a multiple of the model's dt = {model_dt!r}")
        n_missing = int(np.sum(np.isfinite(tracks.times[i]) & ~valid))
        if n_missing:
            warnings.append(f"trajectory {tid!r}: {n_missing} missing positions")
        gaps = np.diff(t)
        if len(gaps) > 1 and np.any(gaps > 1.5 * np.median(gaps)):
            warnings.append(f"trajectory {tid!r}: {int(np.sum(gaps > 1.5 * np.median(gaps)))} gaps in time (largest {gaps.max():.3g})")
    problems += _mode_problems(tracks, k1, k2, omega)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    return warnings


def _mode_problems(tracks: Tracks, k1, k2, omega) -> list[str]:
    """Returns messages for mode sets / frequencies in the file that differ from the model's."""
    problems = []
    if k1 is not None and tracks.k1 is not None:
        same = np.shape(tracks.k1) == np.shape(k1) and np.array_equal(tracks.k1, k1) and np.array_equal(tracks.k2, k2)
        if not same:
            problems.append(f"the track file's modes ({np.size(tracks.k1)}) differ from the model's ({np.size(k1)})")
    if omega is not None and tracks.omega is not None:
        if np.shape(tracks.omega) != np.shape(omega) or not np.allclose(tracks.omega, omega, rtol=1e-6, atol=1e-9):
            problems.append("the track file's frequencies omega differ from the model's")
    return problems
