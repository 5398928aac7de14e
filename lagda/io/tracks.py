"""Observed drifter tracks: the `Tracks` container, the track-file writer and the model check.

Track files (docs/design/files.md, "Track files") are strict CF discrete-sampling-geometry trajectory files:
`featureType = "trajectory"`, a `cf_role = "trajectory_id"` variable, either the incomplete
multidimensional layout (dims `trajectory`/`obs`, ids `trajectory_id(trajectory)`,
`time(trajectory, obs)` padded with `_FillValue`) or the contiguous ragged one of clouddrift and the GDP (dims
`traj`/`obs`, a count `rowsize(traj)` with `sample_dimension = "obs"`). Tracks with a `Mapping` are written in physical
units (lon/lat in degrees or x/y in metres, CF time), the others in model units. Readers of
every format the ecosystem writes live in `lagda.io.readers`, one module each (`lagda.io.formats.read_tracks` is
their entry).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.io.netcdf import trajectory_ids, write_netcdf_atomic
from lagda.io.physical import TIME_UNITS
from lagda.report import counted
from lagda.version import __version__
from simulate.schema import CONVENTIONS


@dataclasses.dataclass(frozen=True)
class Tracks:
    """Observed drifter tracks, in the model's units (the torus and nondimensional time).

    Attributes
    ----------
    positions
        float64 `(trajectory, obs, 2)` unwrapped x, y; NaN where missing.
    times
        float64 `(trajectory, obs)`; NaN where missing (padding).
    field
        int64 `(trajectory,)` which flow each track samples (0..n_field-1).
    trajectory_id
        `(trajectory,)` ids as read (str or int).
    true_coef
        complex128 `(field, mode)` when known (lagda dataset).
    k1, k2
        int `(mode,)` wavevectors when the file says (lagda dataset).
    omega
        float `(mode,)` frequencies when the file says.
    release
        float64 `(trajectory, 2)` release point at t = 0 if known.
    mapping
        the `lagda.io.physical.Mapping` that took physical tracks to the model, else None.
    notes
        what the reader assumed or inferred (layout, box, time scale), one line each.
    dt
        the RK4 step stated by the file (its global `dt` attribute), else None.
    gridded_truth
        for a QG truth file (lagda simulate --flow qg), its truth psi, u, v on the model grid
        with the file's attributes (an xarray Dataset held in memory), else None.
    position_std_m
        float64 `(trajectory, obs)` per-fix position error std (m, per component; the file's
        GDP `err_lat`/`err_lon`), NaN where unknown, or None when the file has none.
    velocity_std_m_s
        float64 `(trajectory, obs)` per-fix velocity error std (m/s, per component; GDP
        `err_ve`/`err_vn`), NaN where unknown, or None.
    clean
        the `lagda.io.clean.CleanReport` of a track file's quality control, else None (its `attrs()`
        are the counts for a result file).
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
    mapping: object | None = None  # lagda.io.physical.Mapping
    notes: tuple[str, ...] = ()
    dt: float | None = None  # the RK4 step the file states (its `dt` attribute, e.g. a lagda dataset's)
    gridded_truth: object | None = None  # a QG truth file's gridded truth (xarray Dataset, in memory), or None
    position_std_m: np.ndarray | None = None  # (trajectory, obs) metres, from GDP err_lat / err_lon
    velocity_std_m_s: np.ndarray | None = None  # (trajectory, obs) m/s, from GDP err_ve / err_vn
    clean: object | None = None  # lagda.io.clean.CleanReport

    def __post_init__(self):
        p, t = np.shape(self.positions), np.shape(self.times)
        if (len(p) != 3 or p[2] != 2 or t != p[:2] or np.shape(self.field) != p[:1]
                or np.shape(self.trajectory_id) != p[:1]):
            raise ValueError(
                f"Tracks: positions {p} must be (trajectory, obs, 2), times {t} (trajectory, obs), "
                f"field {np.shape(self.field)} and trajectory_id {np.shape(self.trajectory_id)} (trajectory,)"
            )
        for name in ("position_std_m", "velocity_std_m_s"):
            value = getattr(self, name)
            if value is not None and np.shape(value) != t:
                raise ValueError(f"Tracks: {name} {np.shape(value)} must be (trajectory, obs) like times {t}")

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
            position_std_m=None if self.position_std_m is None else self.position_std_m[sel],
            velocity_std_m_s=None if self.velocity_std_m_s is None else self.velocity_std_m_s[sel],
        )


