"""Crossmodal retrieval kernels: Recall@k and memory-bounded top-k (Algorithm 1).

Conventions:

* A similarity function `sim_fn(u_emb, v_emb) -> (n_u, n_v)` returns
  `s(u_i, v_j)` with the u side (Fourier-coefficient embeddings, "coef") first and
  the v side (trajectory embeddings, "traj") second, e.g.
  :func:`lagda.learning.losses.cosine_similarity`. It is always called in that order, so
  asymmetric similarities work too. Pass the *same* function object on every call
  (e.g. one `functools.partial` built once): the jitted kernels are cached per
  function object.
* In Recall@k, query `i` has exactly one true match, library item `i`.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lagda.learning.losses import cosine_similarity

SimilarityFn = Callable[[jax.Array, jax.Array], jax.Array]


def _pessimistic_ranks(scores: jax.Array, true_index: jax.Array) -> jax.Array:
    """Returns 0-based ranks `#{j != t_i : scores[i, j] >= scores[i, t_i]}`, `(q,)`.

    Ties count against the query; a NaN true score gets the worst rank `n`; NaN
    scores of other items never outrank it.
    """
    n = scores.shape[1]
    true = jnp.take_along_axis(scores, true_index[:, None], axis=1)  # (q, 1)
    at_least = jnp.sum(scores >= jnp.broadcast_to(true, scores.shape), axis=1) - 1  # minus itself
    return jnp.where(jnp.isnan(true[:, 0]), n, at_least)


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be non-empty positive integers; got {ks}")
    return ks


def _recall_from_ranks(ranks: np.ndarray, ks: tuple[int, ...]) -> dict[int, float]:
    return {k: float(np.mean(ranks < k)) for k in ks}


def recall_at_k(similarity: jax.Array, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
    """Returns `{k: Recall@k}` for a query-by-library similarity matrix.

    `Recall@k = (1/q) sum_i 1[rank_i < k]` with the pessimistic 0-based rank
    `rank_i = #{j != i : similarity[i, j] >= similarity[i, i]}`: every item tied
    with the true match is counted as ranked above it. So a degenerate encoder with
    constant embeddings scores 0, never 1. A NaN true score is a miss.

    Parameters
    ----------
    similarity
        `(q, n)` scores, `q <= n`; the true match of query `i` is
        library item `i`.
    ks
        cut-offs, positive integers.

    Returns
    -------
    dict[int, float]
        Dict mapping each `k` to a fraction in `[0, 1]`.

    Raises
    ------
    ValueError
        if `similarity` is not 2-D with `q <= n`, or `ks` is invalid.
    """
    shape = np.shape(similarity)
    if len(shape) != 2 or shape[0] > shape[1] or shape[0] == 0:
        raise ValueError(f"expected similarity (n_query, n_library) with 0 < n_query <= n_library; got {shape}")
    ks = _check_ks(ks)
    ranks = _pessimistic_ranks(jnp.asarray(similarity), jnp.arange(shape[0]))
    return _recall_from_ranks(np.asarray(ranks), ks)


@functools.lru_cache(maxsize=None)
def _rank_kernel(sim_fn: SimilarityFn, query_is_u: bool):
    @jax.jit
    def kernel(query_chunk, library, offset):
        # query_chunk: (c, n_e); library: (n, n_e); offset: index of the chunk's first query.
        if query_is_u:
            scores = sim_fn(query_chunk, library)
        else:
            scores = sim_fn(library, query_chunk).T
        true_index = jnp.minimum(offset + jnp.arange(query_chunk.shape[0]), library.shape[0] - 1)
        return _pessimistic_ranks(scores, true_index)

    return kernel


def batched_recall(
    query_emb: jax.Array,
    library_emb: jax.Array,
    sim_fn: SimilarityFn = cosine_similarity,
    ks: Sequence[int] = (1, 5),
    batch_size: int = 1024,
    query_is_u: bool = True,
) -> dict[int, float]:
    """Returns `{k: Recall@k}` of queries against a library, in query chunks.

    Same rule as :func:`recall_at_k`, but the `(q, n)` matrix is never built:
    chunks of `batch_size` queries are scored against the full library by one
    jitted kernel with a fixed chunk shape (the last chunk is zero-padded), so peak
    memory is `O(batch_size * n)` and it compiles once per shape.

    Parameters
    ----------
    query_emb
        `(q, n_e)` query embeddings; query `i` matches library item `i`.
    library_emb
        `(n, n_e)` library embeddings, `n >= q`.
    sim_fn
        `sim_fn(u_emb, v_emb) -> (n_u, n_v)`.
    ks
        cut-offs, positive integers.
    batch_size
        queries per chunk.
    query_is_u
        if True the queries are the u side (scores `sim_fn(query,
        library)`), else the v side (scores `sim_fn(library, query).T`).

    Returns
    -------
    dict[int, float]
        Dict mapping each `k` to a fraction in `[0, 1]`.

    Raises
    ------
    ValueError
        on incompatible shapes, `batch_size < 1` or invalid `ks`.
    """
    q_shape, l_shape = np.shape(query_emb), np.shape(library_emb)
    if len(q_shape) != 2 or len(l_shape) != 2 or q_shape[1] != l_shape[1] or not 0 < q_shape[0] <= l_shape[0]:
        raise ValueError(
            f"expected query_emb (q, n_e) and library_emb (n, n_e) with 0 < q <= n; got {q_shape} and {l_shape}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    ks = _check_ks(ks)
    n_query = q_shape[0]
    chunk = min(batch_size, n_query)
    kernel = _rank_kernel(sim_fn, query_is_u)
    query = jnp.asarray(query_emb)
    library = jnp.asarray(library_emb)
    ranks = []
    for start in range(0, n_query, chunk):
        block = query[start : start + chunk]
        valid = block.shape[0]
        if valid < chunk:  # pad so that the kernel sees one shape only
            block = jnp.concatenate([block, jnp.zeros((chunk - valid, q_shape[1]), block.dtype)])
        ranks.append(np.asarray(kernel(block, library, start))[:valid])
    return _recall_from_ranks(np.concatenate(ranks), ks)


def retrieval_metrics(
    u_emb: jax.Array,
    v_emb: jax.Array,
    sim_fn: SimilarityFn = cosine_similarity,
    ks: Sequence[int] = (1, 5),
    batch_size: int = 1024,
) -> dict[str, float]:
    """Returns crossmodal Recall@k in both directions for paired embeddings.

    `"coef_to_traj/R@k"`: query `u_i` (coefficient embedding) against the library
    of all `v_j` (trajectory embeddings); `"traj_to_coef/R@k"`: query `v_i`
    against all `u_j`. Ranks follow the pessimistic tie rule of :func:`recall_at_k`.

    Parameters
    ----------
    u_emb
        `(sample, n_e)` coefficient embeddings.
    v_emb
        `(sample, n_e)` trajectory embeddings; row `i` pairs with `u_emb[i]`.
    sim_fn
        `sim_fn(u_emb, v_emb) -> (n_u, n_v)`.
    ks
        cut-offs.
    batch_size
        queries per chunk (memory `O(batch_size * sample)`).

    Returns
    -------
    dict[str, float]
        Dict `{"coef_to_traj/R@k": float, "traj_to_coef/R@k": float}` over `ks`,
        values in `[0, 1]`.

    Raises
    ------
    ValueError
        if the shapes differ or are not `(sample, n_e)`.
    """
    if np.ndim(u_emb) != 2 or np.shape(u_emb) != np.shape(v_emb):
        raise ValueError(f"expected u_emb and v_emb (sample, n_e) of equal shape; got {np.shape(u_emb)} and "
                         f"{np.shape(v_emb)}")
    coef_to_traj = batched_recall(u_emb, v_emb, sim_fn, ks, batch_size, query_is_u=True)
    traj_to_coef = batched_recall(v_emb, u_emb, sim_fn, ks, batch_size, query_is_u=False)
    metrics = {f"coef_to_traj/R@{k}": r for k, r in coef_to_traj.items()}
    metrics.update({f"traj_to_coef/R@{k}": r for k, r in traj_to_coef.items()})
    return metrics


def blockwise_retrieval_metrics(u_emb: jax.Array, v_emb: jax.Array, block: int,
                                sim_fn: SimilarityFn = cosine_similarity, ks: Sequence[int] = (1, 5),
                                batch_size: int = 1024) -> dict[str, float]:
    """Returns `retrieval_metrics` averaged over the disjoint libraries of `block` consecutive pairs.

    Library `b` is pairs `[b * block, (b + 1) * block)`; pairs after the last whole library are left
    out. With `block` equal to a training batch this is the in-batch recall that training logs of
    contrastive models often report, against the whole-set recall of `retrieval_metrics`.

    Raises
    ------
    ValueError
        if the shapes differ, or `block` is not in `[1, sample]`.
    """
    n = np.shape(u_emb)[0]
    if np.shape(u_emb) != np.shape(v_emb) or not 1 <= block <= n:
        raise ValueError(f"expected u_emb and v_emb (sample, n_e) of equal shape and 1 <= block <= sample; got "
                         f"{np.shape(u_emb)}, {np.shape(v_emb)} and block {block}")
    per_library = [retrieval_metrics(u_emb[b:b + block], v_emb[b:b + block], sim_fn, ks, batch_size)
                   for b in range(0, n - block + 1, block)]
    return {key: float(np.mean([m[key] for m in per_library])) for key in per_library[0]}


def merge_top_k(top_scores: jax.Array, top_items: jax.Array, scores: jax.Array, items: jax.Array, k: int):
    """Returns the running top-k `(scores (q, k), items (q, k, ...))` updated with a new chunk.

    The chunk's own top `min(k, n)` are taken first, then merged with the running top-k, so
    only `2k` items per query are ever gathered. Sorted by decreasing score; among equal
    scores the running items come first, then chunk items in chunk order (`lax.top_k` is
    stable), i.e. the earliest-seen item wins a tie.

    Parameters
    ----------
    top_scores
        `(q, k)` running best scores (`-inf` where empty), sorted decreasing.
    top_items
        `(q, k, ...)` the items (indices, coefficient vectors, ...) of `top_scores`.
    scores
        `(q, n)` scores of the chunk's items for each query.
    items
        `(n, ...)` the chunk's items, shared by all queries.
    k
        how many to keep (static).
    """
    chunk_scores, pos = jax.lax.top_k(scores, min(k, scores.shape[1]))
    merged_scores = jnp.concatenate([top_scores, chunk_scores], axis=1)
    merged_items = jnp.concatenate([top_items, items[pos].astype(top_items.dtype)], axis=1)
    new_scores, best = jax.lax.top_k(merged_scores, k)
    best = best.reshape(best.shape + (1,) * (merged_items.ndim - 2))
    return new_scores, jnp.take_along_axis(merged_items, best, axis=1)


@functools.lru_cache(maxsize=None)
def _top_k_kernel(sim_fn: SimilarityFn, k: int, chunk: int, dtype: str):
    @jax.jit
    def kernel(query, bank):
        # query: (q, n_e); bank: (n, n_e) with n >= chunk >= k.
        n = bank.shape[0]
        n_chunks = -(-n // chunk)
        query = query.astype(dtype)
        neg_inf = jnp.array(-jnp.inf, dtype)

        def body(c, carry):
            wanted = c * chunk
            # dynamic_slice clamps the start so the last slice overlaps its
            # predecessor instead of running off the end; mask the overlap.
            start = jnp.minimum(wanted, n - chunk)
            block = jax.lax.dynamic_slice_in_dim(bank, start, chunk).astype(dtype)
            index = (start + jnp.arange(chunk)).astype(jnp.int32)
            scores = sim_fn(block, query).T  # (q, chunk): s(bank_j, query_i)
            scores = jnp.where(jnp.broadcast_to(index >= wanted, scores.shape), scores, neg_inf)
            return merge_top_k(*carry, scores, index, k)

        init = (
            jnp.full((query.shape[0], k), -jnp.inf, dtype),
            jnp.zeros((query.shape[0], k), jnp.int32),
        )
        return jax.lax.fori_loop(0, n_chunks, body, init)

    return kernel


def top_k(
    query_emb: jax.Array,
    bank_emb: jax.Array,
    k: int,
    sim_fn: SimilarityFn = cosine_similarity,
    batch_size: int = 65536,
    dtype: str = "float32",
) -> tuple[jax.Array, jax.Array]:
    """Returns the `k` bank items most similar to each query: `(indices, scores)`.

    Algorithm 1 (retrieval), eq. (29) for `k = 1`: `argmax_j s(u^j, v)` with the
    bank on the u side (`scores[i, r] = sim_fn(bank[idx], query[i])`). The bank
    is scanned in chunks of `batch_size` inside one jitted loop with a running
    top-k merge, so memory is `O(q * batch_size)` beyond the bank itself; scores
    are computed in `dtype` (float32 by default, for speed). Ties are broken
    arbitrarily.

    Parameters
    ----------
    query_emb
        `(n_e,)` or `(q, n_e)` query (trajectory) embeddings.
    bank_emb
        `(n_bank, n_e)` bank (coefficient) embeddings; store it in
        `dtype` to avoid a per-chunk cast.
    k
        number of items returned, `1 <= k <= n_bank`.
    sim_fn
        `sim_fn(u_emb, v_emb) -> (n_u, n_v)`; temperature included.
    batch_size
        bank rows per chunk.
    dtype
        compute dtype of the scores.

    Returns
    -------
    tuple[jax.Array, jax.Array]
        `indices` int32 and `scores` (`dtype`), each `(k,)` for a 1-D query or
        `(q, k)`, sorted by decreasing score.

    Raises
    ------
    ValueError
        on incompatible shapes or `k` outside `[1, n_bank]`.
    """
    q_shape, b_shape = np.shape(query_emb), np.shape(bank_emb)
    single = len(q_shape) == 1
    if len(q_shape) not in (1, 2) or len(b_shape) != 2 or q_shape[-1] != b_shape[1]:
        raise ValueError(f"expected query_emb (n_e,) or (q, n_e) and bank_emb (n_bank, n_e); got {q_shape} and "
                         f"{b_shape}")
    if not 1 <= k <= b_shape[0]:
        raise ValueError(f"k must be in [1, n_bank={b_shape[0]}]; got {k}")
    if b_shape[0] >= 2**31:
        raise ValueError(f"bank too large for int32 indices: {b_shape}")
    chunk = max(min(int(batch_size), b_shape[0]), k)
    kernel = _top_k_kernel(sim_fn, int(k), chunk, str(jnp.dtype(dtype)))
    query = jnp.atleast_2d(jnp.asarray(query_emb))
    scores, indices = kernel(query, jnp.asarray(bank_emb))
    if single:
        return indices[0], scores[0]
    return indices, scores


def softmax_weights(scores: jax.Array) -> jax.Array:
    """Returns the retrieval posterior weights `w_i = exp(s_i) / sum_l exp(s_l)`.

    Eq. (28) and the weights `w_i(v; theta)` below it: the learned conditional
    `nu_{u|v}^N` on the bank. `scores` must already include the temperature (they
    are the logits `s(u^i, v)`). Over the top-k scores only, this is the posterior
    restricted to, and renormalised on, the retrieved candidates.

    Parameters
    ----------
    scores
        `(..., n)` logits; the softmax runs over the last axis.

    Returns
    -------
    jax.Array
        `(..., n)` non-negative weights summing to 1 over the last axis.
    """
    return jax.nn.softmax(jnp.asarray(scores), axis=-1)
