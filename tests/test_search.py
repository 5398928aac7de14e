"""Multi-start 4D-Var search (lagda.assimilation.methods.search) on the K = 9 twin: a planted
global minimum that the prior-mean start misses, the truth-map oracle, the start generators."""

import dataclasses

import jax
import numpy as np
import pytest

from lagda.assimilation.methods.config import HybridConfig, VarConfig
from lagda.assimilation.methods.search import (
    candidate_starts,
    gaussian_starts,
    multistart_map,
    posterior_cost,
    prior_starts,
    truth_map,
)
from lagda.assimilation.model import to_real
from lagda.testing import make_twin


@pytest.fixture(scope="module")
def sparse():
    """One drifter, 10 positions 100 RK4 steps apart: the prior mean 0 lies in a wrong basin of field 0."""
    return make_twin(n_field=3, n_drifter=1, n_obs=10, stride=100, seed=1)


def _mean(est):
    return est.samples.T @ est.weights


def test_multistart_finds_the_planted_global_minimum_a_single_start_misses(sparse):
    m, truth = sparse.model, to_real(sparse.coef[0])
    config = VarConfig(members=8, noise_std=1e-4)
    args = (sparse.positions[0], sparse.times, sparse.release[0], m, config, jax.random.key(0))
    near = truth + 0.05 * np.sqrt(m.prior_var) * np.random.default_rng(0).normal(size=18)
    starts = np.stack([np.zeros(18), near])
    single = multistart_map(*args, starts[:1], iterations=20)
    multi = multistart_map(*args, starts, iterations=20)
    cost_truth = posterior_cost(truth, *args[:5])
    # the prior-mean start ends in a local minimum far above the truth's cost; the near start below it
    assert single.info["cost_best"] > 100 * cost_truth
    assert multi.info["chosen"] == 1 and multi.info["cost_best"] <= cost_truth
    assert multi.info["costs"][0] == pytest.approx(single.info["cost_best"], rel=1e-9)
    assert multi.info["n_starts"] == 2 and multi.info["n_in_best_basin"] == 1
    assert multi.info["distances"][1] == 0.0 and multi.info["distances"][0] > 0.1
    # the reported cost is the 4D-Var objective at the returned mean (antithetic samples: mean exact)
    assert posterior_cost(to_real(_mean(multi)), *args[:5]) == pytest.approx(multi.info["cost_best"], rel=1e-8)
    assert sparse.field_error(_mean(multi), 0) < 0.1 < 0.5 < sparse.field_error(_mean(single), 0)
    # the choice follows the cost, not the order of the starts
    flipped = multistart_map(*args, starts[::-1], iterations=20)
    assert flipped.info["chosen"] == 0 and np.allclose(_mean(flipped), _mean(multi), atol=1e-12)


def test_truth_map_on_exact_dense_tracks_returns_the_truth():
    twin = make_twin(n_field=1, n_drifter=4, n_obs=200, seed=1)
    truth = to_real(twin.coef[0])
    est = truth_map(twin.positions[0], twin.times, twin.release[0], twin.model, VarConfig(members=8),
                    jax.random.key(0), truth, noise_std=0.0)
    x = to_real(_mean(est))
    assert twin.field_error(_mean(est), 0) < 1e-6
    # c_(0,0) moves no drifter: the MAP puts it at its prior mean 0; every other component stays at the truth
    still = (twin.model.k1 == 0) & (twin.model.k2 == 0)
    still = np.concatenate([still, still])
    # (to the Gauss-Newton convergence test's tolerance: 1e-5 of the truth's own value, which is far from 0)
    assert np.max(np.abs(x[still])) < 1e-5 * np.max(np.abs(truth[still])) and np.max(np.abs(truth[still])) > 1e-2
    assert np.max(np.abs(x - truth)[~still] / np.sqrt(twin.model.prior_var[~still])) < 1e-6
    assert est.info["oracle"] == "truth-map" and est.info["n_starts"] == 1


def test_gaussian_starts_are_seeded_draws_of_the_gaussian():
    rng = np.random.default_rng(0)
    mean, var = rng.normal(size=6), rng.uniform(0.1, 4.0, 6)
    draws = gaussian_starts(mean, var, 20_000, jax.random.key(1))
    assert draws.shape == (20_000, 6) and np.array_equal(draws[0], mean)
    assert np.array_equal(draws, gaussian_starts(mean, var, 20_000, jax.random.key(1)))
    assert not np.allclose(draws[1:], gaussian_starts(mean, var, 20_000, jax.random.key(2))[1:])
    se = np.sqrt(var / 20_000)  # 5 standard errors of the sample mean; ~3% for the variance
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se)
    assert np.allclose(draws.var(0) / var, 1.0, atol=0.05)
    twin_model = make_twin(n_field=1, n_drifter=1, n_obs=2).model
    prior = prior_starts(twin_model, 3, jax.random.key(0), include_mean=False)
    assert prior.shape == (3, 18) and np.all(prior[0] != 0.0)