def remap_tracks(tracks: Tracks, mapping) -> Tracks:
    """Returns physical `tracks` put on the model through another `mapping` (lagda.io.physical.Mapping): the same fixes.

    Positions, times and release points go back to physical units through the tracks' own mapping and forward
    through `mapping`; true coefficients, which belong to the old mapping, are dropped.

    Raises
    ------
    ValueError
        for tracks in model units, or a mapping in other coordinates (lon/lat against metres).
    """
    old = tracks.mapping
    if old is None or old.coordinates != mapping.coordinates:
        raise ValueError("only physical tracks are put on the model through another mapping of the same coordinates")
    x, y = mapping.to_model(*old.from_model(tracks.positions[..., 0], tracks.positions[..., 1]))
    release = None
    if tracks.release is not None:
        release = np.stack(mapping.to_model(*old.from_model(tracks.release[:, 0], tracks.release[:, 1])), axis=-1)
    return dataclasses.replace(tracks, positions=np.stack([x, y], axis=-1), release=release, true_coef=None,
                               times=mapping.time_to_model(old.time_from_model(tracks.times)), mapping=mapping)


@dataclasses.dataclass
class RawTracks:
    """Tracks as read, before the mapping: per-trajectory lists in the file's units.

    Attributes
    ----------
    times
        per trajectory `(n,)`: model time, or seconds since 1970-01-01T00:00:00Z when `physical_time`.
    positions
        per trajectory `(n, 2)`: model x, y, lon/lat degrees or x/y metres (`coordinates`).
    ids
        `(trajectory,)`
    field
        `(trajectory,)` or None when the file does not say (then each model-unit trajectory is its own flow, and
        physical tracks all sample one ocean: flow 0).
    coordinates
        "model", "lonlat" or "projected".
    attrs
        the file's global attributes
    release, truth
        as in `Tracks`.
    ids_given
        False when the file names no trajectory ids (then `ids` are 0, 1, ...).
    notes
        what reading did that the user should know, one line each (e.g. several files read as one).
    per_fix
        optional per-fix variables, name -> per trajectory `(n,)` aligned with `times`: the GDP
        variables a file holds (`drogue_status`, `location_type`, `err_lat`, `err_lon` in degrees,
        `err_ve`, `err_vn` in m/s), and after `lagda.io.clean.clean_fixes` `position_std_m` and
        `velocity_std_m_s` derived from them.
    """

    times: list
    positions: list
    ids: np.ndarray
    field: np.ndarray | None
    coordinates: str
    physical_time: bool
    attrs: dict = dataclasses.field(default_factory=dict)
    release: np.ndarray | None = None
    truth: dict = dataclasses.field(default_factory=dict)
    per_fix: dict = dataclasses.field(default_factory=dict)
    ids_given: bool = True
    notes: tuple = ()


FILL = 9.969209968386869e36  # netCDF's default double fill value (NC_FILL_DOUBLE)
TRACK_FORMAT_VERSION = "2"  # 2: physical units and the contiguous ragged layout (1: model units only)
LAYOUTS = ("multidimensional", "ragged")
GAP_FACTOR = 1.5  # check_fits_model: a step over this many times the drifter's median step is a gap


def id_text(tid) -> str:
    """Returns a trajectory id as the file writes it: `300234060000000` or `drifter7`, never a numpy repr."""
    tid = tid.item() if isinstance(tid, np.generic) else tid
    return tid.decode() if isinstance(tid, bytes) else str(tid)


