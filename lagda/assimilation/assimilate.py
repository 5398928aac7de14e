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

import jax
import numpy as np

from lagda.assimilation.methods import METHODS, AssimConfig, FieldEstimate, FlowModel, assimilate_enkf, assimilate_linear, assimilate_var
from lagda.assimilation.methods.hybrid import assimilate_hybrid
from lagda.assimilation.methods.learned import Scorer, learned_estimates, scorer_from_run
from lagda.assimilation.methods.config import config_from_options
from lagda.assimilation.posterior import Posterior
from lagda.io.tracks import Tracks

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
        modes: (k1, k2, omega), each `(mode,)`; prior_scale: `(mode,)` prior std a_k; dt: RK4 step.
        run_dir: trained run (retrieve / embed / hybrid), unless `scorer` is given.
        config: AssimConfig (default AssimConfig()); key: PRNG key (default key(0)).
        scorer: the learned comparison (embed_fn, similarity); bank: complex `(n, mode)` or None (prior).
    Raises:
        ValueError: for an unknown method, or a learned method without run_dir / scorer.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    with jax.enable_x64(True):  # the inversions need float64 whatever the caller's JAX setting
        return _assimilate(tracks, method, modes, prior_scale, dt, run_dir, config, key, scorer, bank)


def _assimilate(tracks, method, modes, prior_scale, dt, run_dir, config, key, scorer, bank) -> Posterior:
    config = (config or AssimConfig()).validate()
    key = jax.random.key(0) if key is None else key
    k1, k2, omega = (np.asarray(m) for m in modes)
    model = FlowModel(k1.astype(np.int32), k2.astype(np.int32), np.asarray(omega, np.float64),
                      np.asarray(prior_scale, np.float64), float(dt))
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
    """Returns (FieldEstimates, seconds per field) of retrieve / embed / hybrid."""
    if scorer is None:
        if run_dir is None:
            raise ValueError(f"method {method!r} needs a trained model (run_dir)")
        scorer, _ = scorer_from_run(run_dir)
    start = time.perf_counter()
    old_hybrid = method == "hybrid" and config.hybrid_refine == "var"
    try:
        queries = np.concatenate([scorer.embed_fn(np.asarray(_field_tracks(tracks, f)[0])[None]) for f in range(tracks.n_field)])
    except ValueError:  # tracks the encoder cannot read (e.g. other observation times)
        if method != "hybrid" or old_hybrid:
            raise
        queries = None  # hybrid falls back to the prior as its learned conditional (= linear, refined)
    first = "retrieve" if method == "retrieve" or (old_hybrid and config.hybrid_start == "retrieve") else "embed"
    if queries is None:
        prior = {"mean": np.zeros(2 * model.n_modes), "var": model.prior_var}
        estimates = [FieldEstimate(np.zeros((1, model.n_modes), complex), np.ones(1), info=prior)] * tracks.n_field
    else:
        estimates = learned_estimates(first, queries, model, config, scorer, key, bank)
    shared = (time.perf_counter() - start) / tracks.n_field
    seconds = [shared] * tracks.n_field
    if method != "hybrid":
        return estimates, seconds
    refined = []
    for f, est in enumerate(estimates):
        start = time.perf_counter()
        if not old_hybrid:  # the learned conditional as the prior of the velocity inversion
            out = assimilate_hybrid(*_field_tracks(tracks, f), model, config, jax.random.fold_in(key, 10_000 + f),
                                    est.info["mean"], est.info["var"])
            refined.append(dataclasses.replace(out, candidates=est.candidates, candidate_weights=est.candidate_weights))
            seconds[f] += time.perf_counter() - start
            continue
        x0 = np.concatenate([np.real(est.samples.T @ est.weights), np.imag(est.samples.T @ est.weights)])
        out = assimilate_var(*_field_tracks(tracks, f), model, config, jax.random.fold_in(key, 10_000 + f),
                             x_init=x0, stages=(1.0,), iterations=config.hybrid_iterations)
        refined.append(dataclasses.replace(out, candidates=est.candidates, candidate_weights=est.candidate_weights))
        seconds[f] += time.perf_counter() - start
    return refined, seconds


