"""Assimilation of observed drifter tracks: one dispatcher over the methods of lagda.assimilation.methods.

`assimilate` runs a method on every field of a `Tracks` and returns a `Posterior`;
`assimilate_file` is the library function behind `lagda assimilate`: read, check, assimilate,
write the result file (temporary name + rename), optionally plot.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import NamedTuple

import jax
import numpy as np

from lagda.assimilation.methods import METHODS, AssimConfig, FieldEstimate, FlowModel, assimilate_enkf, assimilate_linear, assimilate_var
from lagda.assimilation.methods.hybrid import assimilate_hybrid
from lagda.assimilation.methods.learned import Scorer, field_queries, learned_estimates, scorer_from_run
from lagda.assimilation.methods._common import to_real
from lagda.assimilation.methods.config import config_from_options
from lagda.assimilation.posterior import Posterior, describe_diagnostics
from lagda.io.tracks import Tracks
from simulate.config import SimConfig
from simulate.prior import spectrum

_CLASSICAL = {"linear": assimilate_linear, "var": assimilate_var, "enkf": assimilate_enkf}


def _field_tracks(tracks: Tracks, f: int):
    """Returns positions `(drifter, obs, 2)`, times `(drifter, obs)`, release `(drifter, 2)` or None of field f."""
    sub = tracks.for_field(f)
    return sub.positions, sub.times, sub.release


def assimilate(tracks: Tracks, method: str, modes, prior_scale, dt: float, *, run_dir=None,
               config: AssimConfig | None = None, key=None, scorer: Scorer | None = None, bank=None) -> Posterior:
    """Returns the posterior over the coefficients of every field of `tracks`.

    Args:
        tracks: observed tracks; field f of the posterior is field f of the tracks.
        method: one of "linear", "var", "enkf", "retrieve", "embed", "hybrid".
        modes: (k1, k2, omega), each `(mode,)`, or (k1, k2, omega, time) with a simulate.flow.TimeBasis
            (classical methods only); prior_scale: `(mode,)` prior std a_k; dt: RK4 step.
        run_dir: trained run (retrieve / embed / hybrid), unless `scorer` is given.
        config: AssimConfig (default AssimConfig()); key: PRNG key (default key(0)).
        scorer: the learned comparison (embed_fn, similarity); bank: complex `(n, mode)` or None (prior).
    Raises:
        ValueError: for an unknown method, or a learned method without run_dir / scorer.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if len(modes) == 4 and modes[3] is not None and method not in _CLASSICAL:
        raise ValueError(f"{method} compares tracks with a trained model's flows, which have no time basis: "
                         f"use {', '.join(_CLASSICAL)} with a chosen basis")
    with jax.enable_x64(True):  # the inversions need float64 whatever the caller's JAX setting
        return _assimilate(tracks, method, modes, prior_scale, dt, run_dir, config, key, scorer, bank)


def _assimilate(tracks, method, modes, prior_scale, dt, run_dir, config, key, scorer, bank) -> Posterior:
    config = (config or AssimConfig()).validate()
    key = jax.random.key(0) if key is None else key
    k1, k2, omega = (np.asarray(m) for m in modes[:3])
    model = FlowModel(k1.astype(np.int32), k2.astype(np.int32), np.asarray(omega, np.float64),
                      np.asarray(prior_scale, np.float64), float(dt), modes[3] if len(modes) == 4 else None)
    n_field = tracks.n_field
    if method in _CLASSICAL:
        estimates, seconds = [], []
        for f in range(n_field):
            start = time.perf_counter()
            estimates.append(_CLASSICAL[method](*_field_tracks(tracks, f), model, config, jax.random.fold_in(key, f)))
            seconds.append(time.perf_counter() - start)
    else:
        estimates, seconds = _learned(tracks, method, model, config, key, scorer, run_dir, bank)
    return _posterior(estimates, method, seconds)