def pack_tracks(times, positions, ids, field, release=None, per_fix: dict | None = None, **truth) -> Tracks:
    """Returns canonical `Tracks` from per-trajectory lists of times `(n,)` and positions `(n, 2)`.

    Canonical form: observations with a non-finite time are dropped, leading and trailing
    observations without a position are dropped (the drifter was not yet / no longer at sea),
    interior missing positions stay NaN; each track is left-aligned and NaN-padded to the
    longest. Field numbers are renumbered 0..n_field-1 in sorted order. `per_fix` maps Tracks
    fields `(trajectory, obs)` (position_std_m, velocity_std_m_s) to per-trajectory `(n,)` lists,
    which follow their observations. Track files reach this through lagda.io.clean, which sorts
    times and resolves duplicates; here, for internal callers, they are an error.

    Raises
    ------
    ValueError
        if a track's times are not strictly increasing.
    """
    per_fix = per_fix or {}
    kept_t, kept_p, kept_v = [], [], {name: [] for name in per_fix}
    for i, (t, p) in enumerate(zip(times, positions)):
        t, p = np.asarray(t, np.float64), np.asarray(p, np.float64).reshape(-1, 2)
        v = {name: np.asarray(values[i], np.float64) for name, values in per_fix.items()}
        ok = np.isfinite(t)
        t, p, v = t[ok], p[ok], {name: a[ok] for name, a in v.items()}
        valid = np.flatnonzero(np.all(np.isfinite(p), axis=1))
        span = slice(valid[0], valid[-1] + 1) if len(valid) else slice(0, 0)
        t, p, v = t[span], p[span], {name: a[span] for name, a in v.items()}
        if np.any(np.diff(t) <= 0):
            raise ValueError(f"trajectory {id_text(ids[i])}: times are not strictly increasing")
        kept_t.append(t)
        kept_p.append(p)
        for name, a in v.items():
            kept_v[name].append(a)
    n_obs = max((len(t) for t in kept_t), default=0)
    out_t = np.full((len(kept_t), n_obs), np.nan)
    out_p = np.full((len(kept_t), n_obs, 2), np.nan)
    out_v = {name: np.full((len(kept_t), n_obs), np.nan) for name in kept_v}
    for i, (t, p) in enumerate(zip(kept_t, kept_p)):
        out_t[i, : len(t)], out_p[i, : len(t)] = t, p
        for name, values in kept_v.items():
            out_v[name][i, : len(t)] = values[i]
    field = np.unique(np.asarray(field, np.int64), return_inverse=True)[1].astype(np.int64).ravel()
    rel = None if release is None else np.asarray(release, np.float64).reshape(-1, 2)
    return Tracks(out_p, out_t, field, trajectory_ids(ids), release=rel, **out_v, **truth)