def _posterior(estimates, method: str, seconds) -> Posterior:
    """Returns the Posterior stacking per-field estimates."""
    has_candidates = all(e.candidates is not None for e in estimates)
    return Posterior(
        samples=np.stack([e.samples for e in estimates]).astype(np.complex128),
        weights=np.stack([e.weights for e in estimates]).astype(np.float64),
        method=method,
        candidates=np.stack([e.candidates for e in estimates]).astype(np.complex128) if has_candidates else None,
        candidate_weights=np.stack([e.candidate_weights for e in estimates]) if has_candidates else None,
        seconds=np.asarray(seconds, np.float64),
    )


def model_settings(tracks: Tracks, run_dir):
    """Returns (k1, k2, omega, prior_scale, dt) from the run's dataset meta, else from the tracks."""
    if run_dir is not None:
        from lagda.learning.model import read_run_files

        _, meta = read_run_files(run_dir)  # the modes and prior only: no checkpoint restore
        times = np.asarray(meta["time"], np.float64)
        dt = float(meta.get("attrs", {}).get("dt", times[1] - times[0]))
        return (np.asarray(meta["k1"]), np.asarray(meta["k2"]), np.asarray(meta["omega"], np.float64),
                np.asarray(meta["prior_scale"], np.float64), dt)
    if tracks.k1 is None or tracks.omega is None:
        raise ValueError("the track file does not state the modes and frequencies: pass a trained model (run_dir)")
    from simulate.config import SimConfig
    from simulate.prior import spectrum

    base = SimConfig()  # prior of the generator's defaults: the file carries modes, not the prior
    scale = spectrum(tracks.k1, tracks.k2, base.spectrum_exponent, base.rms_speed)
    steps = np.diff(np.unique(np.round(tracks.times[np.isfinite(tracks.times)], 12)))
    return tracks.k1, tracks.k2, tracks.omega, scale, float(np.min(steps))


def assimilate_file(tracks_path, out_path, method: str, run_dir=None, n_grid: int = 32, plot=None,
                    overwrite: bool = False, seed: int = 0, **method_options) -> dict:
    """Returns a summary dict after assimilating a track file and writing the result netCDF.

    Reads `tracks_path` (lagda.io.tracks.read_tracks), checks it against the model
    (check_fits_model), runs `method` on each field, writes `out_path` (lagda.io.results.write_result,
    temporary file + rename) and, with `plot`, a figure of field 0.

    Args:
        method_options: AssimConfig fields (members, top_k, ...).
    Raises:
        ValueError: bad method / option, existing output without overwrite, tracks that do not fit.
        FileNotFoundError: missing track file or run directory.
    """
    with jax.enable_x64(True):  # inversions and scores in float64 whatever the caller's JAX setting
        return _assimilate_file(tracks_path, out_path, method, run_dir, n_grid, plot, overwrite, seed, method_options)


def _assimilate_file(tracks_path, out_path, method, run_dir, n_grid, plot, overwrite, seed, method_options) -> dict:
    from lagda.io.results import write_result
    from lagda.assimilation.scores import window_times
    from lagda.io.tracks import check_fits_model, read_tracks

    if os.path.exists(out_path) and not overwrite:
        raise ValueError(f"{out_path} exists; pass overwrite=True to replace it")
    config = config_from_options(method_options)
    tracks = read_tracks(tracks_path)
    k1, k2, omega, scale, dt = model_settings(tracks, run_dir)
    warnings = check_fits_model(tracks, dt, k1, k2, omega)
    posterior = assimilate(tracks, method, (k1, k2, omega), scale, dt, run_dir=run_dir, config=config,
                           key=jax.random.key(seed))
    times = window_times(tracks)
    attrs = {"assim_config": json.dumps(dataclasses.asdict(config)), "model_run": str(run_dir or ""), "seed": int(seed)}
    write_result(out_path, posterior, k1, k2, omega, times, n_grid, tracks, attrs)
    summary = {"method": method, "fields": tracks.n_field, "seconds": float(np.sum(posterior.seconds)),
               "warnings": len(warnings)}
    if tracks.true_coef is not None:  # held-out tracks with known truth: every score of lagda.assimilation.scores
        from lagda.assimilation.scores import score_posterior

        scores = score_posterior(posterior, tracks, k1, k2, omega, dt, n_grid=n_grid)
        summary.update({name: value for name, value in scores.items() if name != "per_field"})
    if plot:
        from lagda.assimilation.plot import plot_assimilation

        plot_assimilation(out_path, plot, tracks=tracks)
    return summary
