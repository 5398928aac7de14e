"""Assimilation of observed drifter tracks: `assimilate` (tracks in memory) and `assimilate_file` (`lagda assimilate`).

`assimilate_file` takes its options as one `AssimilateSettings` (lagda.assimilation.settings, checked when made)
and walks one way through the layers: the method is built from its config (the
registry, lagda.assimilation.methods), the track file is read once (lagda.io.formats.read_tracks),
the model is found (lagda.assimilation.model.model_settings, or lagda.assimilation.methods.basis.basis_model
for a chosen basis), the tracks are checked against it (lagda.io.tracks.check_fits_model), the method
runs, the posterior is gridded (lagda.assimilation.fields) and written (lagda.io.results; temporary
name, then rename), scored against a known truth (lagda.assimilation.scores, basis.qg_scores) and
optionally drawn (lagda.assimilation.plot). It returns an `AssimilationSummary`.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from lagda.arguments import given
from lagda.assimilation.background import BackgroundFlow, add_background, background_notes
from lagda.assimilation.methods.registry import METHODS, Method, make_method
from lagda.assimilation.model import FlowModel, model_settings
from lagda.assimilation.posterior import Posterior, describe_diagnostics
from lagda.assimilation.settings import AssimilateSettings, check_background
from lagda.io.background import open_background
from lagda.io.tracks import Tracks


@dataclasses.dataclass(frozen=True)
class AssimilationSummary:
    """What `assimilate_file` did: the method, what it decided, and its scores when the tracks carry a truth.

    Attributes
    ----------
    method : str
        The method that ran (a key of lagda.assimilation.METHODS; the default method when none was given).
    fields : int
        Fields (independent flows) of the track file, each assimilated on its own.
    seconds : float
        Wall-clock seconds of the method, summed over fields (reading, gridding and writing left out).
    notes : tuple of str
        The settings found or guessed (method, model, mapping, grid times, deprecated options) and what the method
        decided that changes the answer (`method_notes`), one line each; also in the result file's `settings_notes`.
    warnings : tuple of str
        What the reader assumed and what `check_fits_model` found about the tracks, one line each.
    diagnostics : str
        One line: what the method decided on each field (lagda.assimilation.posterior.describe_diagnostics).
    scores : dict of str to float
        Every score against the truth the tracks carry, empty without one. Tracks with true coefficients: those of
        lagda.assimilation.scores.score_posterior (e.g. "velocity_rel_l2", relative L2 of the posterior-mean
        velocity over the domain and window; "seconds_per_track"), plus for physical tracks
        "velocity_rms_error_m_s" and "velocity_rms_true_m_s" (m/s, RMS over the grid, grid times and fields).
        A QG truth file: those of lagda.assimilation.methods.basis.qg_scores ("velocity_error_vs_truth",
        "velocity_error_vs_projection", "projection_limit", "velocity_coverage_vs_truth", ...; dimensionless).
    projection_note : str or None
        With a QG truth whose grid is coarser than the basis: why the projection scores are missing; else None.
    """

    method: str
    fields: int
    seconds: float
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    diagnostics: str
    scores: dict[str, float] = dataclasses.field(default_factory=dict)
    projection_note: str | None = None


def assimilate(tracks: Tracks, method: Method | str, model: FlowModel, key=None, *, run_dir=None,
               **options) -> Posterior:
    """Returns the posterior over the coefficients of every field of `tracks` (field f of the posterior is field f).

    Parameters
    ----------
    tracks
        observed tracks in model units
    model
        lagda.assimilation.model.FlowModel.
    method
        a method object (lagda.assimilation.methods.METHODS), or its name with `options` (its
        config's fields) and, for a learned method, `run_dir` (a trained run).
    key
        PRNG key (default key(0)).

    Raises
    ------
    ValueError
        for an unknown method or option, or a learned method without a trained model.
    """
    if isinstance(method, str):
        method = make_method(method, options, run_dir)
    elif options or run_dir is not None:
        raise ValueError("options and run_dir configure a method given by name; a method object has its own")
    return method(tracks, model, key)


def assimilate_file(tracks_path, out_path, settings: AssimilateSettings | None = None, *, overwrite: bool = False,
                    plot=None, plot_day: str | None = None) -> AssimilationSummary:
    """Returns the summary of assimilating a track file, after writing the result netCDF.

    Reads `tracks_path` (lagda.io.formats.read_tracks), finds the model (`model_settings`, or the
    chosen basis), checks the tracks against it (check_fits_model), runs the method on each field,
    writes `out_path` (lagda.io.results.write_result, temporary file + rename; the settings' notes and
    each field's diagnostics in its attributes) and, with `plot`, a figure of field 0 on one day. Physical tracks
    (lon/lat or metres, CF times) are mapped onto the model (lagda.io.physical; the mapping's inferences
    are notes) and the result is in physical units. With the settings' background (longitude/latitude tracks,
    `linear` in a chosen basis) the method fits the drifters' departure from the product and the product is added
    back to u, v (lagda.assimilation.background); the scores against a truth, which judge the coefficients, are then
    left out (a note).

    Parameters
    ----------
    tracks_path : str or path-like
        A track file of any layout read_tracks reads: CF trajectory netCDF, Parcels output, a lagda dataset, CSV.
    out_path : str or path-like
        The result netCDF to write (lagda.io.results).
    settings : AssimilateSettings, optional
        The method, its config and every option that decides the result (lagda.assimilation.settings). None: the
        defaults (the method chosen from the tracks).
    overwrite : bool
        Replace an existing `out_path`.
    plot : str or path-like, optional
        A figure of field 0 to draw (true psi if known, posterior mean, std, tracks; lagda.assimilation.plot).
    plot_day : str, optional
        With `plot`, for tracks with dates: the day the figure shows (ISO 8601, e.g. "2025-03-15"; the grid time
        nearest it); None: the middle grid time of the window. Checked before the method runs.

    Returns
    -------
    AssimilationSummary
        The method, the number of fields, the method's seconds, notes, warnings, one diagnostics line and, for
        tracks with a known truth, the scores (see AssimilationSummary).

    Raises
    ------
    ValueError
        One line for an existing `out_path` without `overwrite`, a method that cannot use the chosen basis, a
        climatology without a basis, tracks that do not fit the model, or a `plot_day` without `plot`, not a date
        or outside the tracks' window (the settings' own values are checked when they are made:
        AssimilateSettings); a background with a method or tracks that cannot take one, a product lagda cannot read,
        or one with no value at any fix. Nothing is written.
    FileNotFoundError
        A missing track file, run directory or background.

    Examples
    --------
    >>> import os, tempfile
    >>> from lagda.assimilation.methods.config import LinearConfig
    >>> from simulate import generate_dataset, small
    >>> folder = tempfile.mkdtemp()
    >>> data = generate_dataset(small(n_samples=4, t_final=0.02), os.path.join(folder, "pairs.nc"),
    ...                         report=lambda line: None)
    >>> summary = assimilate_file(data, os.path.join(folder, "result.nc"),
    ...                           AssimilateSettings("linear", LinearConfig(members=16)))
    >>> summary.method, summary.fields, summary.scores["velocity_rel_l2"] < 1  # the prior mean, zero, errs 1
    ('linear', 4, True)
    """
    import jax

    from lagda.assimilation.fields import posterior_result, result_times
    from lagda.io.results import write_result

    settings = AssimilateSettings() if settings is None else settings
    if os.path.exists(out_path) and not overwrite:
        raise ValueError(f"{out_path} exists; pass {given('overwrite')} to replace it")
    if plot_day is not None:
        from lagda.assimilation.plot import parse_day

        if not plot:
            raise ValueError(f"{given('plot_day', plot_day)} needs {given('plot', 'FIG.png')}")
        parse_day(plot_day)  # a bad date is refused before the file is read
    background = None if settings.background is None else open_background(settings.background)
    tracks, read_warnings = _read(tracks_path, settings)
    method, basis, run_dir, default_note = _choose_method(tracks, settings)
    if background is not None:
        _check_background(settings, method, basis, tracks)  # before a trained run is restored
    method_obj = make_method(method, settings.config, run_dir)
    method_obj.progress = True  # a file's user waits: the slow methods show how far they are
    with jax.enable_x64(True):  # inversions and scores in float64 whatever the caller's JAX setting
        tracks, model, fit_warnings = _model(tracks, settings, basis, run_dir)
        if background is not None:  # the prior mean: the method fits the departure from it
            model = dataclasses.replace(model, background=BackgroundFlow(background, tracks.mapping))
        warnings = read_warnings + fit_warnings
        grid_times, times_note = result_times(tracks, settings.times)
        if plot:
            from lagda.assimilation.plot import plot_time_index

            plot_index = plot_time_index(tracks.mapping, grid_times, plot_day)  # before the method runs
        notes = default_note + tuple(tracks.notes) + model.notes + method_obj.notes + (times_note,)
        if background is not None:  # before the method runs: a product with no value at any fix is refused
            notes = notes + background_notes(model.background, tracks)
        posterior = method_obj(tracks, model, jax.random.key(settings.seed))
        notes = notes + method_notes(method, posterior)
        attrs = {"assim_config": json.dumps(dataclasses.asdict(method_obj.config)), "model_run": _run_name(run_dir),
                 "seed": int(settings.seed), "dt": float(model.dt), "settings_notes": json.dumps(list(notes)),
                 "read_warnings": json.dumps(list(warnings)),
                 **(tracks.clean.attrs() if tracks.clean is not None else {})}
        result = posterior_result(posterior, model, grid_times, settings.n_grid, tracks, attrs)
        if settings.local_gp and method == "linear" and basis is not None and tracks.mapping is not None:
            from lagda.assimilation.local_gp import box_local_gp

            notes = notes + tuple(box_local_gp(result, posterior, model, settings.k_max))
        if background is not None:  # u, v were the departure's
            notes = notes + add_background(result, model.background) + _unscored(tracks)
        result.attrs["settings_notes"] = json.dumps(list(notes))
        land = land_warning(result)
        if land:
            warnings = tuple(warnings) + (land,)
            result.attrs["read_warnings"] = json.dumps(list(warnings))
        write_result(out_path, result)
        scores = {} if background is not None else _scores(posterior, tracks, model, result, settings.n_grid)
        projection_note = scores.pop("projection_note", None)
        summary = AssimilationSummary(method=method, fields=tracks.n_field, seconds=float(np.sum(posterior.seconds)),
                                      notes=tuple(notes), warnings=tuple(warnings),
                                      diagnostics=describe_diagnostics(method, posterior.diagnostics(),
                                                                       tracks.mapping),
                                      scores=scores, projection_note=projection_note)
    if plot:
        from lagda.assimilation.plot import plot_assimilation

        plot_assimilation(result, plot, tracks=tracks, time_index=plot_index)
    return summary


def _read(tracks_path, settings: AssimilateSettings) -> tuple[Tracks, list[str]]:
    """Returns the tracks of `tracks_path` read with the settings' box, time scale, drogue and low-pass options, and
    the reader's assumptions (e.g. a layout assumed from the dimensions), one line each."""
    import warnings as python_warnings

    from lagda.io.formats import read_tracks

    with python_warnings.catch_warnings(record=True) as caught:  # the reader's assumptions become summary warnings
        python_warnings.simplefilter("always")
        tracks = read_tracks(tracks_path, box=settings.box, time_scale=settings.time_scale,
                             keep_undrogued=settings.keep_undrogued, low_pass=settings.low_pass)
    return tracks, [str(w.message) for w in caught]