def write_tracks(tracks: Tracks, path, attrs: dict | None = None, layout: str = "multidimensional",
                 mapping_attrs: bool = True) -> None:
    """Writes `tracks` as a strict CF DSG trajectory file (module docstring), via a temporary name.

    With `tracks.mapping` the positions are written in physical units (`lon`, `lat` in degrees,
    or `x`, `y` in metres) and times as CF times (seconds since 1970-01-01T00:00:00Z), with the
    mapping in the global attributes; without it, `x`, `y` and `time` are in model units ("1"):
    nondimensional time is not a CF time coordinate, so it carries no `axis` or `standard_name`.
    `field(trajectory)` groups drifters of one flow; release points and, when known, the true
    coefficients and the mode set are stored too (in model units).

    Parameters
    ----------
    tracks : Tracks
        The tracks, positions `(trajectory, obs, 2)` and times `(trajectory, obs)` in model units.
    path : str or os.PathLike
        The netCDF file to write (replaced atomically).
    attrs : dict, optional
        Extra global attributes.
    layout : {"multidimensional", "ragged"}
        Dims trajectory/obs, NaN-padded, or the contiguous ragged dims traj/obs with a count `rowsize`.
    mapping_attrs : bool, default True
        False: no `lagda_mapping_*` attributes (a reader then infers the box and time scale).

    Raises
    ------
    ValueError
        For an unknown layout.

    Examples
    --------
    The shipped GDP-like file written as a padded trajectory file, then read back:

    >>> import os, tempfile
    >>> from lagda.examples import shipped
    >>> from lagda.io.formats import read_tracks
    >>> tracks = read_tracks(shipped("gdp_like.nc"))
    >>> path = os.path.join(tempfile.mkdtemp(), "tracks.nc")
    >>> write_tracks(tracks, path)
    >>> again = read_tracks(path)
    >>> again.n_trajectory == tracks.n_trajectory, again.mapping.box == tracks.mapping.box
    (True, True)
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown track layout {layout!r}; valid layouts: {', '.join(LAYOUTS)}")
    ds = _track_dataset(tracks, layout)
    ds.attrs = {
        "Conventions": CONVENTIONS, "featureType": "trajectory", "title": "lagda drifter tracks",
        "source": f"lagda {__version__}", "lagda_track_format_version": TRACK_FORMAT_VERSION,
        "history": f"written by lagda.io.tracks.write_tracks (lagda {__version__})",
        **({} if tracks.mapping is None or not mapping_attrs else tracks.mapping.attrs()), **(attrs or {}),
    }
    filled = ([name for name in ("x", "y", "lon", "lat") if name in ds.variables]
              + (["time"] if layout != "ragged" else []))
    encoding = {name: {"_FillValue": FILL} for name in filled}
    encoding.update({name: {"_FillValue": None} for name in ds.variables if name not in encoding})
    write_netcdf_atomic(ds, path, encoding)


def _track_dataset(tracks: Tracks, layout: str):
    """Returns the xarray Dataset of `write_tracks` without global attributes."""
    import xarray as xr

    ids = np.asarray(tracks.trajectory_id)
    ids = ids.astype(np.int64) if ids.dtype.kind in "iu" else ids.astype(str).astype(object)
    one = lambda name, extra=None: {"units": "1", "long_name": name, **(extra or {})}
    a, b = tracks.positions[..., 0], tracks.positions[..., 1]
    time = tracks.times
    mapping = tracks.mapping
    if mapping is None:
        names = ("x", "y")
        attrs_a = one("drifter position x, unwrapped (model domain lengths)")
        attrs_b = one("drifter position y, unwrapped (model domain lengths)")
        time_attrs = one("nondimensional model time")
    else:
        a, b = mapping.from_model(a, b)
        time = mapping.time_from_model(time)
        time_attrs = {"units": TIME_UNITS, "standard_name": "time", "calendar": "standard",
                      "units_metadata": "leap_seconds: none", "long_name": "time of the fix"}
        if mapping.coordinates == "lonlat":
            names = ("lon", "lat")
            attrs_a = {"units": "degrees_east", "standard_name": "longitude",
                       "long_name": "drifter longitude (continuous across 180)"}
            attrs_b = {"units": "degrees_north", "standard_name": "latitude", "long_name": "drifter latitude"}
        else:
            names = ("x", "y")
            attrs_a = {"units": "m", "standard_name": "projection_x_coordinate", "long_name": "drifter position x"}
            attrs_b = {"units": "m", "standard_name": "projection_y_coordinate", "long_name": "drifter position y"}
    coordinates = f"time {names[1]} {names[0]}"
    if layout == "ragged":
        instance, sample = "traj", "obs"
        keep = np.isfinite(tracks.times)
        a, b, time = a[keep], b[keep], time[keep]
        data = {"rowsize": (instance, keep.sum(axis=1).astype(np.int64),
                            {"long_name": "number of observations per trajectory", "sample_dimension": sample})}
        coords = {"id": (instance, ids, {"cf_role": "trajectory_id", "long_name": "drifter identifier"}),
                  "time": (sample, time, time_attrs)}
        obs_dims = (sample,)
    else:
        instance = "trajectory"
        data = {}
        # not a coordinate variable `trajectory(trajectory)`: CF wants those numeric and monotonic, ids are neither
        coords = {"trajectory_id": (instance, ids, {"cf_role": "trajectory_id", "long_name": "drifter identifier"}),
                  "time": ((instance, "obs"), time, time_attrs)}
        obs_dims = (instance, "obs")
    data[names[0]] = (obs_dims, a, attrs_a)
    data[names[1]] = (obs_dims, b, attrs_b)
    data["field"] = (instance, np.asarray(tracks.field, np.int64),
                     one("index of the flow field sampled by the drifter"))
    ds = xr.Dataset(data, coords=coords)
    for name in names:
        ds[name].encoding["coordinates"] = coordinates
    if tracks.release is not None:
        for j, name in enumerate("xy"):
            ds[f"{name}0"] = (instance, tracks.release[:, j],
                              one(f"drifter release position {name} at t = 0 (model domain lengths)"))
    _add_truth(ds, tracks)
    return ds


def _add_truth(ds, tracks: Tracks) -> None:
    """Adds the mode set and true coefficients of `tracks` (when known) to `ds` in place.

    The truth's field dimension is named `flow`, since the DSG variable `field(trajectory)`
    already holds the name `field`.
    """
    one = lambda name: {"units": "1", "long_name": name}
    for name, values, dtype in (("k1", tracks.k1, np.int32), ("k2", tracks.k2, np.int32),
                                ("omega", tracks.omega, np.float64)):
        if values is not None:
            ds[name] = ("mode", np.asarray(values, dtype), one(f"Fourier mode {name} of the flow model"))
    if tracks.true_coef is not None:
        c = np.asarray(tracks.true_coef, np.complex128)
        ds["true_coef_re"] = (("flow", "mode"), c.real, one("real part of the true coefficient c_k"))
        ds["true_coef_im"] = (("flow", "mode"), c.imag, one("imaginary part of the true coefficient c_k"))


def tracks_from_dataset(ds, samples=None, drifters=None) -> Tracks:
    """Returns the tracks of a lagda dataset, with the truth (coefficients, modes, release).

    Sample s, drifter d becomes trajectory `s{s}d{d}` of field s (renumbered over the selected
    samples), sample-major; times are the dataset's `time(obs)`.

    Parameters
    ----------
    ds : xarray.Dataset
        A lagda dataset (`simulate.schema`; docs/design/forward-model.md, "Datasets").
    samples, drifters : array_like of int, optional
        Indices selecting a subset (default: all).

    Returns
    -------
    Tracks
        `(sample x drifter)` trajectories in model units, with `true_coef` `(field, mode)`, `k1`, `k2`, `omega`
        `(mode,)` and `release` `(trajectory, 2)`.

    Raises
    ------
    ValueError
        If a required variable is missing (named).
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
    return pack_tracks(
        list(time), list(pos.reshape(n_s * n_d, n_obs, 2)),
        np.array([f"s{s}d{d}" for s in s_idx for d in d_idx]),
        np.repeat(np.arange(n_s), n_d),
        np.stack([sel("x0"), sel("y0")], axis=-1).reshape(-1, 2),
        true_coef=coef.astype(np.complex128), k1=np.asarray(ds["k1"].values), k2=np.asarray(ds["k2"].values),
        omega=np.asarray(ds["omega"].values, np.float64),
    )


