"""The prior bank cache: drawn once, reused, bounded; its answers equal the streamed bank's (test_methods_learned)."""

import jax
import numpy as np

from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.config import EmbedConfig
from lagda.assimilation.methods.learned import Scorer
from simulate import rectangular_modes, spectrum

K1, K2 = rectangular_modes((-1, 1), (-1, 1))
SCALE = spectrum(K1, K2, 1.5, 10.0)
N_MODE = len(SCALE)


def test_iid_bank_is_drawn_once_and_reused_by_its_owner():
    config, cache = EmbedConfig(bank_size=3000, bank_batch=1000, top_k=3), {}
    query = np.ones((1, 2 * N_MODE), np.float32)
    first = bank_search(query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4), cache=cache)
    stored = next(iter(cache.values()))
    again = bank_search(2 * query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4), cache=cache)
    assert next(iter(cache.values())) is stored and len(cache) == 1
    assert np.array_equal(first[0], again[0])  # same bank, same direction: same candidates
    bank_search(query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(5), cache=cache)
    assert len(cache) == 1 and next(iter(cache.values())) is not stored
    # without an owner's cache the same bank is drawn again: the same candidates, nothing kept anywhere
    fresh = bank_search(query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4))
    assert np.array_equal(fresh[0], first[0])


def test_bank_above_the_cache_limit_is_not_stored():
    config, cache = EmbedConfig(bank_size=3000, bank_batch=1000, top_k=3, bank_cache_mb=0), {}
    bank_search(np.ones((1, 2 * N_MODE), np.float32), SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4),
                cache=cache)
    assert not cache