def _choose_method(tracks: Tracks, settings: AssimilateSettings) -> tuple[str, str | None, object, tuple[str, ...]]:
    """Returns (method, basis, run_dir, notes) that assimilate the tracks: the settings', or with no method the one
    `default_method` chooses (and its note), the run the method reads (`encoder_for`).

    Raises
    ------
    ValueError
        A climatology without a basis, or a method that cannot use the chosen basis (checked before a trained run
        is restored).
    """
    method, basis, run_dir, notes = settings.method, settings.basis, settings.run_dir, ()
    if method is None:
        method, basis, run_dir, note = default_method(tracks, basis, settings.climatology, run_dir)
        notes = (note,)
    if basis is None and settings.climatology is not None:
        raise ValueError(f"a climatology ({given('climatology', settings.climatology)}) needs a chosen basis "
                         f"({given('basis', 'circular')} or rectangular)")
    METHODS[method].check_basis(basis is not None)  # before a trained run is restored
    return method, basis, encoder_for(method, settings.config, basis, run_dir), notes


def _model(tracks: Tracks, settings: AssimilateSettings, basis: str | None,
           run_dir) -> tuple[Tracks, FlowModel, list[str]]:
    """Returns (tracks, model, warnings): the model of the run or file (`model_settings`), or of the chosen `basis`
    with the settings' k_max, degree and climatology (whose mapping the tracks then take, with a note); and what
    `check_fits_model` found (a chosen basis: the times only)."""
    from lagda.io.tracks import check_fits_model

    if basis is None:
        model = model_settings(tracks, run_dir, settings.dt)
        return tracks, model, check_fits_model(tracks, model.dt, model.k1, model.k2, model.omega)
    from lagda.assimilation.methods.basis import adopt_climatology_mapping, basis_model
    from lagda.io.formats import read_tracks

    climatology = settings.climatology
    clim = None if climatology is None else read_tracks(climatology)
    if clim is not None:
        tracks, _ = adopt_climatology_mapping(tracks, clim)  # its note joins tracks.notes
        tracks = dataclasses.replace(tracks, notes=tracks.notes + (f"climatology: {os.fspath(climatology)}",))
    model = basis_model(tracks, basis, settings.k_max, settings.degree, clim, settings.dt)
    return tracks, model, check_fits_model(tracks, model.dt)


