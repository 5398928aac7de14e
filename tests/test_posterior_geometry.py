"""experiments/assimilation/posterior_geometry.py: its probes on Gaussian targets, where their answers are known in
closed form, and one probe of a benchmark flow (--quick)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest


@pytest.fixture(scope="module")
def geometry():
    from experiments.assimilation import posterior_geometry

    return posterior_geometry


@pytest.fixture(scope="module")
def gaussian():
    """log N(x; mean, root root^T) up to a constant, d = 5, and its (mean, root)."""
    rng = np.random.default_rng(0)
    mean = rng.normal(size=5)
    root = np.linalg.cholesky(np.cov(rng.normal(size=(5, 20))) + 0.1 * np.eye(5))
    inverse = jnp.asarray(np.linalg.inv(root))

    def log_density(x):
        return -0.5 * jnp.sum((inverse @ (x - mean)) ** 2)

    return log_density, mean, root


def test_whitened_hessian_is_the_identity_for_the_gaussian_s_own_root(geometry, gaussian):
    log_density, mean, root = gaussian
    np.testing.assert_allclose(geometry.whitened_hessian(log_density, mean, root), 1.0, atol=1e-10)
    np.testing.assert_allclose(geometry.whitened_hessian(log_density, mean, 2.0 * root), 4.0, atol=1e-9)


def test_ray_energies_rise_as_r_squared_over_two_for_a_gaussian_and_faster_with_a_quartic_wall(geometry, gaussian):
    log_density, mean, root = gaussian
    directions = np.eye(5)[:3]
    radii = np.array([0.5, 1.0, 3.0])
    np.testing.assert_allclose(geometry.ray_energies(log_density, mean, root, directions, radii),
                               np.tile(radii**2 / 2, (3, 1)), rtol=1e-10)
    inverse = jnp.asarray(np.linalg.inv(root))
    walled = geometry.ray_energies(lambda x: log_density(x) - jnp.sum((inverse @ (x - mean)) ** 4), mean, root,
                                   directions, radii)
    np.testing.assert_allclose(walled, np.tile(radii**2 / 2 + radii**4, (3, 1)), rtol=1e-10)


def test_hmc_chains_draw_the_gaussian_and_agree(geometry, gaussian):
    log_density, mean, root = gaussian
    start = jax.random.normal(jax.random.key(1), (4, 5))
    u, acceptance = geometry.hmc_chains(log_density, mean, root, start, 400, 0.3, 5, jax.random.key(0))
    assert u.shape == (400, 4, 5) and acceptance > 0.8
    kept = u[100:].reshape(-1, 5)  # 1200 draws, correlated: the std's error is a few percent
    np.testing.assert_allclose(kept.std(0), 1.0, atol=0.12)
    np.testing.assert_allclose(kept.mean(0), 0.0, atol=0.15)
    assert geometry.chain_rhat(u[100:]).max() < 1.05


def test_chain_rhat_is_gelman_rubin(geometry):
    """Two chains of unit within-chain variance whose means are +-1: B = 2, so R-hat = sqrt((n - 1) / n + 2)."""
    n = 1000
    wiggle = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)[:, None]  # mean 0, variance 1
    draws = np.stack([wiggle + 1.0, wiggle - 1.0], axis=1)  # (n, 2, 1)
    np.testing.assert_allclose(geometry.chain_rhat(draws), np.sqrt((n - 1) / n + 2.0))


def test_unknown_settings_are_refused_in_one_line(geometry, capsys):
    """--set reads NAME=VALUE as the benchmark's --sample-set does (tested there); an unknown name is a usage error."""
    with pytest.raises(SystemExit) as error:
        geometry.parse_args(["sampler", "--set", "leapfrogs=3"])
    assert error.value.code == 2 and "--set: sample has no setting leapfrogs" in capsys.readouterr().err


def test_rays_of_a_benchmark_flow_start_quadratic_at_var_s_mode(geometry, capsys):
    """At the mode var's Laplace Gaussian is the local posterior: the rise at r = 0.25 is r^2 / 2 to within a few %."""
    assert geometry.main(["rays", "--quick", "--flow", "0"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["d"] == 18 and out["radii"][0] == 0.25
    assert 0.95 * 0.25**2 / 2 < out["rise_min"][0] <= out["rise_max"][0] < 1.05 * 0.25**2 / 2


def test_final_stage_particles_records_every_stage_at_l_1_and_the_last_is_the_sample(geometry):
    """final_moves 3 from the prior of a 2-d Gaussian twin: three stages at l = 1 recorded, the last one's particles
    the returned sample (one run), and the stage function restored afterwards."""
    sm = geometry.sm
    original = sm.stage_function

    def log_likelihood(x, data):
        return -2.0 * jnp.sum((x - 1.0) ** 2)

    config = geometry.SampleConfig(particles=16, runs=1, members=16, mcmc_steps=1, final_moves=3)
    with geometry.final_stage_particles() as finals:
        samples, weights, diagnostics = sm.smc_sample(log_likelihood, sm.Gaussian(np.zeros(2), np.ones(2)),
                                                      jax.random.key(0), config)
    assert sm.stage_function is original
    entered_at_1 = sum(level >= 1.0 for level in diagnostics["runs"][0]["tempering"][:-1])  # stage input: previous l
    assert len(finals) == 3 == entered_at_1
    assert all(f.shape == (16, 2) for f in finals)
    np.testing.assert_allclose(finals[-1], samples, rtol=1e-12)
