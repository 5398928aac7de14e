"""`lagda evaluate --assimilation`: every lagda.assimilation.scores score per method on tracks with known truth."""

from __future__ import annotations

import json
import os
import time
import warnings

import jax
import numpy as np

from lagda import report
from simulate.atomic import write_atomic
from lagda.assimilation.methods import METHODS
from lagda.assimilation.methods.config import LEARNED_METHODS, config_from_options

COLUMNS = (("velocity_rel_l2", "field err"), ("track_velocity_rel_l2", "track-vel err"),
           ("resim_rms_true", "resim rms"), ("forecast_rms", "forecast rms"), ("coef_calibration", "coef 95%"),
           ("velocity_calibration", "vel 95%"), ("seconds_per_track", "s/track"))


def evaluate_assimilation(tracks_path, methods=("linear", "embed", "hybrid"), run_dir=None, n_grid: int = 32,
                          seed: int = 0, log=None, **options) -> dict:
    """Returns `{method: {score: float}}`: lagda.assimilation.scores.score_posterior averaged over the fields.

    Args:
        tracks_path: a track file with the true coefficients (lagda dataset or CF file with truth).
        methods: assimilation methods; run_dir: trained run (needed by retrieve / embed / hybrid).
        log: called with each settings note and model-check warning ("note: ..." / "warning: ...");
            default `warnings.warn`, so nothing guessed goes unsaid.
        options: AssimConfig fields applied to every method.
    Raises:
        ValueError: unknown method / option, tracks without truth, learned method without run_dir.
        FileNotFoundError: missing track file or run directory.
    """
    with jax.enable_x64(True):
        return _evaluate(tracks_path, tuple(methods), run_dir, n_grid, seed, log or warnings.warn, options)


def _evaluate(tracks_path, methods, run_dir, n_grid, seed, log, options) -> dict:
    from lagda.assimilation.assimilate import assimilate, file_dt, model_settings
    from lagda.assimilation.methods.learned import scorer_from_run
    from lagda.assimilation.scores import score_posterior
    from lagda.io.tracks import check_fits_model, read_tracks

    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"unknown method(s) {', '.join(bad) or '(none)'}; valid methods: {', '.join(METHODS)}")
    if run_dir is None and any(m in LEARNED_METHODS for m in methods):
        raise ValueError("methods retrieve / embed / hybrid need a trained model (--model RUN)")
    if not os.path.exists(tracks_path):  # a file, or a zarr store (a directory)
        raise FileNotFoundError(f"no such track file: {tracks_path}")
    config = config_from_options(options)
    tracks = read_tracks(tracks_path)
    if tracks.true_coef is None:
        raise ValueError(f"{tracks_path} has no true coefficients: cannot score the assimilation")
    k1, k2, omega, scale, dt, notes = model_settings(tracks, run_dir, file_dt=None if run_dir else file_dt(tracks_path))
    for kind, lines in (("note", notes), ("warning", check_fits_model(tracks, dt, k1, k2, omega))):
        for line in lines:
            log(f"{kind}: {line}")
    # the trained model, restored once for every learned method
    scorer = scorer_from_run(run_dir)[0] if any(m in LEARNED_METHODS for m in methods) else None
    table = {}
    for method in methods:
        start = time.perf_counter()
        post = assimilate(tracks, method, (k1, k2, omega), scale, dt, config=config, key=jax.random.key(seed),
                          scorer=scorer)
        scores = score_posterior(post, tracks, k1, k2, omega, dt, n_grid=n_grid)
        table[method] = {name: v for name, v in scores.items() if name != "per_field"}
        table[method]["wall_seconds"] = time.perf_counter() - start
    return table


def format_table(table: dict) -> str:
    """Returns a markdown table of `evaluate_assimilation`'s scores, one row per method."""
    return report.format_table(table, COLUMNS)


def write_scores(table: dict, path) -> None:
    """Writes `table` as JSON to `path` (temporary file in the same directory, then renamed)."""
    scores = {m: {k: float(v) for k, v in s.items() if np.isscalar(v)} for m, s in table.items()}
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(scores, indent=2)))