def _learned(tracks, method, model, config, key, scorer, run_dir, bank):
    """Returns (FieldEstimates, seconds per field) of retrieve / embed / hybrid.

    retrieve and embed refuse tracks the encoder cannot read (learned.encoder_problem); hybrid
    takes the prior as the learned conditional of those fields and records why in info.
    """
    if scorer is None:
        if run_dir is None:
            raise ValueError(f"method {method!r} needs a trained model (--model RUN, or run_dir in Python)")
        scorer, _ = scorer_from_run(run_dir)
    start = time.perf_counter()
    old_hybrid = method == "hybrid" and config.hybrid_refine == "var"
    queries, problems = field_queries(tracks, scorer)
    if method != "hybrid" and any(problems):
        f = next(i for i, p in enumerate(problems) if p)
        raise ValueError(f"{method}: field {f}: {problems[f]}")
    first = "retrieve" if method == "retrieve" or (old_hybrid and config.hybrid_start == "retrieve") else "embed"
    readable = [f for f, q in enumerate(queries) if q is not None]
    learned = learned_estimates(first, np.stack([queries[f] for f in readable]), model, config, scorer, key, bank) if readable else []
    estimates = [_prior_estimate(model)] * tracks.n_field
    for f, est in zip(readable, learned):
        estimates[f] = est
    shared = (time.perf_counter() - start) / tracks.n_field
    seconds = [shared] * tracks.n_field
    if method != "hybrid":
        return estimates, seconds
    refined = []
    for f, est in enumerate(estimates):
        start = time.perf_counter()
        fkey = jax.random.fold_in(key, 10_000 + f)
        if not old_hybrid:  # the learned conditional as the prior of the velocity inversion
            out = assimilate_hybrid(*_field_tracks(tracks, f), model, config, fkey, est.info["mean"], est.info["var"])
        else:
            x0 = to_real(est.samples.T @ est.weights)
            out = assimilate_var(*_field_tracks(tracks, f), model, config, fkey, x_init=x0, stages=(1.0,),
                                 iterations=config.hybrid_iterations)
        used = {"learned_conditional": problems[f] is None}
        if problems[f]:
            used["learned_fallback"] = f"prior instead: {problems[f]}"
        refined.append(dataclasses.replace(out, candidates=est.candidates, candidate_weights=est.candidate_weights,
                                           info={**out.info, **used}))
        seconds[f] += time.perf_counter() - start
    return refined, seconds


def _prior_estimate(model: FlowModel) -> FieldEstimate:
    """Returns the prior N(0, D) in the form of a learned conditional (hybrid's fallback)."""
    info = {"mean": np.zeros(2 * model.n_modes), "var": model.prior_var}
    return FieldEstimate(np.zeros((1, model.n_modes), complex), np.ones(1), info=info)


def _posterior(estimates, method: str, seconds) -> Posterior:
    """Returns the Posterior stacking per-field estimates (their info as Posterior.info)."""
    has_candidates = all(e.candidates is not None for e in estimates)
    return Posterior(
        samples=np.stack([e.samples for e in estimates]).astype(np.complex128),
        weights=np.stack([e.weights for e in estimates]).astype(np.float64),
        method=method,
        candidates=np.stack([e.candidates for e in estimates]).astype(np.complex128) if has_candidates else None,
        candidate_weights=np.stack([e.candidate_weights for e in estimates]) if has_candidates else None,
        seconds=np.asarray(seconds, np.float64),
        info=tuple(dict(e.info) for e in estimates),
    )


class ModelSettings(NamedTuple):
    """The model tracks are assimilated into, and how each setting was found."""

    k1: np.ndarray  # int (mode,)
    k2: np.ndarray  # int (mode,)
    omega: np.ndarray  # float64 (mode,)
    prior_scale: np.ndarray  # float64 (mode,) prior std a_k
    dt: float  # RK4 step
    notes: tuple[str, ...]  # settings not given by a trained run, with where they came from