def off_steps(times, dt: float) -> np.ndarray:
    """Returns which of `times` `(n,)` are not integer multiples of `dt` (relative tolerance 1e-6), bool `(n,)`."""
    t = np.asarray(times, np.float64)
    return np.abs(t - np.round(t / dt) * dt) > 1e-6 * np.maximum(np.abs(t), dt)


def check_fits_model(tracks: Tracks, model_dt: float, k1=None, k2=None, omega=None) -> list[str]:
    """Returns warnings (gaps, missing positions) after checking that `tracks` fit the model.

    Refused: a track with no valid observation or fewer than 3, observation times that are not
    integer multiples of the model's RK4 step `model_dt` (relative tolerance 1e-6), and a file
    whose mode set or frequencies (when it states them) differ from the model's.

    Parameters
    ----------
    tracks
        the observed tracks.
    model_dt
        the trained model's / forward model's time step.
    k1, k2
        integer `(mode,)` and omega `(mode,)`: the model's modes (optional).

    Raises
    ------
    ValueError
        one line naming the first problem (and how many more there are).
    """
    problems, missing, gaps = [], [], []
    if tracks.n_trajectory == 0:
        raise ValueError("the track file holds no trajectories")
    for i, tid in enumerate(map(id_text, np.asarray(tracks.trajectory_id))):
        valid = np.all(np.isfinite(tracks.positions[i]), axis=-1) & np.isfinite(tracks.times[i])
        n_valid = int(valid.sum())
        if n_valid == 0:
            problems.append(f"trajectory {tid} has no valid observation (all NaN)")
            continue
        if n_valid < 3:
            problems.append(f"trajectory {tid} has {n_valid} valid observations; at least 3 are needed")
        t = tracks.times[i][np.isfinite(tracks.times[i])]
        off = off_steps(t, model_dt)
        if np.any(off):
            problems.append(f"trajectory {tid}: time {float(t[off][0])!r} is not a multiple of the model's dt = "
                            f"{model_dt!r}")
        n_missing = int(np.sum(np.isfinite(tracks.times[i]) & ~valid))
        if n_missing:
            missing.append((n_missing, tid))
        step = np.diff(t)
        if len(step) > 1 and np.any(step > GAP_FACTOR * np.median(step)):
            gaps.append((float(step.max()), tid, float(np.median(step))))
    problems += _mode_problems(tracks, k1, k2, omega)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    return _missing_lines(missing, tracks.n_trajectory) + _gap_lines(gaps, tracks)


