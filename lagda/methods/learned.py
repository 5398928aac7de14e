"""`retrieve`, `embed`, `hybrid`: assimilation with the learned trajectory encoder g_v.

retrieve (Algorithm 1 + eq. 28): embed the field's tracks (mean over drifters), score every
bank coefficient c^i by the learned similarity s(g_u(c^i), g_v(v)) / tau, return the top-K
with weights softmax(scores) (the learned conditional nu^N_{u|v} restricted to them).
embed: the whole conditional measure rather than its mode: the self-normalised weighted
mean and variance over the bank, weights softmax(s); for the inner-product / L2 tiltings
with the Gaussian prior also the closed form of section 5: eq. (41a) nu_{u|v} =
N(D e / tau, D) (inner) and eq. (48a) N((D^-1 + I / tau)^-1 e / tau, (D^-1 + I / tau)^-1) (L2),
e = g_v(v), D the prior covariance of x = (Re c, Im c) (the similarity mask applied to both).
hybrid (lagda.methods.hybrid): the embed conditional N(m_L, diag v_L) as the prior of the
linear-Gaussian velocity inversion, optionally refined by a short 4D-Var.

The bank is either given coefficients (a dataset) or fresh prior draws generated inside one
jitted loop in batches with fold_in(key, batch) (g_u is the identity, so no simulation), all
fields' queries scored together against each batch, so the bank is never stored and its
embedding is shared by every track.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from lagda.losses import similarity
from lagda.methods._common import FieldEstimate, FlowModel, gaussian_samples
from lagda.methods.config import AssimConfig
from simulate.prior import draw_coefficients


@dataclasses.dataclass(frozen=True)
class Scorer:
    """How tracks are compared with coefficients: embed_fn, similarity kind, tau and mask."""

    embed_fn: Callable  # positions (field, drifter, obs, 2) -> (field, n_e) = g_v, mean over drifters
    kind: str = "cosine"  # "cosine" | "inner" | "l2" (lagda.losses.similarity)
    tau: float = 1.0  # temperature
    mask: np.ndarray | None = None  # (n_e,) weights applied to both embeddings (None: ones)


def scorer_from_run(run_dir) -> tuple[Scorer, dict]:
    """Returns (Scorer, dataset meta) of a trained run (lagda.train.load_run)."""
    from lagda.encoders import similarity_mask
    from lagda.train import embed_tracks, load_run

    encoder, config, meta = load_run(run_dir)
    mask = similarity_mask(meta["k1"], meta["k2"], config.mask_mean_mode)
    return Scorer(lambda positions: embed_tracks(encoder, positions), config.similarity, config.tau, mask), meta


@functools.partial(jax.jit, static_argnames=("kind", "size", "batch", "k", "from_prior"))
def scan_bank(query, key, scale, bank, mask, tau, kind: str, size: int, batch: int, k: int, from_prior: bool):
    """Returns top-k (coef `(q, k, mode)`, scores `(q, k)`) and softmax moments of x over the bank.

    One pass over `size` bank items in batches: prior draws draw_coefficients(fold_in(key, b))
    when from_prior, else rows of `bank` (zero-padded to a whole number of batches). Running
    log-sum-exp sums give the self-normalised mean and variance of x = (Re c, Im c), `(q, 2K)`.
    """
    n_batches = -(-size // batch)
    q, n_mode = query.shape[0], scale.shape[0]
    query = query * mask[None, :]

    def body(b, carry):
        top_c, top_s, m, sum_w, sum_x, sum_x2 = carry
        if from_prior:
            coef = draw_coefficients(jax.random.fold_in(key, b), scale, batch, jnp.complex64)
        else:
            coef = jax.lax.dynamic_slice_in_dim(bank, b * batch, batch)
        x = jnp.concatenate([jnp.real(coef), jnp.imag(coef)], axis=-1).astype(jnp.float32)
        valid = b * batch + jnp.arange(batch) < size
        s = similarity(x * mask[None, :], query, kind, tau).T.astype(jnp.float32)  # (q, batch)
        s = jnp.where(jnp.broadcast_to(valid[None, :], s.shape), s, -jnp.inf)
        top_s, pos = jax.lax.top_k(jnp.concatenate([top_s, s], axis=1), k)
        c_all = jnp.concatenate([top_c, jnp.broadcast_to(coef[None], (q, batch, n_mode))], axis=1)
        top_c = jnp.take_along_axis(c_all, pos[:, :, None], axis=1)
        m_new = jnp.maximum(m, jnp.max(s, axis=1))
        shrink, w = jnp.exp(m - m_new), jnp.exp(s - m_new[:, None])
        return (top_c, top_s, m_new, sum_w * shrink + jnp.sum(w, axis=1),
                sum_x * shrink[:, None] + w @ x, sum_x2 * shrink[:, None] + w @ (x * x))

    zeros = jnp.zeros((q, 2 * n_mode), jnp.float32)
    init = (jnp.zeros((q, k, n_mode), jnp.complex64), jnp.full((q, k), -jnp.inf, jnp.float32),
            jnp.full((q,), -jnp.inf, jnp.float32), jnp.zeros((q,), jnp.float32), zeros, zeros)
    top_c, top_s, _, sum_w, sum_x, sum_x2 = jax.lax.fori_loop(0, n_batches, body, init)
    mean = sum_x / sum_w[:, None]
    return top_c, top_s, mean, sum_x2 / sum_w[:, None] - mean**2


def bank_search(queries, scale, config: AssimConfig, scorer: Scorer, key, bank=None):
    """Returns (candidates `(q, k, mode)`, scores `(q, k)`, mean `(q, 2K)`, var `(q, 2K)`) over the bank.

    Args:
        queries: `(q, n_e)` track embeddings; scale: `(mode,)` prior std a_k.
        bank: complex `(n, mode)` coefficients to rank, or None for config.bank_size prior draws.
    """
    n_e = queries.shape[1]
    mask = jnp.ones(n_e, jnp.float32) if scorer.mask is None else jnp.asarray(scorer.mask, jnp.float32)
    if bank is None:
        size, bank_arr, from_prior = config.bank_size, jnp.zeros((1, len(scale)), jnp.complex64), True
    else:
        size, from_prior = len(bank), False
    batch = min(config.bank_batch, size)
    if not from_prior:
        pad = -size % batch
        bank_arr = jnp.asarray(np.concatenate([bank, np.zeros((pad, bank.shape[1]))]), jnp.complex64)
    k = min(config.top_k, size)
    out = scan_bank(jnp.asarray(queries, jnp.float32), key, jnp.asarray(scale, jnp.float32), bank_arr, mask,
                    float(scorer.tau), scorer.kind, size, batch, k, from_prior)
    return tuple(np.asarray(a) for a in out)


def closed_form(query, model: FlowModel, scorer: Scorer):
    """Returns the Gaussian conditional (mean `(2K,)`, var `(2K,)`) of eqs. (41a) / (48a).

    inner: exp(<m u, m e> / tau) mu_u -> N(D m^2 e / tau, D); l2: exp(-|m u - m e|^2 / (2 tau)) mu_u
    -> precision D^-1 + m^2 / tau, mean = cov m^2 e / tau (m the similarity mask).
    Raises:
        ValueError: for the cosine tilting, which has no Gaussian closed form.
    """
    if scorer.kind not in ("inner", "l2"):
        raise ValueError(f"the closed-form conditional needs the inner or l2 similarity, not {scorer.kind!r}")
    m2 = np.ones(len(query)) if scorer.mask is None else np.asarray(scorer.mask, np.float64) ** 2
    d = model.prior_var
    var = d if scorer.kind == "inner" else 1.0 / (1.0 / d + m2 / scorer.tau)
    return var * m2 * np.asarray(query, np.float64) / scorer.tau, var


def learned_estimates(method: str, queries, model: FlowModel, config: AssimConfig, scorer: Scorer, key, bank=None):
    """Returns one FieldEstimate per query `(q, n_e)` for method retrieve or embed."""
    key_bank, key_samples = jax.random.split(key)
    cands, scores, mean, var = bank_search(queries, model.scale, config, scorer, key_bank, bank)
    out = []
    for i in range(len(queries)):
        weights = np.asarray(jax.nn.softmax(jnp.asarray(scores[i], jnp.float64)))
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