def model_settings(tracks: Tracks | None, run_dir=None, dt: float | None = None, file_dt: float | None = None) -> ModelSettings:
    """Returns the modes, prior and RK4 step: from the run's dataset meta, else from the tracks.

    Without a run the modes and frequencies are the track file's (for physical tracks their
    phases count from the file's time origin, a note); for physical tracks (with a mapping) that
    state none, the steady model: the generator's default mode set with all omega_k = 0 (a time
    origin of real tracks is arbitrary, so frequencies not stated by the file would have no phase). The prior is the generator's default spectrum, and dt is, in order: `dt` (given),
    `file_dt` (the file's `dt` attribute, e.g. a lagda dataset), else the smallest observation
    spacing divided into steps no longer than the generator's default dt (an RK4 step as long as
    a sparse spacing would be inaccurate and would make sparse tracks look dense). Each guess is
    a note.

    Args:
        tracks: the observed tracks (may be None with a run); run_dir: trained run or None.
        dt: RK4 step given by the user (overrides the run's and the file's).
        file_dt: the track file's `dt` attribute, if any.
    Raises:
        ValueError: without a run, if model-unit tracks do not state their modes and frequencies;
            with a run that has frequencies, for physical tracks.
    """
    notes = []
    physical = tracks is not None and tracks.mapping is not None
    if run_dir is not None:
        from lagda.learning.model import read_run_files

        _, meta = read_run_files(run_dir)  # the modes and prior only: no checkpoint restore
        if physical and np.any(np.asarray(meta["omega"], np.float64) != 0):
            raise ValueError(f"physical tracks are assimilated with the steady model, but the run {os.fspath(run_dir)} was "
                             "trained on flows with frequencies: use --method linear, var or enkf, or a run trained with --steady")
        times = np.asarray(meta["time"], np.float64)
        run_dt = float(meta.get("attrs", {}).get("dt", times[1] - times[0]))
        if dt is not None and not np.isclose(dt, run_dt, rtol=1e-9):
            notes.append(f"dt {dt:g} given (the model run's is {run_dt:g})")
        return ModelSettings(np.asarray(meta["k1"]), np.asarray(meta["k2"]), np.asarray(meta["omega"], np.float64),
                             np.asarray(meta["prior_scale"], np.float64), run_dt if dt is None else float(dt), tuple(notes))
    base = SimConfig()  # prior of the generator's defaults: the file carries modes, not the prior
    if physical and (tracks.k1 is None or tracks.omega is None):
        from simulate.flow import rectangular_modes

        k1, k2 = rectangular_modes((base.k1_min, base.k1_max), (base.k2_min, base.k2_max))
        tracks = dataclasses.replace(tracks, k1=np.asarray(k1), k2=np.asarray(k2), omega=np.zeros(len(k1)))
        notes.append(f"flow basis: the steady model, modes k1 in {base.k1_min}..{base.k1_max}, k2 in {base.k2_min}..{base.k2_max} "
                     f"({len(k1)} modes) with omega = 0, since the track file states none")
    if tracks is None or tracks.k1 is None or tracks.omega is None:
        raise ValueError("the track file does not state the modes and frequencies: pass a trained model (--model RUN)")
    if physical and np.any(np.asarray(tracks.omega) != 0):
        from lagda.io.physical import iso_time

        notes.append(f"frequencies omega_k from the track file: their phases count from its time origin {iso_time(tracks.mapping.time_origin)}")
    scale = spectrum(tracks.k1, tracks.k2, base.spectrum_exponent, base.rms_speed)
    notes.append(f"prior: the generator's default spectrum (exponent {base.spectrum_exponent:g}, rms speed "
                 f"{base.rms_speed:g}), since the track file states no prior; pass --model RUN to use a run's")
    if physical:
        lx, ly = tracks.mapping.lengths_m
        notes.append(f"prior RMS speed {base.rms_speed:g} domain lengths per model time unit = "
                     f"{base.rms_speed * np.sqrt(lx * ly) / tracks.mapping.time_scale_s:.3g} m/s in this mapping")
    dt, dt_note = resolve_dt(tracks, dt, file_dt)
    return ModelSettings(tracks.k1, tracks.k2, tracks.omega, scale, dt, tuple(notes + dt_note))


def resolve_dt(tracks: Tracks, dt: float | None, file_dt: float | None) -> tuple[float, list]:
    """Returns (dt, notes): `dt` given, else the file's dt attribute, else guessed from the observation times."""
    if dt is not None:
        return float(dt), []
    if file_dt is not None:
        return float(file_dt), [f"dt {float(file_dt):g} from the track file's dt attribute"]
    guess = _guess_dt(tracks.times, GUESS_MAX_DT)
    return guess, [f"dt {guess:g} guessed: the smallest observation spacing in steps of at most {GUESS_MAX_DT:g}; "
                   "pass --dt to set it"]


GUESS_MAX_DT = 1e-4  # longest guessed RK4 step: the small preset's, accurate to ~1e-10 on the default prior


def _guess_dt(times, max_dt: float) -> float:
    """Returns the smallest observation spacing of `times` divided into equal steps of at most max_dt."""
    steps = np.diff(np.unique(np.round(times[np.isfinite(times)], 12)))
    if not len(steps):
        return max_dt
    spacing = float(np.min(steps))
    return spacing / max(1, int(np.ceil(spacing / max_dt * (1 - 1e-9))))


