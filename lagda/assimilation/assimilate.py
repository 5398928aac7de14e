"""Assimilation of observed drifter tracks: `assimilate` (tracks in memory) and `assimilate_file` (`lagda assimilate`).

`assimilate_file` walks one way through the layers: the method is built from its options (the
registry, lagda.assimilation.methods), the track file is read once (lagda.io.formats.read_tracks),
the model is found (lagda.assimilation.model.model_settings, or lagda.assimilation.methods.basis.basis_model
for a chosen basis), the tracks are checked against it (lagda.io.tracks.check_fits_model), the method
runs, the posterior is gridded (lagda.assimilation.fields) and written (lagda.io.results; temporary
name, then rename), scored against a known truth (lagda.assimilation.scores, basis.qg_scores) and
optionally drawn (lagda.assimilation.plot).
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from lagda.assimilation.methods.registry import METHODS, Method, check_options, make_method
from lagda.assimilation.model import FlowModel, model_settings
from lagda.assimilation.posterior import Posterior, describe_diagnostics
from lagda.io.tracks import Tracks


def assimilate(tracks: Tracks, method: Method | str, model: FlowModel, key=None, *, run_dir=None,
               **options) -> Posterior:
    """Returns the posterior over the coefficients of every field of `tracks` (field f of the posterior is field f).

    Args:
        tracks: observed tracks in model units; model: lagda.assimilation.model.FlowModel.
        method: a method object (lagda.assimilation.methods.METHODS), or its name with `options` (its
            config's fields) and, for a learned method, `run_dir` (a trained run).
        key: PRNG key (default key(0)).
    Raises:
        ValueError: for an unknown method or option, or a learned method without a trained model.
    """
    if isinstance(method, str):
        method = make_method(method, options, run_dir)
    elif options or run_dir is not None:
        raise ValueError("options and run_dir configure a method given by name; a method object has its own")
    return method(tracks, model, key)


def assimilate_file(tracks_path, out_path, method: str | None = None, run_dir=None, n_grid: int = 32, plot=None,
                    overwrite: bool = False, seed: int = 0, dt: float | None = None, box=None,
                    time_scale: float | None = None, basis: str | None = None, k_max: float = 12, degree: int = 3,
                    climatology=None, times: int | str | None = None, keep_undrogued: bool = False,
                    **method_options) -> dict:
    """Returns a summary dict after assimilating a track file and writing the result netCDF.

    Reads `tracks_path` (lagda.io.formats.read_tracks), finds the model (`model_settings`, or the
    chosen `basis`), checks the tracks against it (check_fits_model), runs `method` on each field,
    writes `out_path` (lagda.io.results.write_result, temporary file + rename; the settings' notes and
    each field's diagnostics in its attributes) and, with `plot`, a figure of field 0.

    The summary holds "method", "fields", "seconds", "notes" (settings guessed, list of str),
    "warnings" (check_fits_model, list of str), "diagnostics" (one line: what the method
    decided per field) and, for tracks with known truth, every score of lagda.assimilation.scores.
    Physical tracks (lon/lat or metres, CF times) are mapped onto the model (lagda.io.physical; the
    mapping's inferences are notes), the result is in physical units, and with a known truth the
    summary adds "velocity_rms_error_m_s" and "velocity_rms_true_m_s": the RMS over the grid, grid
    times and fields of the error of the posterior-mean velocity, and of the true velocity.

    With `basis` ("circular" or "rectangular", lagda.assimilation.methods.basis) the model is that basis to
    k_max times Legendre polynomials of `degree` in time over the tracks' window, its prior from the
    QG truth file `climatology` (else the default spectrum shape at the tracks' RMS speed); `linear`
    then models the velocity the basis leaves out as an OU error along each track (its
    representation "auto"). For a QG truth file (lagda simulate --flow qg) the summary adds
    "velocity_error_vs_truth" (relative L2 of the posterior-mean velocity against the gridded truth,
    over its grid, times and flows), "velocity_error_vs_projection", "projection_limit" and the coverage of
    the 95% bands, "velocity_coverage_vs_truth" and "velocity_coverage_vs_projection"
    (lagda.assimilation.methods.basis.qg_scores).

    Args:
        method: a name of lagda.assimilation.methods.METHODS, or None for the default (`default_method`: the
            ocean path, linear in the circular basis, for physical tracks without a lagda model; else hybrid with
            the shipped encoder); run_dir: trained run (needed by the learned methods; for the others it supplies
            the modes and prior).
        dt: RK4 step (default: the run's, else the file's dt attribute, else guessed; see model_settings).
        box: (west, east, south, north) of physical tracks (default: the file's, else inferred).
        time_scale: seconds per model time unit for physical tracks (default: the file's, else inferred).
        times: the result's grid times (fields.result_times): None (daily for physical tracks, else 11 over the
            window), a count, or a step such as "6h" for physical tracks.
        keep_undrogued: keep fixes a GDP file marks undrogued (drogue_status 0; default: left out, counted).
        method_options: fields of the method's config (members, top_k, ...; the renamed options of CHANGELOG.md
            are accepted with a note).

    Example:
        >>> import os, tempfile
        >>> from simulate import generate_dataset, small
        >>> folder = tempfile.mkdtemp()
        >>> data = generate_dataset(small(n_samples=4, t_final=0.02), os.path.join(folder, "pairs.nc"),
        ...                         report=lambda line: None)
        >>> summary = assimilate_file(data, os.path.join(folder, "result.nc"), "linear")
        >>> summary["fields"], summary["velocity_rel_l2"] < 1  # better than the prior mean, zero
        (4, True)

    Raises:
        ValueError: bad method / option, existing output without overwrite, tracks that do not fit.
        FileNotFoundError: missing track file or run directory.
    """
    import warnings as python_warnings

    import jax

    from lagda.assimilation.fields import posterior_result, result_times
    from lagda.io.formats import read_tracks
    from lagda.io.results import write_result
    from lagda.io.tracks import check_fits_model

    if os.path.exists(out_path) and not overwrite:
        raise ValueError(f"{out_path} exists; pass overwrite=True to replace it")
    if method is not None:
        check_options(method, method_options)  # before the file is read
    with python_warnings.catch_warnings(record=True) as caught:  # the reader's assumptions become summary warnings
        python_warnings.simplefilter("always")
        tracks = read_tracks(tracks_path, box=box, time_scale=time_scale, keep_undrogued=keep_undrogued)
    read_warnings = [str(w.message) for w in caught]  # e.g. a layout assumed from the dimensions
    default_note = ()
    if method is None:
        method, basis, run_dir, note = default_method(tracks, basis, climatology, run_dir)
        default_note = (note,)
    if basis is None and climatology is not None:
        raise ValueError("a climatology (--climatology) needs a chosen basis (--basis)")
    if basis is not None and method in METHODS and not METHODS[method].chosen_basis:
        raise ValueError(f"--basis: {method} compares tracks with a trained model's flows, which have no time basis: "
                         "use --method linear, var or enkf")
    method_obj = make_method(method, method_options, run_dir)
    method_obj.progress = True  # a file's user waits: the slow methods show how far they are
    with jax.enable_x64(True):  # inversions and scores in float64 whatever the caller's JAX setting
        if basis is None:
            model = model_settings(tracks, run_dir, dt)
            warnings = read_warnings + check_fits_model(tracks, model.dt, model.k1, model.k2, model.omega)
        else:
            from lagda.assimilation.methods.basis import adopt_climatology_mapping, basis_model

            clim = None if climatology is None else read_tracks(climatology)
            if clim is not None:
                tracks, _ = adopt_climatology_mapping(tracks, clim)  # its note joins tracks.notes
                tracks = dataclasses.replace(tracks, notes=tracks.notes + (f"climatology: {os.fspath(climatology)}",))
            model = basis_model(tracks, basis, k_max, degree, clim, dt)
            warnings = read_warnings + check_fits_model(tracks, model.dt)  # a chosen basis: the times only
        grid_times, times_note = result_times(tracks, times)
        notes = default_note + tuple(tracks.notes) + model.notes + method_obj.notes + (times_note,)
        posterior = method_obj(tracks, model, jax.random.key(seed))
        attrs = {"assim_config": json.dumps(dataclasses.asdict(method_obj.config)), "model_run": _run_name(run_dir),
                 "seed": int(seed), "dt": float(model.dt), "settings_notes": json.dumps(list(notes)),
                 "read_warnings": json.dumps(list(warnings)),
                 **(tracks.clean.attrs() if tracks.clean is not None else {})}
        result = posterior_result(posterior, model, grid_times, n_grid, tracks, attrs)
        write_result(out_path, result)
        summary = {"method": method, "fields": tracks.n_field, "seconds": float(np.sum(posterior.seconds)),
                   "notes": list(notes), "warnings": list(warnings),
                   "diagnostics": describe_diagnostics(method, posterior.diagnostics())}
        summary.update(_scores(posterior, tracks, model, result, n_grid))
    if plot:
        from lagda.assimilation.plot import plot_assimilation

        plot_assimilation(result, plot, tracks=tracks)
    return summary


def default_method(tracks: Tracks, basis, climatology, run_dir) -> tuple[str, str | None, object, str]:
    """Returns (method, basis, run_dir, note) of a file assimilated without a method.

    Physical tracks (lon/lat or metres) without a lagda model (no wavevectors in the file, no run given) take the
    ocean path: `linear` in the circular basis (its prior and error model chosen from the tracks, or from the
    climatology). Anything else takes `hybrid` with the run given, else the shipped encoder of every regime.
    """
    if tracks.mapping is not None and tracks.k1 is None and run_dir is None:
        basis = basis or "circular"
        return "linear", basis, None, (
            f"method: linear in the {basis} basis (physical tracks without a lagda model: the ocean path; "
            "--method picks another)")
    if basis is not None or climatology is not None:
        return "linear", basis, run_dir, "method: linear (a chosen basis; --method picks another)"
    if run_dir is None:
        from lagda.demo import DEFAULT_MODEL, shipped

        run_dir = str(shipped(DEFAULT_MODEL))
    return "hybrid", None, run_dir, f"method: hybrid with the encoder {_run_name(run_dir) or run_dir} (--method " \
                                    "picks another)"


def _scores(posterior: Posterior, tracks: Tracks, model: FlowModel, result, n_grid: int) -> dict:
    """Returns the scores against the truth the tracks carry: QG gridded truth, true coefficients, or none."""
    if model.time is not None:
        from lagda.assimilation.methods.basis import qg_scores

        return qg_scores(tracks, posterior, model)
    if tracks.true_coef is None:
        return {}
    from lagda.assimilation.scores import physical_velocity_error, score_posterior

    scores = score_posterior(posterior, tracks, model.k1, model.k2, model.omega, model.dt, n_grid=n_grid)
    out = {name: value for name, value in scores.items() if name != "per_field"}
    if tracks.mapping is not None:
        out.update(physical_velocity_error(result, tracks))
    return out


def _run_name(run_dir) -> str:
    """Returns the portable identity of a run (name and hash), or "" without one."""
    if run_dir is None:
        return ""
    from lagda.learning.model import run_identity

    return run_identity(run_dir)
