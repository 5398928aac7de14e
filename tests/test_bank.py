"""The prior bank cache: drawn once, reused, bounded; its answers equal the streamed bank's (test_methods_learned)."""

import jax
import numpy as np

from lagda.assimilation.methods import AssimConfig
from lagda.assimilation.methods import bank as bank_module
from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.learned import Scorer
from simulate import rectangular_modes, spectrum

K1, K2 = rectangular_modes((-1, 1), (-1, 1))
SCALE = spectrum(K1, K2, 1.5, 10.0)
N_MODE = len(SCALE)


def test_iid_bank_is_drawn_once_and_reused():
    config = AssimConfig(bank_size=3000, bank_batch=1000, top_k=3)
    query = np.ones((1, 2 * N_MODE), np.float32)
    first = bank_search(query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4))
    stored = next(iter(bank_module._cached_bank.values()))
    again = bank_search(2 * query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4))
    assert next(iter(bank_module._cached_bank.values())) is stored and len(bank_module._cached_bank) == 1
    assert np.array_equal(first[0], again[0])  # same bank, same direction: same candidates
    bank_search(query, SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(5))
    assert len(bank_module._cached_bank) == 1 and next(iter(bank_module._cached_bank.values())) is not stored


def test_bank_above_the_cache_limit_is_not_stored():
    bank_module._cached_bank.clear()
    config = AssimConfig(bank_size=3000, bank_batch=1000, top_k=3, bank_cache_mb=0)
    bank_search(np.ones((1, 2 * N_MODE), np.float32), SCALE, config, Scorer(None, "cosine", 0.1), jax.random.key(4))
    assert not bank_module._cached_bank