def assimilate_file(tracks_path, out_path, method: str, run_dir=None, n_grid: int = 32, plot=None,
                    overwrite: bool = False, seed: int = 0, dt: float | None = None, box=None,
                    time_scale: float | None = None, basis: str | None = None, k_max: float = 12, degree: int = 3,
                    climatology=None, **method_options) -> dict:
    """Returns a summary dict after assimilating a track file and writing the result netCDF.

    Reads `tracks_path` (lagda.io.tracks.read_tracks), finds the model (`model_settings`), checks
    the tracks against it (check_fits_model), runs `method` on each field, writes `out_path`
    (lagda.io.results.write_result, temporary file + rename; the settings' notes and each
    field's diagnostics in its attributes) and, with `plot`, a figure of field 0.

    The summary holds "method", "fields", "seconds", "notes" (settings guessed, list of str),
    "warnings" (check_fits_model, list of str), "diagnostics" (one line: what the method
    decided per field) and, for tracks with known truth, every score of lagda.assimilation.scores.
    Physical tracks (lon/lat or metres, CF times) are mapped onto the model (lagda.io.physical;
    the mapping's inferences are notes), the result is in physical units, and with a known truth
    the summary adds "velocity_rms_error_m_s" and "velocity_rms_true_m_s": the RMS over the grid,
    grid times and fields of the error of the posterior-mean velocity, and of the true velocity.

    With `basis` ("circular" or "rectangular", lagda.assimilation.basis) the model is that basis to
    k_max times Legendre polynomials of `degree` in time over the tracks' window, its prior from the
    QG truth file `climatology` (else the default spectrum shape at the tracks' RMS speed); `linear`
    then models the velocity the basis leaves out as an OU error along each track
    (config.representation "ou", unless given). For a QG truth file (lagda simulate --flow qg) the
    summary adds "velocity_error_vs_truth" (relative L2 of the posterior-mean velocity against the
    gridded truth, over its grid, times and flows), "velocity_error_vs_projection" and
    "projection_limit" (lagda.assimilation.basis.qg_scores).

    Args:
        dt: RK4 step (default: the run's, else the file's dt attribute, else guessed; see model_settings).
        box: (west, east, south, north) of physical tracks (default: the file's, else inferred).
        time_scale: seconds per model time unit for physical tracks (default: the file's, else inferred).
        method_options: AssimConfig fields (members, top_k, ...).
    Raises:
        ValueError: bad method / option, existing output without overwrite, tracks that do not fit.
        FileNotFoundError: missing track file or run directory.
    """
    with jax.enable_x64(True):  # inversions and scores in float64 whatever the caller's JAX setting
        return _assimilate_file(tracks_path, out_path, method, run_dir, n_grid, plot, overwrite, seed, dt, box, time_scale,
                                (basis, k_max, degree, climatology), method_options)


