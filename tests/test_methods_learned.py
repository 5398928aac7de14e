"""retrieve / embed / hybrid with a hand-made embedding: planted sample retrieved first, weights
sum to one, the streaming prior bank equals a direct computation, eq. (41a) by importance sampling."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.config import EmbedConfig
from lagda.assimilation.methods.learned import Scorer, closed_form
from lagda.assimilation.methods.registry import METHODS, Embed, Hybrid, Retrieve
from lagda.assimilation.model import to_real
from lagda.io.tracks import Tracks
from lagda.learning.losses import similarity
from lagda.testing import make_twin
from simulate import draw_coefficients


@pytest.fixture(scope="module")
def twin():
    return make_twin(n_field=2, n_drifter=2, n_obs=100)


def _tracks(twin):
    n_field, n_drifter, n_obs, _ = twin.positions.shape
    return Tracks(positions=twin.positions.reshape(-1, n_obs, 2),
                  times=np.tile(twin.times[:1], (n_field * n_drifter, 1)),
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
    retrieve = Retrieve(_oracle_scorer(twin), bank=bank, top_k=8, bank_batch=1024)
    post = retrieve(_tracks(twin), twin.model)
    assert np.allclose(post.candidates[:, 0], twin.coef, atol=1e-6)  # complex64 bank
    assert np.allclose(post.candidate_weights.sum(1), 1.0) and np.allclose(post.weights.sum(1), 1.0)
    assert np.all(np.diff(post.candidate_weights, axis=1) <= 1e-12)  # best first


@pytest.mark.parametrize("cache_mb", [0, 1024], ids=["streamed", "cached"])
def test_streaming_prior_bank_equals_a_direct_computation(twin, cache_mb):
    key, scale, query = jax.random.key(7), twin.model.scale, to_real(twin.coef).astype(np.float32)
    config = EmbedConfig(bank_size=2500, bank_batch=1000, top_k=5, bank_cache_mb=cache_mb)
    scorer = Scorer(None, "cosine", 0.1)
    cands, scores, mean, var = bank_search(query, scale, config, scorer, key)
    draws = np.concatenate([np.asarray(draw_coefficients(jax.random.fold_in(key, b),
                                                         jnp.asarray(scale, jnp.float32), 1000))
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
    config = EmbedConfig(bank_size=200_000, bank_batch=50_000, top_k=4)
    _, _, mean, var = bank_search(query[None].astype(np.float32), m.scale, config, scorer, jax.random.key(3))
    exact_mean, exact_var = closed_form(query, m, scorer)
    std = np.sqrt(m.prior_var)
    prior_error = np.abs(exact_mean) / std  # the prior mean's error, in prior stds: 0.5 everywhere
    assert np.all(np.abs(mean[0] - exact_mean) / std < 0.2 * prior_error)  # beats the prior mean 5x in every coordinate
    assert np.allclose(var[0], exact_var, rtol=0.3)  # inner tilting: the variance stays D


def test_l2_closed_form_of_eq_48a_matches_self_normalised_prior_draws(twin):
    """exp(-|m u - m e|^2 / (2 tau)) N(0, D): precision D^-1 + m^2 / tau, mean cov m^2 e / tau; the mask m
    zeroes the mean mode, whose conditional stays the prior."""
    m = twin.model
    mask = np.ones(2 * m.n_modes)
    mask[[4, 4 + m.n_modes]] = 0.0  # mode (0, 0) of the 3 x 3 set, Re and Im
    tau = float(m.prior_var[mask > 0].max())  # tilting as strong as the prior in the largest tilted coordinate
    exact_var = 1.0 / (1.0 / m.prior_var + mask**2 / tau)
    query = mask * 0.5 * tau / np.sqrt(exact_var)  # conditional mean half a conditional std off zero
    scorer = Scorer(None, "l2", tau, mask)
    mean, var = closed_form(query, m, scorer)
    assert np.allclose(var, exact_var) and np.allclose(mean[mask > 0], 0.5 * np.sqrt(exact_var[mask > 0]))
    config = EmbedConfig(bank_size=200_000, bank_batch=50_000, top_k=4)
    _, _, mc_mean, mc_var = bank_search(query[None].astype(np.float32), m.scale, config, scorer, jax.random.key(4))
    std = np.sqrt(m.prior_var)
    assert np.max(np.abs(mc_mean[0] - mean) / std) < 0.2 * np.max(np.abs(mean) / std)  # prior mean 0 is 5x worse
    assert np.max(np.abs(mc_var[0] / var - 1.0)) < 0.2 < np.max(np.abs(m.prior_var / var - 1.0))  # the prior var fails


def _tracks_misfit(twin, coef, f):
    """RMS distance between the tracks of field f and those simulated in `coef` `(mode,)`."""
    from simulate import simulate_tracks

    m = twin.model
    stride = int(round(twin.times[0, 0] / m.dt))
    sim = np.asarray(simulate_tracks(np.asarray(coef)[None], twin.release[f : f + 1], m.k1, m.k2, m.omega, m.dt,
                                     twin.positions.shape[2], stride))
    return float(np.sqrt(np.mean((sim[0] - twin.positions[f]) ** 2)))


@pytest.fixture(scope="module")
def sparse_twin():
    return make_twin(n_field=2, n_drifter=2, n_obs=25, stride=20)


@pytest.fixture(scope="module")
def hybrid_runs(sparse_twin):
    """embed, and hybrid without and with the Gauss-Newton refinement, on sparse tracks (oracle scorer)."""
    twin = sparse_twin
    scorer, bank = _oracle_scorer(twin, noise=0.05), dict(bank_size=4096, bank_batch=4096, members=8)
    out = {"embed": Embed(scorer, **bank)(_tracks(twin), twin.model)}
    for refine in ("none", "gauss_newton"):
        out[refine] = Hybrid(scorer, **bank, iterations=10, refine=refine)(_tracks(twin), twin.model)
    return out


def test_hybrid_refines_the_embed_estimate(sparse_twin, hybrid_runs):
    twin, embed, plain, refined = sparse_twin, hybrid_runs["embed"], hybrid_runs["none"], hybrid_runs["gauss_newton"]
    for f in range(2):
        assert refined.info[f]["refined"] is True and plain.info[f]["refined"] is False
        assert refined.info[f]["learned_conditional"] is True
        assert twin.field_error(refined.mean[f], f) < twin.field_error(embed.mean[f], f)
        # finite differences over 20 RK4 steps are biased; the 4D-Var on positions removes most of that misfit
        assert _tracks_misfit(twin, refined.mean[f], f) < 0.5 * _tracks_misfit(twin, plain.mean[f], f)


def test_hybrid_falls_back_to_the_prior_on_tracks_the_encoder_cannot_read(twin):
    """An encoder trained on other observation times: hybrid uses the prior, says why, and still refines;
    embed and retrieve refuse. The refinement in one stage over the whole window (the continuation's stages, each
    its own compilation of the RK4 misfit, cost 5 times as much here; hybrid_runs refines with them)."""
    scorer = dataclasses.replace(_oracle_scorer(twin), times=2 * twin.times[0])
    bank = dict(bank_size=1024, bank_batch=1024, members=8)
    post = Hybrid(scorer, **bank, iterations=10, refine="gauss_newton", continuation=(1.0,))(_tracks(twin), twin.model)
    for f in range(2):
        info = post.info[f]
        assert info["learned_conditional"] is False and "encoder reads 100 times" in info["learned_fallback"]
        assert info["refined"] is True
        assert twin.field_error(post.mean[f], f) < 0.5  # the prior mean's error is 1
    for method in ("embed", "retrieve"):
        with pytest.raises(ValueError, match="field 0: drifter 0 is observed at 100 times"):
            METHODS[method](scorer, **bank)(_tracks(twin), twin.model)