def _check_background(settings: AssimilateSettings, method: str, basis: str | None, tracks: Tracks) -> None:
    """Checks that the method chosen for the tracks can take the settings' background (a method given, and a
    climatology, are checked when the settings are made: lagda.assimilation.settings.check_background).

    Raises
    ------
    ValueError
        One line naming the option: a method other than linear chosen from the tracks, tracks that are not
        longitude/latitude (model units, projected metres), no chosen basis (a model run's or the file's modes), or
        linear's white error model.
    """
    path, config = settings.background, settings.config
    check_background(path, method, None)
    if tracks.mapping is None or tracks.mapping.coordinates != "lonlat":
        kind = "in model units" if tracks.mapping is None else "projected (x, y metres)"
        raise ValueError(f"{given('background', path)}: a product on longitude and latitude, for longitude/latitude "
                         f"drifters; these tracks are {kind}")
    if basis is None:
        raise ValueError(f"{given('background', path)}: for the linear method in a chosen basis "
                         f"({given('basis', 'circular')}, the default for drifters without a model run)")
    representation = config.get("representation") if isinstance(config, dict) else getattr(config, "representation",
                                                                                              None)
    if representation == "white":
        raise ValueError(f"{given('background', path)}: the linear method fits the departure from it with its error "
                         "model along the tracks (representation 'auto' or 'ou'), not 'white'")