def _assimilate_file(tracks_path, out_path, method, run_dir, n_grid, plot, overwrite, seed, dt, box, time_scale,
                     chosen_basis, method_options) -> dict:
    import warnings as python_warnings

    from lagda.assimilation.scores import window_times
    from lagda.io.results import write_result
    from lagda.io.tracks import check_fits_model, read_tracks

    if os.path.exists(out_path) and not overwrite:
        raise ValueError(f"{out_path} exists; pass overwrite=True to replace it")
    config = config_from_options(method_options)
    with python_warnings.catch_warnings(record=True) as caught:  # the reader's assumptions become summary warnings
        python_warnings.simplefilter("always")
        tracks = read_tracks(tracks_path, box=box, time_scale=time_scale)
    basis, k_max, degree, climatology = chosen_basis
    time_basis = None
    if basis is None:
        k1, k2, omega, scale, dt, notes = model_settings(tracks, run_dir, dt, file_dt(tracks_path) if run_dir is None else None)
    else:
        from lagda.assimilation.basis import basis_settings

        chosen = basis_settings(tracks, basis, k_max, degree, climatology)
        k1, k2, omega, time_basis, scale = chosen[:5]
        dt, dt_notes = resolve_dt(tracks, dt, file_dt(tracks_path))
        notes = list(chosen.notes) + dt_notes
        if method == "linear" and "representation" not in method_options:
            config = dataclasses.replace(config, representation="ou",
                                         representation_var=config.representation_var or chosen.representation_var,
                                         representation_time=config.representation_time or chosen.representation_time)
            notes.append("linear: the velocity the basis leaves out is an OU error along each track (representation 'ou'), "
                         + ("its variance and time scale the climatology's" if chosen.representation_var
                            else "its variance and time scale estimated from the tracks"))
    notes = tuple(tracks.notes) + tuple(notes)
    read_warnings = [str(w.message) for w in caught]  # e.g. a layout assumed from the dimensions
    # a chosen basis is not the file's modes: only the times are checked against it
    warnings = read_warnings + check_fits_model(tracks, dt, *((k1, k2, omega) if basis is None else ()))
    posterior = assimilate(tracks, method, (k1, k2, omega, time_basis), scale, dt, run_dir=run_dir, config=config,
                           key=jax.random.key(seed))
    times = window_times(tracks)
    attrs = {"assim_config": json.dumps(dataclasses.asdict(config)), "model_run": _run_name(run_dir), "seed": int(seed),
             "dt": float(dt), "settings_notes": json.dumps(list(notes)), "read_warnings": json.dumps(read_warnings)}
    write_result(out_path, posterior, k1, k2, omega, times, n_grid, tracks, attrs, time=time_basis)
    summary = {"method": method, "fields": tracks.n_field, "seconds": float(np.sum(posterior.seconds)),
               "notes": list(notes), "warnings": list(warnings),
               "diagnostics": describe_diagnostics(method, posterior.diagnostics())}
    if basis is not None:
        from lagda.assimilation.basis import qg_scores

        summary.update(qg_scores(tracks_path, posterior.mean, k1, k2, time_basis))
    elif tracks.true_coef is not None:  # held-out tracks with known truth: every score of lagda.assimilation.scores
        from lagda.assimilation.scores import score_posterior

        scores = score_posterior(posterior, tracks, k1, k2, omega, dt, n_grid=n_grid)
        summary.update({name: value for name, value in scores.items() if name != "per_field"})
        if tracks.mapping is not None:
            summary.update(_physical_velocity_error(posterior.mean, tracks, k1, k2, omega, times, n_grid))
    if plot:
        from lagda.assimilation.plot import plot_assimilation

        plot_assimilation(out_path, plot, tracks=tracks)
    return summary


def _physical_velocity_error(coef, tracks: Tracks, k1, k2, omega, times, n_grid: int) -> dict:
    """Returns the RMS velocity error of `coef` against the tracks' truth and the RMS true speed, in m/s.

    Both fields are gridded on the result's grid and times and converted with the tracks' mapping
    (lagda.io.results.physical_fields); the RMS runs over grid points, times and fields.
    """
    from lagda.io.results import physical_fields
    from simulate.flow import grid_fields

    grid = np.arange(n_grid) / n_grid
    est, true = ({f"{name}_mean": np.asarray(f) for name, f in zip(("psi", "u", "v"), grid_fields(np.asarray(c), np.asarray(k1), np.asarray(k2),
                                                                                    np.asarray(omega, np.float64), times, n_grid))}
                 for c in (coef, tracks.true_coef))
    est, true = physical_fields(est, tracks.mapping, grid), physical_fields(true, tracks.mapping, grid)
    err = (est["u_mean"] - true["u_mean"]) ** 2 + (est["v_mean"] - true["v_mean"]) ** 2
    return {"velocity_rms_error_m_s": float(np.sqrt(np.mean(err))),
            "velocity_rms_true_m_s": float(np.sqrt(np.mean(true["u_mean"] ** 2 + true["v_mean"] ** 2)))}


def _run_name(run_dir) -> str:
    """Returns the portable identity of a run (name and hash), or "" without one."""
    if run_dir is None:
        return ""
    from lagda.learning.model import run_identity

    return run_identity(run_dir)


def file_dt(path) -> float | None:
    """Returns the `dt` global attribute of a netCDF track file (a lagda dataset has one), else None."""
    if not os.path.isfile(path):
        return None  # a zarr store
    with open(path, "rb") as handle:
        if not handle.read(4).startswith((b"CDF", b"\x89HD")):
            return None  # CSV
    import xarray as xr

    with xr.open_dataset(path, engine="netcdf4", decode_times=False) as ds:
        value = ds.attrs.get("dt")
    return float(value) if value is not None and np.isfinite(float(value)) and float(value) > 0 else None
