"""`retrieve`, `embed`, `hybrid`: assimilation with the learned trajectory encoder g_v.

retrieve (Algorithm 1 + eq. 28): embed the field's tracks (mean over drifters), score every
bank coefficient c^i by the learned similarity s(g_u(c^i), g_v(v)) / tau, return the top-K
with weights softmax(scores) (the learned conditional nu^N_{u|v} restricted to them).
embed: the whole conditional measure rather than its mode: the self-normalised weighted
mean and variance over the bank, weights softmax(s); for the inner-product / L2 tiltings
with the Gaussian prior also the closed form of section 5: eq. (41a) nu_{u|v} =
N(D e / tau, D) (inner) and eq. (48a) N((D^-1 + I / tau)^-1 e / tau, (D^-1 + I / tau)^-1) (L2),
e = g_v(v), D the prior covariance of x = (Re c, Im c) (the similarity mask applied to both).
hybrid (lagda.assimilation.methods.hybrid): the embed conditional N(m_L, diag v_L) as the prior of the
linear-Gaussian velocity inversion, optionally refined by a short 4D-Var.

`bank_estimates` runs retrieve or embed on every field of a track file at once (one bank pass for
all of them); hybrid's `hybrid_estimates` starts from its `learned_conditionals`.

A transformer encoder reads complete tracks observed at its training data's times (its physics
feature and learned positional embedding assume them): `encoder_problem` is the one check, so
retrieve and embed refuse other tracks and hybrid falls back to the prior for them. A set
encoder (the `learned` preset) reads any tracks: its tokens carry their times, and NaN gaps
and padding are masked out (Scorer.any_regime).
The temperature tau of a run is its trained value (learn_tau) or the configured one.

The bank (lagda.assimilation.methods.bank) is either given coefficients (a dataset) or fresh prior draws
generated inside one jitted pass (g_u is the identity, so no simulation), all fields' queries
scored together, so the bank is never stored and its embedding is shared by every track.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.linear_gaussian import gaussian_samples
from lagda.assimilation.model import FlowModel
from lagda.assimilation.posterior import FieldEstimate
from lagda.learning.loss_registry import LOSSES
from lagda.learning.retrieval import softmax_weights


@dataclasses.dataclass(frozen=True)
class Scorer:
    """How tracks are compared with coefficients: embed_fn, similarity kind, tau, mask and the times read."""

    embed_fn: Callable  # positions (field, drifter, obs, 2) -> (field, n_e) = g_v, mean over drifters
    kind: object = "cosine"  # "cosine" | "inner" | "l2", or a KernelSetSimilarity (lagda.learning.losses.similarity)
    tau: float = 1.0  # temperature
    mask: np.ndarray | None = None  # (n_e,) weights applied to both embeddings (None: ones; (1,) for kernel sets)
    times: np.ndarray | None = None  # (obs,) observation times the encoder was trained on (None: not checked)
    any_regime: bool = False  # embed_fn(positions, times, mask) reads any times, gaps and drifters (set encoder)
    modes: dict | None = None  # the training pairs' "k1", "k2", "time_basis", "time" (PairedData.meta()), or None


def scorer_from_run(run_dir) -> tuple[Scorer, dict]:
    """Returns (Scorer, dataset meta) of a trained run: its encoder, similarity, mask, trained tau and times.

    Raises
    ------
    ValueError
        (one line) for a run of the misfit head (TrainConfig.set_head "misfit"), whose track
        embedding is a quadratic form in the coefficients, not an estimate of them: the methods here read a
        2K-vector per track.
    """
    from lagda.learning.model import (
        embed_track_sets,
        embed_tracks,
        kernel_set_similarity,
        load_trained,
        read_run_files,
        trained_tau,
    )

    config, _ = read_run_files(run_dir)
    if config.set_head == "misfit" and config.encoder == "set":
        raise ValueError(f"the run {run_dir} has the misfit head (a quadratic form in the coefficients, not an "
                         "estimate of them), which retrieve, embed, hybrid and sample do not read: pass a run of the "
                         "ridge head (e.g. lagda/shipped/learned)")
    model, config, meta = load_trained(run_dir)
    times = np.asarray(meta["time"], np.float64)
    if LOSSES[config.loss].set_kernel:
        # Queries are the tracks' set embeddings (field, 2K + D); the kind scores raw g_u(c) of the bank
        # against them with the run's stored draw and applies the similarity mask itself, so the bank's
        # mask is a broadcast one.
        kind, tau = kernel_set_similarity(model, config), trained_tau(model)
        if config.encoder == "set":
            return Scorer(lambda positions, times, valid: embed_track_sets(model, config, positions, times=times,
                                                                           mask=valid),
                          kind, tau, np.ones(1), any_regime=True), meta
        return Scorer(lambda positions: embed_track_sets(model, config, positions), kind, tau, np.ones(1), times), meta
    encoder, mask = model.encoder, np.asarray(model.mask[...], np.float64)
    if config.encoder == "set":  # tokens carry their times: any regime
        return Scorer(lambda positions, times, valid: embed_tracks(encoder, positions, times=times, mask=valid),
                      config.similarity, trained_tau(model), mask, None, True,
                      {name: meta.get(name) for name in ("k1", "k2", "time_basis", "time")}), meta
    return Scorer(lambda positions: embed_tracks(encoder, positions), config.similarity, trained_tau(model), mask,
                  times), meta


TIME_TOLERANCE = 1e-3  # observation times match the encoder's within this fraction of its spacing


def encoder_problem(positions, times, model_times=None) -> str | None:
    """Returns why the encoder cannot read one field's tracks, or None if it can.

    The encoder (its physics feature and learned positional embedding) reads complete tracks
    observed at exactly the training data's times `model_times (obs,)`.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)`, NaN where missing
    times
        `(drifter, obs)`, NaN padding.
    model_times
        the encoder's times, or None to check completeness only.
    """
    for d in range(len(times)):
        ok = np.isfinite(times[d])
        n_missing = int(np.sum(ok & ~np.all(np.isfinite(positions[d]), axis=-1)))
        if n_missing:
            return f"drifter {d} has {n_missing} missing positions (NaN gaps); the encoder reads complete tracks"
        if model_times is None:
            continue
        t, n = times[d][ok], len(model_times)
        if not len(t):
            return f"drifter {d} has no observation"
        tol = TIME_TOLERANCE * float(np.min(np.diff(model_times))) if n > 1 else TIME_TOLERANCE * abs(model_times[0])
        if len(t) != n or not np.all(np.abs(t - model_times) <= tol):
            return (f"drifter {d} is observed at {len(t)} times from {t[0]:.6g} to {t[-1]:.6g}, but the encoder reads "
                    f"{n} times from {model_times[0]:.6g} to {model_times[-1]:.6g} (spacing "
                    f"{model_times[1] - model_times[0]:.6g})"
                    if n > 1 else f"drifter {d}: observation times differ from the encoder's")
    return None


def field_queries(tracks, scorer: Scorer) -> tuple[list, list]:
    """Returns per field of `tracks` (lagda.io.tracks.Tracks) its embedding `(n_e,)` or None, and the problem or None.

    A field whose tracks the encoder cannot read (`encoder_problem`) gets None and the reason.
    """
    queries, problems = [], []
    for f in range(tracks.n_field):
        sub = tracks.for_field(f)
        if scorer.any_regime:  # every finite observation is a token; NaN gaps and padding are masked out
            valid = np.isfinite(sub.times) & np.all(np.isfinite(sub.positions), axis=-1)
            problem = None if np.any(np.sum(valid, axis=1) >= 2) else "no drifter has two valid observations"
            query = None if problem else np.asarray(scorer.embed_fn(
                np.where(valid[..., None], sub.positions, 0.0)[None], np.where(valid, sub.times, 0.0)[None],
                valid[None]))[0]
            queries.append(query)
            problems.append(problem)
            continue
        problem = encoder_problem(sub.positions, sub.times, scorer.times)
        n_obs = sub.positions.shape[1] if scorer.times is None else len(scorer.times)
        query = None if problem else np.asarray(scorer.embed_fn(np.asarray(sub.positions[:, :n_obs])[None]))[0]
        queries.append(query)
        problems.append(problem)
    return queries, problems


def closed_form(query, model: FlowModel, scorer: Scorer):
    """Returns the Gaussian conditional (mean `(2K,)`, var `(2K,)`) of eqs. (41a) / (48a).

    inner: exp(<m u, m e> / tau) mu_u -> N(D m^2 e / tau, D); l2: exp(-|m u - m e|^2 / (2 tau)) mu_u
    -> precision D^-1 + m^2 / tau, mean = cov m^2 e / tau (m the similarity mask).

    Raises
    ------
    ValueError
        for the cosine tilting, which has no Gaussian closed form.
    """
    if scorer.kind not in ("inner", "l2"):
        raise ValueError(f"the closed-form conditional needs the inner or l2 similarity, not {scorer.kind!r}")
    m2 = np.ones(len(query)) if scorer.mask is None else np.asarray(scorer.mask, np.float64) ** 2
    d = model.prior_var
    var = d if scorer.kind == "inner" else 1.0 / (1.0 / d + m2 / scorer.tau)
    return var * m2 * np.asarray(query, np.float64) / scorer.tau, var


def learned_conditionals(method: str, tracks, model: FlowModel, config, scorer: Scorer, key, bank=None,
                         cache=None) -> tuple[list[FieldEstimate | None], list[str | None], float]:
    """Returns (per field the learned estimate or None, per field why the encoder cannot read it or None, seconds).

    The fields the encoder reads (`field_queries`) are embedded and scored against the bank in one pass
    (`learned_estimates`, retrieve's candidates or embed's moments).
    """
    start = time.perf_counter()
    queries, problems = field_queries(tracks, scorer)
    readable = [f for f, q in enumerate(queries) if q is not None]
    estimates: list[FieldEstimate | None] = [None] * tracks.n_field
    if readable:
        found = learned_estimates(method, np.stack([queries[f] for f in readable]), model, config, scorer, key, bank,
                                  cache)
        for f, est in zip(readable, found):
            estimates[f] = est
    return estimates, problems, time.perf_counter() - start


def bank_estimates(method: str, tracks, model: FlowModel, config, scorer: Scorer, key, bank=None,
                   cache=None) -> tuple[list[FieldEstimate], list[float]]:
    """Returns (FieldEstimates, seconds per field) of retrieve or embed on every field of `tracks`.

    Raises
    ------
    ValueError
        naming the first field whose tracks the encoder cannot read (`encoder_problem`).
    """
    estimates, problems, seconds = learned_conditionals(method, tracks, model, config, scorer, key, bank, cache)
    if any(problems):
        f = next(i for i, p in enumerate(problems) if p)
        raise ValueError(f"{method}: field {f}: {problems[f]}")
    return estimates, [seconds / tracks.n_field] * tracks.n_field


def learned_estimates(method: str, queries, model: FlowModel, config, scorer: Scorer, key, bank=None, cache=None):
    """Returns one FieldEstimate per query `(q, n_e)` for method retrieve or embed.

    cache: a dict kept by the caller for the i.i.d. prior bank (methods.bank.prior_bank), or None.
    """
    key_bank, key_samples = jax.random.split(key)
    cands, scores, mean, var = bank_search(queries, model.scale, config, scorer, key_bank, bank, cache)
    all_weights = np.asarray(softmax_weights(jnp.asarray(scores, jnp.float64)))  # eq. 28, per query
    out = []
    for i in range(len(queries)):
        weights = all_weights[i]
        cand = cands[i].astype(np.complex128)
        if method == "retrieve":
            out.append(FieldEstimate(cand, weights, cand, weights, {"top_score": float(scores[i, 0])}))
            continue
        m, v = closed_form(queries[i], model, scorer) if config.closed_form else (mean[i].astype(np.float64), var[i])
        samples = gaussian_samples(jax.random.fold_in(key_samples, i), m, np.diag(np.maximum(v, 0.0)), config.members)
        out.append(FieldEstimate(samples, np.full(config.members, 1.0 / config.members), cand, weights,
                                 {"moment_matched": True, "closed_form": config.closed_form,
                                  "mean": m, "var": np.maximum(v, 0.0)}))
    return out