def test_candidate_starts_take_complex_or_real_candidates_in_rank_order():
    coef = np.arange(12).reshape(4, 3) + 1j * np.arange(12, 24).reshape(4, 3)
    x = candidate_starts(coef, k=2)
    assert np.array_equal(x, np.concatenate([coef[:2].real, coef[:2].imag], axis=1))
    assert np.array_equal(candidate_starts(x), x)


def test_hybrid_learned_starts_are_searched_and_the_least_cost_end_point_kept(sparse):
    """starts > 1 adds the learned conditional's mean and draws as refinement starts: with a
    conditional at the truth the search ends lower than the product-mean start alone, and nearer the truth."""
    from lagda.assimilation.methods.hybrid import assimilate_hybrid

    m, truth = sparse.model, to_real(sparse.coef[0])
    args = (sparse.positions[0], sparse.times, sparse.release[0], m)
    near = (truth, 1e-4 * m.prior_var)  # a sharp learned conditional at the truth
    config = HybridConfig(members=8, noise_std=1e-4, refine="gauss_newton", iterations=5, learned_noise_limit=0.0,
                          continuation=(1.0,))  # untrusted: the product ignores it
    one = assimilate_hybrid(*args, config, jax.random.key(0), *near)
    three = assimilate_hybrid(*args, dataclasses.replace(config, starts=3), jax.random.key(0), *near)
    assert one.info["n_starts"] == 1 and three.info["n_starts"] == 3 and three.info["refined"]
    assert three.info["costs"][0] == pytest.approx(one.info["cost_best"], rel=1e-9)  # the product-mean start alone
    assert three.info["chosen"] != 0 and three.info["cost_best"] == min(three.info["costs"]) < one.info["cost_best"]
    assert sparse.field_error(_mean(three), 0) < sparse.field_error(_mean(one), 0)


def test_end_points_in_several_basins_give_their_laplace_mixture():
    """One noisy sparse track whose posterior has several modes: the answer is the mixture of each basin's Laplace
    Gaussian with weight ∝ exp(-J_b) det(S_b) (S_b the Laplace root), and its weighted mean is sum_b w_b x_b."""
    from lagda.assimilation.methods.observations import arrange
    from lagda.assimilation.methods.search import run_starts
    from lagda.assimilation.methods.variational import cost, laplace_root, observation_problem

    twin, noise = make_twin(n_field=1, n_drifter=1, n_obs=10, stride=100, seed=4), 1e-3
    positions = twin.positions[0] + noise * np.random.default_rng(0).normal(size=twin.positions[0].shape)
    config, starts = VarConfig(noise_std=noise, members=64), prior_starts(twin.model, 8, jax.random.key(1), False)
    est = multistart_map(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0), starts, 10)
    assert est.info["modes"] >= 2 and sum(est.info["mode_weights"]) == pytest.approx(1.0)
    weights = np.array(est.info["mode_weights"])
    assert np.sum(weights > 0.01) >= 2  # not one mode with negligible others: a real mixture
    # the weights again from the modes' end points: exp(-J_b) det(S_b), normalised
    obs = arrange(positions, twin.times, twin.release[0], twin.model.dt)
    ends, _ = run_starts(obs, twin.model, config, starts[est.info["mode_starts"]], 10, noise)
    problem = observation_problem(obs, twin.model, noise)
    log_w = np.array([-cost(x, problem) + np.linalg.slogdet(laplace_root(x, obs, twin.model, noise))[1] for x in ends])
    np.testing.assert_allclose(weights, np.exp(log_w - log_w.max()) / np.exp(log_w - log_w.max()).sum(), atol=1e-9)
    counts = np.floor(64 * weights)  # members by largest remainders: a component given none is left out
    counts[np.argsort(-(64 * weights - counts))[: 64 - int(counts.sum())]] += 1
    kept = counts > 0
    expected = (weights[kept] / weights[kept].sum()) @ ends[kept]
    np.testing.assert_allclose(to_real(_mean(est)), expected, atol=1e-10)
    assert est.weights.sum() == pytest.approx(1.0)
