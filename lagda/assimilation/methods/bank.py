"""The coefficient bank of retrieve / embed: one streaming pass giving the top-k and the softmax moments.

The answer: the top-k coefficients with their scores, and the self-normalised mean and variance
of x = (Re c, Im c) under weights softmax(s). The bank is either given (a dataset's
coefficients, scanned in batches) or `size` i.i.d. prior draws, batch b drawn from
fold_in(key, b). Drawing the normals costs far more than scoring them,
so a prior bank that fits in config.bank_cache_mb is drawn once, kept (the last one only) and
reused by every later call with the same key, prior and size: the draws are deterministic in
the key, so the cache changes no result, only the time. Larger banks are streamed, drawn batch
by batch inside the scan and never stored. With several devices (or processes under
jax.distributed) the batches are split over all of them (`scan_bank_sharded`), with the same
answer as one device.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagda.learning.losses import similarity
from lagda.learning.retrieval import merge_top_k
from simulate.prior import draw_coefficients


def _scan_batches(query, key, scale, bank, mask, tau, first, n_local: int, kind: str, size: int, batch: int, k: int,
                  from_prior: bool):
    """Returns the running state (top coef, top scores, max, sum w, sum w x, sum w x^2)
    of batches first .. first+n_local-1.

    Batch b is draw_coefficients(fold_in(key, b)) when from_prior, else rows j*batch .. of `bank`
    (the rows of these batches, zero-padded); items past `size` get score -inf.
    """
    q, n_mode = query.shape[0], scale.shape[0]
    query = query * mask[None, :]

    def body(j, carry):
        top_c, top_s, m, sum_w, sum_x, sum_x2 = carry
        b = first + j
        if from_prior:
            coef = draw_coefficients(jax.random.fold_in(key, b), scale, batch, jnp.complex64)
        else:
            coef = jax.lax.dynamic_slice_in_dim(bank, j * batch, batch)
        x = jnp.concatenate([jnp.real(coef), jnp.imag(coef)], axis=-1).astype(jnp.float32)
        valid = b * batch + jnp.arange(batch) < size
        s = similarity(x * mask[None, :], query, kind, tau).T.astype(jnp.float32)  # (q, batch)
        s = jnp.where(jnp.broadcast_to(valid[None, :], s.shape), s, -jnp.inf)
        top_s, top_c = merge_top_k(top_s, top_c, s, coef, k)
        m_new = jnp.maximum(m, jnp.max(s, axis=1))
        shrink, w = jnp.exp(m - m_new), jnp.exp(s - m_new[:, None])
        w = jnp.where(jnp.isfinite(m_new)[:, None], w, 0.0)  # a part with no valid item so far adds nothing
        shrink = jnp.where(jnp.isfinite(m_new), shrink, 1.0)
        return (top_c, top_s, m_new, sum_w * shrink + jnp.sum(w, axis=1),
                sum_x * shrink[:, None] + w @ x, sum_x2 * shrink[:, None] + w @ (x * x))

    zeros = jnp.zeros((q, 2 * n_mode), jnp.float32)
    init = (jnp.zeros((q, k, n_mode), jnp.complex64), jnp.full((q, k), -jnp.inf, jnp.float32),
            jnp.full((q,), -jnp.inf, jnp.float32), jnp.zeros((q,), jnp.float32), zeros, zeros)
    return jax.lax.fori_loop(0, n_local, body, init)


def batches_per_device(size: int, batch: int, n_devices: int) -> int:
    """Returns how many bank batches each device scans: ceil(ceil(size / batch) / n_devices)."""
    return -(-(-(-size // batch)) // n_devices)


def _moments(sum_w, sum_x, sum_x2):
    mean = sum_x / sum_w[:, None]
    return mean, sum_x2 / sum_w[:, None] - mean**2


@functools.partial(jax.jit, static_argnames=("kind", "size", "batch", "k", "from_prior"))
def scan_bank(query, key, scale, bank, mask, tau, kind: str, size: int, batch: int, k: int, from_prior: bool):
    """Returns top-k (coef `(q, k, mode)`, scores `(q, k)`) and softmax moments of x over the bank.

    One pass over `size` bank items in batches: prior draws draw_coefficients(fold_in(key, b))
    when from_prior, else rows of `bank` (zero-padded to a whole number of batches). Running
    log-sum-exp sums give the self-normalised mean and variance of x = (Re c, Im c), `(q, 2K)`.
    """
    n_batches = -(-size // batch)
    top_c, top_s, _, sum_w, sum_x, sum_x2 = _scan_batches(query, key, scale, bank, mask, tau, 0, n_batches, kind, size,
                                                          batch, k, from_prior)
    return (top_c, top_s, *_moments(sum_w, sum_x, sum_x2))


@functools.partial(jax.jit, static_argnames=("kind", "size", "batch", "k", "from_prior", "mesh"))
def scan_bank_sharded(query, key, scale, bank, mask, tau, kind: str, size: int, batch: int, k: int, from_prior: bool,
                      mesh):
    """Returns what `scan_bank` returns, the bank's batches split over the devices of `mesh` (axis "bank").

    Device d scans the contiguous batches d * per .. (d + 1) * per - 1 (prior draws with the same
    keys, or its rows of `bank`, which must hold n_devices * per * batch rows); the parts are
    combined exactly: the top-k of the gathered top-ks, and the log-sum-exp sums rescaled to the
    global maximum. So the answer is one device's, up to the order of floating-point sums. The
    mesh may span several processes (jax.distributed): every process then gets the whole answer.
    """
    from jax.sharding import PartitionSpec as P

    per = batches_per_device(size, batch, mesh.size)

    def part(query, key, scale, bank, mask, tau):
        d = jax.lax.axis_index("bank")
        top_c, top_s, m, sum_w, sum_x, sum_x2 = _scan_batches(query, key, scale, bank, mask, tau, d * per, per, kind,
                                                              size, batch, k, from_prior)
        all_s = jax.lax.all_gather(top_s, "bank", axis=1, tiled=True)  # (q, n_dev * k)
        all_c = jax.lax.all_gather(top_c, "bank", axis=1, tiled=True)
        top_s, index = jax.lax.top_k(all_s, k)
        top_c = jnp.take_along_axis(all_c, index[:, :, None], axis=1)
        m_all = jax.lax.pmax(m, "bank")
        factor = jnp.where(jnp.isfinite(m), jnp.exp(m - m_all), 0.0)
        sums = [jax.lax.psum(v * (factor if v.ndim == 1 else factor[:, None]), "bank") for v in (sum_w, sum_x, sum_x2)]
        return (top_c, top_s, *_moments(*sums))

    replicated = P()
    bank_spec = replicated if from_prior else P("bank")
    return jax.shard_map(part, mesh=mesh,
                         in_specs=(replicated, replicated, replicated, bank_spec, replicated, replicated),
                         out_specs=replicated, check_vma=False)(query, key, scale, bank, mask, tau)


@functools.partial(jax.jit, static_argnames=("n_batches", "batch"))
def _draw_bank(key, scale, n_batches: int, batch: int):
    """Returns the i.i.d. bank exactly as scan_bank draws it, complex64 `(n_batches * batch, mode)`."""
    draw = lambda b: draw_coefficients(jax.random.fold_in(key, b), scale, batch, jnp.complex64)  # noqa: E731
    return jax.lax.map(draw, jnp.arange(n_batches)).reshape(n_batches * batch, -1)


def prior_bank(key, scale, size: int, batch: int, cache_mb: int, cache: dict | None = None):
    """Returns the i.i.d. bank for (key, scale, size, batch), kept in `cache` for later calls; None above cache_mb.

    cache: a dict owned by the caller (a learned method object), holding one bank at a time so that
    memory stays bounded by cache_mb; None draws the bank without keeping it.
    """
    n_batches = -(-size // batch)
    if n_batches * batch * len(scale) * 8 > cache_mb * 2**20:
        return None
    if cache is None:
        return _draw_bank(key, scale, n_batches, batch)
    tag = (np.asarray(jax.random.key_data(key)).tobytes(), np.asarray(scale).tobytes(), size, batch)
    if tag not in cache:
        cache.clear()
        cache[tag] = _draw_bank(key, scale, n_batches, batch)
    return cache[tag]


def bank_search(queries, scale, config, scorer, key, bank=None, cache=None):
    """Returns (candidates `(q, k, mode)`, scores `(q, k)`, mean `(q, 2K)`, var `(q, 2K)`) over the bank.

    Parameters
    ----------
    queries
        `(q, n_e)` track embeddings
    scale
        `(mode,)` prior std a_k.
    config
        a BankConfig (bank_size, bank_batch, bank_cache_mb, top_k)
    scorer
        lagda.assimilation.methods.learned.Scorer.
    bank
        complex `(n, mode)` coefficients to rank, or None for config.bank_size prior draws.
    cache
        the caller's dict keeping the i.i.d. prior bank between calls (`prior_bank`), or None.
    """
    n_e = queries.shape[1]
    mask = jnp.ones(n_e, jnp.float32) if scorer.mask is None else jnp.asarray(scorer.mask, jnp.float32)
    queries, scale = jnp.asarray(queries, jnp.float32), jnp.asarray(scale, jnp.float32)
    size = config.bank_size if bank is None else len(bank)
    k = min(config.top_k, size)
    batch = min(config.bank_batch, size)
    mesh = bank_mesh()
    rows = batches_per_device(size, batch, mesh.size) * mesh.size * batch  # whole batches, as many per device
    from_prior = False
    if bank is not None:
        bank_arr = jnp.asarray(np.concatenate([bank, np.zeros((rows - size, bank.shape[1]))]), jnp.complex64)
    else:
        bank_arr = prior_bank(key, scale, size, batch, config.bank_cache_mb, cache)
        if bank_arr is None:  # too large to keep: drawn batch by batch inside the scan
            bank_arr, from_prior = jnp.zeros((mesh.size, len(scale)), jnp.complex64), True
        elif len(bank_arr) < rows:
            bank_arr = jnp.concatenate([bank_arr, jnp.zeros((rows - len(bank_arr), len(scale)), jnp.complex64)])
    args = (queries, key, scale, bank_arr, mask, float(scorer.tau), scorer.kind, size, batch, k, from_prior)
    out = scan_bank(*args) if mesh.size == 1 else scan_bank_sharded(*args, mesh)
    return tuple(np.asarray(a) for a in out)


def bank_mesh():
    """Returns the 1-D mesh (axis "bank") over every device of every process: the bank is split over all of them."""
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()), ("bank",))
