"""`lagda evaluate --assimilation`: every lagda.assimilation.scores score per method on tracks with known truth."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings

import jax
import numpy as np

from lagda import report
from lagda.assimilation.methods.config import RENAMED
from lagda.assimilation.methods.learned import scorer_from_run
from lagda.assimilation.methods.registry import ENCODER_STARTS, METHODS
from simulate.atomic import write_atomic

COLUMNS = (("velocity_rel_l2", "field err"), ("track_velocity_rel_l2", "track-vel err"),
           ("resim_rms_true", "resim rms"), ("forecast_rms", "forecast rms"), ("coef_calibration", "coef 95%"),
           ("velocity_calibration", "vel 95%"), ("seconds_per_track", "s/track"))


def evaluate_assimilation(tracks_path, methods=("linear", "embed", "hybrid"), run_dir=None, n_grid: int = 32,
                          seed: int = 0, log=None, **options) -> dict:
    """Returns `{method: {score: float}}`: lagda.assimilation.scores.score_posterior averaged over the fields.

    Parameters
    ----------
    tracks_path
        a track file with the true coefficients (lagda dataset or CF file with truth).
    methods
        assimilation methods
    run_dir
        trained run (needed by retrieve / embed / hybrid).
    log
        called with each settings note and model-check warning ("note: ..." / "warning: ...");
        default `warnings.warn`, so nothing guessed goes unsaid.
    options
        config fields, each applied to every method that has it (an option no method has is refused).

    Raises
    ------
    ValueError
        unknown method / option, tracks without truth, learned method without run_dir.
    FileNotFoundError
        missing track file or run directory.
    """
    from lagda.assimilation.methods.config import configure
    from lagda.assimilation.model import model_settings
    from lagda.assimilation.scores import score_posterior
    from lagda.io.formats import read_tracks
    from lagda.io.tracks import check_fits_model

    log = log or warnings.warn
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"unknown method(s) {', '.join(bad) or '(none)'}; valid methods: {', '.join(METHODS)}")
    used = set()
    configs = {}
    for m in methods:  # every option must apply to some method
        configs[m], notes = configure(m, METHODS[m].Config, options, strict=False)
        used |= {name for name in options if name in {f.name for f in dataclasses.fields(METHODS[m].Config)}}
        for line in notes:
            log(f"note: {m}: {line}")
    # the learned methods, and sample started from the learned conditional or hybrid's posterior, read the encoder
    reads_encoder = {m for m in methods if METHODS[m].learned or (m == "sample" and configs[m].start in ENCODER_STARTS)}
    if run_dir is None and reads_encoder:
        raise ValueError("methods retrieve / embed / hybrid and sample --start learned / hybrid need a trained model "
                         "(--model RUN)")
    unused = sorted(set(options) - used - set(RENAMED))
    if unused:
        raise ValueError(f"option(s) {', '.join(unused)} apply to none of the methods {', '.join(methods)}")
    if not os.path.exists(tracks_path):  # a file, or a zarr store (a directory)
        raise FileNotFoundError(f"no such track file: {tracks_path}")
    tracks = read_tracks(tracks_path)
    if tracks.true_coef is None:
        raise ValueError(f"{tracks_path} has no true coefficients: cannot score the assimilation")
    with jax.enable_x64(True):
        model = model_settings(tracks, run_dir)
        for kind, lines in (("note", model.notes), ("warning", check_fits_model(tracks, model.dt, model.k1, model.k2,
                                                                                     model.omega))):
            for line in lines:
                log(f"{kind}: {line}")
        # the trained model, restored once for every learned method
        from lagda.learning.model import run_identity

        encoder = scorer_from_run(run_dir)[0] if reads_encoder else None
        table = {}
        for m in methods:
            start = time.perf_counter()
            if METHODS[m].learned:
                method = METHODS[m](encoder, configs[m])
            elif m in reads_encoder:
                method = METHODS[m](configs[m], encoder=encoder, run=run_identity(run_dir))  # as Sample.from_run
            else:
                method = METHODS[m](configs[m])
            post = method(tracks, model, jax.random.key(seed))
            scores = score_posterior(post, tracks, model.k1, model.k2, model.omega, model.dt, n_grid=n_grid)
            table[m] = {name: v for name, v in scores.items() if name != "per_field"}
            table[m]["wall_seconds"] = time.perf_counter() - start
    return table


def format_table(table: dict) -> str:
    """Returns a markdown table of `evaluate_assimilation`'s scores, one row per method."""
    return report.format_table(table, COLUMNS)


def write_scores(table: dict, path) -> None:
    """Writes `table` as JSON to `path` (temporary file in the same directory, then renamed)."""
    scores = {m: {k: float(v) for k, v in s.items() if np.isscalar(v)} for m, s in table.items()}
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(scores, indent=2)))
