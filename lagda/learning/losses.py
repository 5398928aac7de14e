"""Contrastive losses as pure functions of two embedding batches.

Conventions (shared by every function here):

* `u_emb`: `(batch, n_e)` embeddings of the u modality (Fourier coefficients,
  `g_u(coef)`); `v_emb`: `(batch, n_e)` embeddings of the v modality
  (trajectories, `g_v(positions)`). Row `i` of both is a positive pair
  `(u^i, v^i)` drawn from the joint law `mu`.
* The logit matrix is `logits[i, j] = s(u^i, v^j)`, the log of the (unnormalised)
  tilting of eq. (14)/(25)/(26), temperature already applied. Rows index u, columns
  index v; the positives are on the diagonal. Larger means "more aligned".
* `rho^N(u^i | v^i) = exp(logits[i, i]) / ((1/N) sum_j exp(logits[j, i]))` is the
  empirical density of the learned conditional with respect to `mu_u^N` (Remark 2.3,
  eq. (9a) with empirical expectations); `rho^N(v^i | u^i)` normalises row `i`.

The paper's losses are built from the two one-directional halves
`infonce_u_given_v = -(1/N) sum_i log rho^N(u^i|v^i)` and `infonce_v_given_u`
(big_vision's `softmax_loss` split), so that the one-sided losses of Optimization
Problem 3.13 exist as such.
"""
from __future__ import annotations

import math
from typing import Literal, get_args

import jax
import jax.numpy as jnp

SimilarityKind = Literal["cosine", "inner", "l2"]

# Squared-norm floor for the cosine normalisation: keeps the gradient finite at a
# zero embedding (the max() branch has zero derivative there) instead of NaN.
_NORM_EPS_SQ = 1e-24


def check_tau(tau) -> None:
    # Only a concrete Python number can be checked; a traced (learned) temperature
    # is the caller's responsibility.
    if isinstance(tau, (int, float)) and not tau > 0:
        raise ValueError(f"temperature tau must be > 0, got {tau}")


def _check_embeddings(u_emb: jax.Array, v_emb: jax.Array, *, paired: bool) -> None:
    u_shape, v_shape = jnp.shape(u_emb), jnp.shape(v_emb)
    ok = len(u_shape) == 2 and len(v_shape) == 2 and u_shape[1] == v_shape[1]
    if paired:
        ok = ok and u_shape[0] == v_shape[0]
    if not ok:
        want = "(batch, n_e) each" if paired else "(n_u, n_e) and (n_v, n_e)"
        raise ValueError(f"expected embeddings {want}; got u_emb {u_shape} and v_emb {v_shape}")


def _check_logits(logits: jax.Array) -> int:
    shape = jnp.shape(logits)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise ValueError(f"expected square logits (batch, batch) with positives on the diagonal; got {shape}")
    return shape[0]


def normalise(emb: jax.Array) -> jax.Array:
    sq_norm = jnp.sum(emb * emb, axis=-1, keepdims=True)
    return emb * jax.lax.rsqrt(jnp.maximum(sq_norm, _NORM_EPS_SQ))


def cosine_similarity(u_emb: jax.Array, v_emb: jax.Array, tau: float = 1.0) -> jax.Array:
    """Returns the cosine-similarity logits `<u_i/|u_i|, v_j/|v_j|> / tau`.

    The exponent of the standard CLIP tilting, eqs. (5a), (14a) with normalised
    encoders (2).

    Parameters
    ----------
    u_emb
        `(n_u, n_e)` u-side embeddings (unnormalised).
    v_emb
        `(n_v, n_e)` v-side embeddings (unnormalised).
    tau
        temperature `> 0` (may be a traced scalar).

    Returns
    -------
    jax.Array
        `(n_u, n_v)` logits, each in `[-1/tau, 1/tau]`.

    Raises
    ------
    ValueError
        if the embeddings are not 2-D with a common `n_e`, or `tau <= 0`.
    """
    _check_embeddings(u_emb, v_emb, paired=False)
    check_tau(tau)
    return (normalise(u_emb) @ normalise(v_emb).T) / tau


