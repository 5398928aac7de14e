"""retrieve / embed / hybrid with a hand-made embedding: planted sample retrieved first, weights
sum to one, the streaming prior bank equals a direct computation, eq. (41a) by importance sampling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.assimilation.assimilate import assimilate
from lagda.learning.losses import similarity
from lagda.assimilation.methods import AssimConfig
from lagda.assimilation.methods._common import to_real
from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.learned import Scorer, closed_form
from lagda.io.tracks import Tracks
from simulate import draw_coefficients
from tests.assim_twin import make_twin


@pytest.fixture(scope="module")
def twin():
    return make_twin(n_field=2, n_drifter=2, n_obs=100)


def _tracks(twin):
    n_field, n_drifter, n_obs, _ = twin.positions.shape
    return Tracks(positions=twin.positions.reshape(-1, n_obs, 2), times=np.tile(twin.times[:1], (n_field * n_drifter, 1)),
                  field=np.repeat(np.arange(n_field), n_drifter), trajectory_id=np.arange(n_field * n_drifter),
                  release=twin.release.reshape(-1, 2))


def _oracle_scorer(twin, noise=0.01):
    """A hand-made 'encoder': the true coefficients of the field whose tracks these are, plus noise."""
    def embed_fn(positions):
        f = [int(np.argmin(np.abs(twin.positions[:, :, 0, 0] - p[0, 0, 0]).min(1))) for p in positions[:, None]]
        x = to_real(twin.coef[f])
        return (x + noise * np.random.default_rng(0).normal(size=x.shape)).astype(np.float32)
    return Scorer(embed_fn, "cosine", 0.05)


def test_retrieve_returns_the_planted_sample_first(twin):
    bank = np.array(draw_coefficients(jax.random.key(5), twin.model.scale, 5000, np.complex128))
    bank[1234], bank[4321] = twin.coef[0], twin.coef[1]
    config = AssimConfig(top_k=8, bank_batch=1024)
    post = assimilate(_tracks(twin), "retrieve", (twin.model.k1, twin.model.k2, twin.model.omega), twin.model.scale,
                      twin.model.dt, config=config, scorer=_oracle_scorer(twin), bank=bank)
    assert np.allclose(post.candidates[:, 0], twin.coef, atol=1e-6)  # complex64 bank
    assert np.allclose(post.candidate_weights.sum(1), 1.0) and np.allclose(post.weights.sum(1), 1.0)
    assert np.all(np.diff(post.candidate_weights, axis=1) <= 1e-12)  # best first


@pytest.mark.parametrize("cache_mb", [0, 1024], ids=["streamed", "cached"])
def test_streaming_prior_bank_equals_a_direct_computation(twin, cache_mb):
    key, scale, query = jax.random.key(7), twin.model.scale, to_real(twin.coef).astype(np.float32)
    config = AssimConfig(bank_size=2500, bank_batch=1000, top_k=5, bank_cache_mb=cache_mb)
    scorer = Scorer(None, "cosine", 0.1)
    cands, scores, mean, var = bank_search(query, scale, config, scorer, key)
    draws = np.concatenate([np.asarray(draw_coefficients(jax.random.fold_in(key, b), jnp.asarray(scale, jnp.float32), 1000))
                            for b in range(3)])[:2500]
    x = to_real(draws).astype(np.float64)
    s = np.asarray(similarity(jnp.asarray(x), jnp.asarray(query, jnp.float64), "cosine", 0.1)).T
    order = np.argsort(-s, axis=1)[:, :5]
    assert np.allclose(cands, draws[order], atol=1e-6)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    assert np.allclose(mean, w @ x, atol=1e-4)
    assert np.allclose(var, w @ x**2 - (w @ x) ** 2, atol=1e-4)


def test_embed_bank_mean_matches_the_closed_form_of_eq_41a(twin):
    m = twin.model
    tau = 0.5
    query = 0.5 * tau / np.sqrt(m.prior_var)  # tilted mean D e / tau: half a prior std per coordinate
    scorer = Scorer(None, "inner", tau)
    config = AssimConfig(bank_size=200_000, bank_batch=50_000, top_k=4)
    _, _, mean, var = bank_search(query[None].astype(np.float32), m.scale, config, scorer, jax.random.key(3))
    exact_mean, exact_var = closed_form(query, m, scorer)
    assert np.allclose(mean[0], exact_mean, atol=0.15 * np.sqrt(m.prior_var).max())
    assert np.allclose(var[0], exact_var, rtol=0.3)


def test_hybrid_refines_the_embed_estimate(twin):
    config = AssimConfig(bank_size=4096, bank_batch=4096, members=8, hybrid_iterations=10)
    modes = (twin.model.k1, twin.model.k2, twin.model.omega)
    scorer = _oracle_scorer(twin, noise=0.05)
    embed = assimilate(_tracks(twin), "embed", modes, twin.model.scale, twin.model.dt, config=config, scorer=scorer)
    hybrid = assimilate(_tracks(twin), "hybrid", modes, twin.model.scale, twin.model.dt, config=config, scorer=scorer)
    for f in range(2):
        assert twin.field_error(hybrid.mean[f], f) < twin.field_error(embed.mean[f], f)