def _missing_lines(missing: list, n_trajectory: int) -> list[str]:
    """Returns one line per drifter with missing positions, or one summary line when more than three have some."""
    if len(missing) <= 3:
        return [f"trajectory {tid}: {counted(n, 'missing position')}" for n, tid in missing]
    n, tid = max(missing)
    return [f"missing positions: {sum(m for m, _ in missing)} in {len(missing)} of {n_trajectory} drifters (most: "
            f"{n} in drifter {tid})"]


def _gap_lines(gaps: list, tracks: Tracks) -> list[str]:
    """Returns one summary line of the drifters with gaps (steps over GAP_FACTOR times their median step).

    In hours for physical tracks (through their mapping), else in model time units.
    """
    if not gaps:
        return []
    largest, tid, median = max(gaps)
    if tracks.mapping is not None:
        hours = tracks.mapping.time_scale_s / 3600.0
        size = lambda dt: f"{dt * hours:.3g} h"
    else:
        size = lambda dt: f"{dt:.3g} (model time)"
    medians = np.median([g[2] for g in gaps])
    return [f"gaps: {len(gaps)} of {tracks.n_trajectory} drifters have steps over {GAP_FACTOR:g}x their median step "
            f"(those drifters' median step {size(medians)}); largest {size(largest)} (drifter {tid})"]


def _mode_problems(tracks: Tracks, k1, k2, omega) -> list[str]:
    """Returns messages for mode sets / frequencies in the file that differ from the model's."""
    problems = []
    if k1 is not None and tracks.k1 is not None:
        same = np.shape(tracks.k1) == np.shape(k1) and np.array_equal(tracks.k1, k1) and np.array_equal(tracks.k2, k2)
        if not same:
            problems.append(f"the track file's modes ({np.size(tracks.k1)}) differ from the model's ({np.size(k1)})")
    if omega is not None and tracks.omega is not None:
        # equal to float32 rounding (a model trained on data generated on another device)
        scale = float(np.max(np.abs(omega))) if np.size(omega) else 0.0
        if (np.shape(tracks.omega) != np.shape(omega)
                or not np.allclose(tracks.omega, omega, rtol=1e-6, atol=1e-6 * scale + 1e-9)):
            problems.append("the track file's frequencies omega differ from the model's")
    return problems