def inner_product_similarity(u_emb: jax.Array, v_emb: jax.Array, tau: float = 1.0) -> jax.Array:
    """Returns the unnormalised inner-product logits `<u_i, v_j> / tau`.

    The exponent of the unnormalised-encoder tilting, eq. (25b).

    Parameters
    ----------
    u_emb
        `(n_u, n_e)` u-side embeddings.
    v_emb
        `(n_v, n_e)` v-side embeddings.
    tau
        temperature `> 0`.

    Returns
    -------
    jax.Array
        `(n_u, n_v)` logits.

    Raises
    ------
    ValueError
        if the embeddings are not 2-D with a common `n_e`, or `tau <= 0`.
    """
    _check_embeddings(u_emb, v_emb, paired=False)
    check_tau(tau)
    return (u_emb @ v_emb.T) / tau


def negative_squared_distance(u_emb: jax.Array, v_emb: jax.Array, tau: float = 1.0) -> jax.Array:
    """Returns the L2 logits `-|u_i - v_j|^2 / (2 tau)`.

    The exponent of the L^2-distance tilting, eq. (26b) (with `G u`, `H v` the
    embeddings this is the "positive quadratic form" model (46) when `tau = 1`).
    Computed as `-(|u_i|^2 + |v_j|^2 - 2 <u_i, v_j>) / (2 tau)` so that memory is
    `O(n_u n_v)`, not `O(n_u n_v n_e)`.

    Parameters
    ----------
    u_emb
        `(n_u, n_e)` u-side embeddings.
    v_emb
        `(n_v, n_e)` v-side embeddings.
    tau
        temperature `> 0`.

    Returns
    -------
    jax.Array
        `(n_u, n_v)` logits, all `<= 0` up to round-off.

    Raises
    ------
    ValueError
        if the embeddings are not 2-D with a common `n_e`, or `tau <= 0`.
    """
    _check_embeddings(u_emb, v_emb, paired=False)
    check_tau(tau)
    u_sq = jnp.sum(u_emb * u_emb, axis=-1)[:, None]
    v_sq = jnp.sum(v_emb * v_emb, axis=-1)[None, :]
    return -(u_sq + v_sq - 2.0 * (u_emb @ v_emb.T)) / (2.0 * tau)


def similarity(
    u_emb: jax.Array, v_emb: jax.Array, kind: SimilarityKind = "cosine", tau: float = 1.0
) -> jax.Array:
    """Returns the `(n_u, n_v)` logit matrix of the tilting named by `kind`.

    `"cosine"`: eq. (14a); `"inner"`: eq. (25b); `"l2"`: eq. (26b). `kind` may also be
    a :class:`lagda.learning.kernel_set.KernelSetSimilarity` (a trained kernel_set run's
    similarity with its fixed draw): then `u_emb` is g_u(c) `(n_u, 2K)` and `v_emb` the
    tracks' set embeddings `(n_v, 2K + D)`.

    Parameters
    ----------
    u_emb
        `(n_u, n_e)` u-side embeddings.
    v_emb
        `(n_v, n_e)` v-side embeddings.
    kind
        one of `"cosine"`, `"inner"`, `"l2"`, or a KernelSetSimilarity.
    tau
        temperature `> 0`.

    Returns
    -------
    jax.Array
        `(n_u, n_v)` logits `s(u_i, v_j)`.

    Raises
    ------
    ValueError
        for an unknown `kind`, bad shapes, or `tau <= 0`.
    """
    if not isinstance(kind, str):  # a kernel_set.KernelSetSimilarity with its fixed random-feature draw
        return kind.logits(u_emb, v_emb, tau)
    if kind == "cosine":
        return cosine_similarity(u_emb, v_emb, tau)
    if kind == "inner":
        return inner_product_similarity(u_emb, v_emb, tau)
    if kind == "l2":
        return negative_squared_distance(u_emb, v_emb, tau)
    raise ValueError(f"unknown similarity kind {kind!r}; valid values: {', '.join(get_args(SimilarityKind))}")