def _unscored(tracks: Tracks) -> tuple[str, ...]:
    """Returns the note of a truth the tracks carry and a background leaves unscored, else ()."""
    if tracks.gridded_truth is None and tracks.true_coef is None:
        return ()
    return ("scores against the truth left out: they judge the coefficients, which hold the departure from the "
            "background alone",)


def land_warning(result) -> str | None:
    """Returns a warning when cells of a longitude/latitude result have no sea in the GLOBE 1-km land mask (its
    box squared out over a coast): their u, v are the basis field's extrapolation, not currents; None otherwise.
    The result is kept whole (its scores, its psi): the warning and the attribute `land_cells` say where."""
    mapping = result.mapping
    if mapping is None or mapping.coordinates != "lonlat" or len(result.x) < 2 or len(result.y) < 2:
        return None
    from lagda.io.land import SOURCE, sea_fraction
    from lagda.io.results import physical_axes

    lon, lat = physical_axes(result)
    try:
        land = sea_fraction(lon, lat, (abs(lon[1] - lon[0]), abs(lat[1] - lat[0]))) == 0
    except (ImportError, ValueError):
        return None
    result.attrs["land_cells"] = int(land.sum())
    if not land.any():
        return None
    return (f"land: {int(land.sum()):,} of {land.size:,} cells of the grid ({land.mean():.1%}) have no sea in "
            f"{SOURCE}: u, v there are the basis field's extrapolation across the coast, not currents (`lagda "
            "map` leaves such cells NaN)")


