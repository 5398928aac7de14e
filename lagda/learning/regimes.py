"""Observation regimes drawn on the fly from dense simulated tracks (training augmentation).

One dense simulation (every RK4 step recorded, several drifters per field) is turned into
many observation regimes inside the jitted train step, from a key folded from
(seed, epoch, step), so training and `--resume` stay bit-for-bit reproducible. Per field:

- with probability `regime_dense_prob`: the first drifter alone, every observation, exact
  (the regime of the shipped test data);
- otherwise: a stride s log-uniform in [1, regime_stride_max] with a random offset, a
  fraction q ~ U(0, regime_gap_max) of the remaining observations dropped at random
  (irregular times, gaps), position noise sigma = regime_noise_max * u (u ~ U(0, 1), or
  sigma = 0 with probability 1/2), and n ~ U{1..regime_max_drifters} drifters chosen at
  random among the field's drifters (their releases are the data's: fixed or random).

Shapes stay static: the result is the noised positions and a mask `(batch, drifter, obs)`;
the set encoder reads only the masked-in observations.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lagda.learning.config import TrainConfig


def _one_field(key, positions, config: TrainConfig):
    """Returns (positions, mask) of one field: `(drifter, obs, 2)`, bool `(drifter, obs)`."""
    n_drifters, n_obs = positions.shape[:2]
    keys = jax.random.split(key, 8)
    dense = jax.random.bernoulli(keys[0], config.regime_dense_prob)
    log_max = jnp.log(float(config.regime_stride_max) + 1.0)
    stride = jnp.clip(jnp.floor(jnp.exp(jax.random.uniform(keys[1], (), maxval=log_max))), 1, config.regime_stride_max)
    stride = jnp.minimum(jnp.where(dense, 1, stride), n_obs - 1).astype(jnp.int32)
    offset = jax.random.randint(keys[2], (), 0, n_obs) % stride
    offset = jnp.where(offset + stride < n_obs, offset, 0)  # at least two observations on the grid
    j = jnp.arange(n_obs)
    on_grid = (j >= offset) & ((j - offset) % stride == 0)
    drop = jnp.where(dense, 0.0, jax.random.uniform(keys[3], (), maxval=config.regime_gap_max))
    first_two = (j == offset) | (j == offset + stride)
    kept = (jax.random.uniform(keys[4], (n_drifters, n_obs)) >= drop) | first_two[None]
    noisy = jax.random.bernoulli(keys[5], 0.5) & ~dense
    sigma = jnp.where(noisy, config.regime_noise_max * jax.random.uniform(keys[6]), 0.0)
    count = jax.random.randint(keys[7], (), 1, min(config.regime_max_drifters, n_drifters) + 1)
    rank = jnp.argsort(jax.random.uniform(jax.random.fold_in(key, 1), (n_drifters,)))
    chosen = jnp.where(dense, jnp.arange(n_drifters) == 0, rank < count)
    noise = sigma * jax.random.normal(jax.random.fold_in(key, 2), positions.shape, positions.dtype)
    mask = chosen[:, None] & on_grid[None] & kept
    return positions + noise, mask


def sample_regimes(key, positions, config: TrainConfig):
    """Returns (noised positions `(batch, drifter, obs, 2)`, mask bool `(batch, drifter, obs)`).

    Deterministic in `key`; field b uses fold_in(key, b).

    Parameters
    ----------
    positions
        dense, exact, unwrapped `(batch, drifter, obs, 2)`.
    """
    keys = jax.vmap(lambda b: jax.random.fold_in(key, b))(jnp.arange(positions.shape[0]))
    return jax.vmap(lambda k, z: _one_field(k, z, config))(keys, positions)