def infonce_u_given_v(logits: jax.Array, negatives: jax.Array | None = None) -> jax.Array:
    """Returns `-(1/N) sum_i log rho^N(u^i | v^i)`, the u|v half of eq. (12).

    `log rho^N(u^i|v^i) = logits[i, i] - log((1/N) sum_j exp(logits[j, i]))`: the
    softmax runs over the u side (column `i`), eq. (9a) with empirical `mu_u^N`.
    Minimising it alone is Optimization Problem 3.13 with `(lambda_u, lambda_v) = (2, 0)`.
    With `negatives`, K more u-side candidates (u's of other pairs) join every column's
    softmax, and the empirical measure is that of the N + K candidates.

    Parameters
    ----------
    logits
        `(N, N)` logits `s(u^i, v^j)`, positives on the diagonal.
    negatives
        `(K, N)` logits `s(u'^k, v^j)` of K more u-side candidates, or None.

    Returns
    -------
    jax.Array
        Scalar loss, `>= -log(N + K)` (each `rho^N(u^i|v^i) <= N + K`).

    Raises
    ------
    ValueError
        if `logits` is not square 2-D, or `negatives` has not N columns.
    """
    n = _check_logits(logits)
    candidates = logits
    if negatives is not None:
        if jnp.ndim(negatives) != 2 or jnp.shape(negatives)[1] != n:
            raise ValueError(f"expected negatives (K, {n}); got {jnp.shape(negatives)}")
        candidates = jnp.concatenate([logits, negatives], axis=0)
    return jnp.mean(jax.nn.logsumexp(candidates, axis=0) - jnp.diagonal(logits)) - math.log(candidates.shape[0])


def infonce_v_given_u(logits: jax.Array) -> jax.Array:
    """Returns `-(1/N) sum_i log rho^N(v^i | u^i)`, the v|u half of eq. (12).

    `log rho^N(v^i|u^i) = logits[i, i] - log((1/N) sum_j exp(logits[i, j]))`: the
    softmax runs over the v side (row `i`), eq. (9b) with empirical `mu_v^N`.

    Parameters
    ----------
    logits
        `(N, N)` logits `s(u^i, v^j)`, positives on the diagonal.

    Returns
    -------
    jax.Array
        Scalar loss, `>= -log N`.

    Raises
    ------
    ValueError
        if `logits` is not square 2-D.
    """
    n = _check_logits(logits)
    return jnp.mean(jax.nn.logsumexp(logits, axis=1) - jnp.diagonal(logits)) - math.log(n)


def conditional_loss(logits: jax.Array, lambda_u: float = 1.0, lambda_v: float = 1.0,
                     negatives: jax.Array | None = None) -> jax.Array:
    """Returns the empirical conditional loss `L_cond^N(lambda_u, lambda_v)`.

    Optimization Problem 3.13 with empirical measures (3):
    `L = (lambda_u/2) infonce_u_given_v + (lambda_v/2) infonce_v_given_u`.
    `(1, 1)` is the symmetric CLIP loss `L_cond^N` of eq. (12); `(2, 0)` matches
    only the u|v conditional (section 5.2). Note the paper's `1/2` is inside, so the
    symmetric case is `lambda = 1`, not `1/2`.

    Parameters
    ----------
    logits
        `(N, N)` logits `s(u^i, v^j)`, positives on the diagonal.
    lambda_u
        weight `>= 0` of the u|v term.
    lambda_v
        weight `>= 0` of the v|u term.
    negatives
        `(K, N)` logits of K more u-side candidates, in the u|v term only
        (:func:`infonce_u_given_v`), or None.

    Returns
    -------
    jax.Array
        Scalar loss.

    Raises
    ------
    ValueError
        if `logits` is not square 2-D, or `negatives` has not N columns.
    """
    return (0.5 * lambda_u * infonce_u_given_v(logits, negatives)
            + 0.5 * lambda_v * infonce_v_given_u(logits))


def clip_loss(logits: jax.Array) -> jax.Array:
    """Returns CLIP's symmetric cross-entropy `L_clip^N`, eq. (7).

    `-(1/2N) sum_i [log p(u^i|v^i) + log p(v^i|u^i)]` with the softmax
    probabilities (5a), (6a). Written independently of :func:`conditional_loss`
    (cross-entropy of `log_softmax`); Theorem 2.8 says `L_clip^N = L_cond^N + log N`.

    Parameters
    ----------
    logits
        `(N, N)` logits `s(u^i, v^j)`, positives on the diagonal.

    Returns
    -------
    jax.Array
        Scalar loss, `>= 0`.

    Raises
    ------
    ValueError
        if `logits` is not square 2-D.
    """
    _check_logits(logits)
    log_p_u_given_v = jnp.diagonal(jax.nn.log_softmax(logits, axis=0))
    log_p_v_given_u = jnp.diagonal(jax.nn.log_softmax(logits, axis=1))
    return -0.5 * (jnp.mean(log_p_u_given_v) + jnp.mean(log_p_v_given_u))