METHOD_NOTES = ("noise_note", "velocity_outliers_note", "zero_guard_note")  # info keys of a field shown as notes


def method_notes(method: str, posterior: Posterior) -> tuple[str, ...]:
    """Returns one line per field and key of METHOD_NOTES in the posterior's info: "method: field f: text" (no
    "field f: " with one field)."""
    lines = []
    for f, info in enumerate(posterior.info or ()):
        where = f"field {f}: " if posterior.n_field > 1 else ""
        lines += [f"{method}: {where}{info[key]}" for key in METHOD_NOTES if info.get(key)]
    return tuple(lines)


def default_method(tracks: Tracks, basis, climatology, run_dir) -> tuple[str, str | None, object, str]:
    """Returns (method, basis, run_dir, note) of a file assimilated without a method.

    Physical tracks (lon/lat or metres) without a lagda model (no wavevectors in the file, no run given) take the
    ocean path: `linear` in the circular basis (its prior and error model chosen from the tracks, or from the
    climatology). Anything else takes `hybrid` with the run given, else the shipped encoder of every regime.
    """
    if tracks.mapping is not None and tracks.k1 is None and run_dir is None:
        basis = basis or "circular"
        return "linear", basis, None, (
            "method: linear, a Gaussian fit of a smooth flow to the drifters' velocities with its std (--method picks "
            "another)")
    if basis is not None or climatology is not None:
        return "linear", basis, run_dir, "method: linear (a chosen basis; --method picks another)"
    if run_dir is None:
        from lagda.examples import DEFAULT_MODEL, shipped

        run_dir = str(shipped(DEFAULT_MODEL))
    return "hybrid", None, run_dir, f"method: hybrid with the encoder {_run_name(run_dir) or run_dir} (--method " \
                                    "picks another)"


def encoder_for(method: str, config, basis, run_dir):
    """Returns the trained run `method` reads: `run_dir` if given or if the method reads none, else the encoder
    shipped with lagda for every observation regime.

    The learned methods (and `sample` started from `hybrid`) read an encoder; without one they take the shipped
    encoder, as `lagda assimilate` does.

    Raises
    ------
    ValueError
        a method that reads an encoder, in a chosen basis, without a run: the shipped encoders know
        lagda's own flows only.
    """
    chosen = METHODS[method]
    start = config.get("start") if isinstance(config, dict) else getattr(config, "start", None)
    if run_dir is not None or not (chosen.learned or (method == "sample" and start == "hybrid")):
        return run_dir
    if basis is not None:
        if chosen.chosen_basis:
            raise ValueError(f"method {method} in a chosen basis needs a trained run ({given('run_dir', 'RUN')}): an "
                             "encoder trained on pairs in that basis "
                             "(lagda.assimilation.methods.basis.write_basis_pairs; experiments/qg/hybrid.py); the "
                             "shipped encoders know lagda's own flows only")
        return run_dir
    from lagda.examples import DEFAULT_MODEL, shipped

    return str(shipped(DEFAULT_MODEL))


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