def joint_loss(logits: jax.Array, off_diagonal: bool = True) -> jax.Array:
    """Returns the empirical joint loss `L_joint^N`, Optimization Problem 3.7.

    `-(1/N) sum_i logits[i, i] + log mean_{(i, j) in P} exp(logits[i, j])`: the
    positives estimate `E_mu`, and the pair set `P` estimates
    `E_{mu_u x mu_v}` (Remark 3.9). `off_diagonal=True` (default): `P` is the
    `N(N-1)` unpaired `(u^i, v^j), i != j`, which are draws from the product of
    marginals (Remark 2.6), so the inner mean is unbiased. `off_diagonal=False`:
    `P` is all `N^2` pairs, i.e. exactly the product of the empirical marginals
    `mu_u^N x mu_v^N`; with this choice `L_cond^N <= L_joint^N` holds for every
    batch (Jensen, as in the proof of Theorem 3.10).

    Parameters
    ----------
    logits
        `(N, N)` logits `s(u^i, v^j)`, positives on the diagonal.
    off_diagonal
        use only `i != j` pairs for the product-of-marginals term.

    Returns
    -------
    jax.Array
        Scalar loss.

    Raises
    ------
    ValueError
        if `logits` is not square 2-D, or `N < 2` with `off_diagonal`.
    """
    n = _check_logits(logits)
    positive = jnp.mean(jnp.diagonal(logits))
    if off_diagonal:
        if n < 2:
            raise ValueError(f"off-diagonal joint loss needs batch >= 2; got logits {jnp.shape(logits)}")
        masked = jnp.where(jnp.eye(n, dtype=bool), -jnp.inf, logits)
        log_mean = jax.nn.logsumexp(masked) - math.log(n * (n - 1))
    else:
        log_mean = jax.nn.logsumexp(logits) - math.log(n * n)
    return log_mean - positive


def sigmoid_loss(logits: jax.Array, bias: float = 0.0) -> jax.Array:
    """Returns SigLIP's pairwise sigmoid loss (Zhai et al. 2023), a baseline.

    `-(1/N) sum_{i,j} log sigmoid(z_ij (logits[i, j] + bias))` with `z_ii = +1`,
    `z_ij = -1` for `i != j`. Not one of the paper's losses: each pair is an
    independent binary classification, no softmax over the batch.

    Parameters
    ----------
    logits
        `(N, N)` logits, already scaled (SigLIP's `t <u_i, v_j>` with
        normalised embeddings is `cosine_similarity(u, v, tau=1/t)`).
    bias
        SigLIP's learnable bias `b` (initialised at `-10` in SigLIP).

    Returns
    -------
    jax.Array
        Scalar loss, `>= 0`.

    Raises
    ------
    ValueError
        if `logits` is not square 2-D.
    """
    n = _check_logits(logits)
    signs = 2.0 * jnp.eye(n, dtype=logits.dtype) - 1.0
    return -jnp.sum(jax.nn.log_sigmoid(signs * (logits + bias))) / n


def symmetric_infonce(u_emb: jax.Array, v_emb: jax.Array, tau: float) -> jax.Array:
    """Returns the training default: `L_cond^N` (eq. 12) with cosine tilting.

    `conditional_loss(cosine_similarity(u_emb, v_emb, tau))`, i.e. CLIP's loss
    minus `log N` (Theorem 2.8).

    Parameters
    ----------
    u_emb
        `(batch, n_e)` u-side embeddings, row `i` paired with `v_emb[i]`.
    v_emb
        `(batch, n_e)` v-side embeddings.
    tau
        temperature `> 0`.

    Returns
    -------
    jax.Array
        Scalar loss.

    Raises
    ------
    ValueError
        if the shapes differ or are not `(batch, n_e)`, or `tau <= 0`.
    """
    _check_embeddings(u_emb, v_emb, paired=True)
    return conditional_loss(cosine_similarity(u_emb, v_emb, tau))
