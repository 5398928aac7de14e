"""var: the 4D-Var gradient against finite differences (DAPPER test_TLMs style), convergence from
a nearby start, monotone optimisers (no accepted step raises the cost), the lbfgs / adam
minimisers against the Gauss-Newton MAP, convergence reports, the noise level of the misfit,
and the Laplace covariance (symmetric positive definite, the inverse Gauss-Newton Hessian)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.assimilation.methods.config import VarConfig
from lagda.assimilation.methods.observations import arrange
from lagda.assimilation.methods.variational import (
    assimilate_var,
    cost,
    first_order,
    gauss_newton,
    jacobian,
    laplace_covariance,
    misfit,
    noise_sigma,
    observation_problem,
    residuals,
)
from lagda.assimilation.model import to_real
from lagda.assimilation.posterior import describe_diagnostics
from lagda.testing import make_twin

NOISE = 1e-3


@pytest.fixture(scope="module")
def twin():
    return make_twin(n_field=1, n_drifter=4, n_obs=150)


@pytest.fixture(scope="module")
def noisy(twin):
    """Returns (positions with N(0, NOISE^2) errors, their Observations, the cost problem at sigma = NOISE, a start)."""
    rng = np.random.default_rng(3)
    positions = twin.positions[0] + NOISE * rng.normal(size=twin.positions[0].shape)
    obs = arrange(positions, twin.times, twin.release[0], twin.model.dt)
    start = to_real(twin.coef[0]) + 0.3 * rng.normal(size=18) * np.sqrt(twin.model.prior_var)
    return positions, obs, observation_problem(obs, twin.model, NOISE), start


@pytest.fixture(scope="module")
def runs(noisy):
    """Returns {optimizer: (x, StageReport)} from the noisy start; Gauss-Newton run to convergence."""
    _, _, problem, start = noisy
    return {"gauss_newton": gauss_newton(start, problem, 20),
            "lbfgs": first_order(start, problem, 30, "lbfgs", 0.05),
            "adam": first_order(start, problem, 40, "adam", 0.1)}


def test_misfit_gradient_matches_finite_differences(twin):
    obs = arrange(twin.positions[0], twin.times, twin.release[0], twin.model.dt)
    rng = np.random.default_rng(0)
    x = to_real(twin.coef[0]) + 0.1 * rng.normal(size=18) * np.sqrt(twin.model.prior_var)
    direction = rng.normal(size=18)
    cost = lambda x: misfit(x, obs, twin.model, 1e-3)  # noqa: E731
    grad = np.asarray(jax.grad(cost)(jnp.asarray(x)))
    errors = []
    for h in (1e-3, 1e-4):
        fd = (float(cost(jnp.asarray(x + h * direction))) - float(cost(jnp.asarray(x - h * direction)))) / (2 * h)
        errors.append(abs(fd - grad @ direction) / abs(grad @ direction))
    assert errors[1] < 1e-6 and errors[1] < errors[0]  # central differences: error O(h^2)


def test_var_from_a_nearby_start_converges_to_the_truth(twin):
    rng = np.random.default_rng(1)
    truth = to_real(twin.coef[0])
    start = truth + 0.1 * rng.normal(size=18) * np.sqrt(twin.model.prior_var)
    config = VarConfig(members=16, iterations=15)
    est = assimilate_var(twin.positions[0], twin.times, twin.release[0], twin.model, config, jax.random.key(0),
                         x_init=start, stages=(1.0,))
    mean = est.samples.T @ est.weights
    assert twin.field_error(mean, 0) < 1e-3 < twin.field_error(start[:9] + 1j * start[9:], 0)
    assert est.samples.shape == (16, 9)
    assert est.info["converged"] and est.info["stop"] == "converged" and est.info["noise_source"] == "floored"


def test_sensitivity_jacobian_equals_forward_mode_autodiff(twin):
    """The one-run sensitivity Jacobian (RK4 on z and dz/dx) is the derivative of the RK4 map itself."""
    positions = twin.positions[0][:, 2::3].copy()  # every 3rd step: stride 3, with a gap
    positions[1, 5:9] = np.nan
    obs = arrange(positions, twin.times[:, 2::3], twin.release[0], twin.model.dt)
    problem = observation_problem(obs, twin.model, 1e-3)
    x = to_real(twin.coef[0]) + 0.2 * np.random.default_rng(2).normal(size=18) * np.sqrt(twin.model.prior_var)
    ours = np.asarray(jacobian(jnp.asarray(x), *problem))
    reference = np.asarray(jax.jacfwd(residuals)(jnp.asarray(x), *problem))
    assert obs.stride == 3 and ours.shape == reference.shape == (4 * obs.index.shape[1] * 2 + 18, 18)
    assert np.max(np.abs(ours - reference)) < 1e-10 * np.max(np.abs(reference))


@pytest.mark.parametrize("optimizer", ["gauss_newton", "lbfgs", "adam"])
def test_no_accepted_iteration_raises_the_cost(noisy, runs, optimizer):
    _, _, problem, start = noisy
    x, report = runs[optimizer]
    assert report.costs[0] == cost(start, problem) and report.costs[-1] == pytest.approx(cost(x, problem), rel=1e-12)
    assert np.all(np.diff(report.costs) <= 0) and len(report.costs) > 5
    assert report.costs[-1] < 0.02 * report.costs[0]


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_first_order_optimisers_approach_the_gauss_newton_map(noisy, runs, optimizer):
    """Gauss-Newton converges here; lbfgs and adam close most of the cost gap to its minimum, never undercut it."""
    _, _, problem, start = noisy
    x_map, gn = runs["gauss_newton"]
    x, report = runs[optimizer]
    gap_start, gap = cost(start, problem) - gn.costs[-1], report.costs[-1] - gn.costs[-1]
    assert gn.converged and gn.decrement < 1e-6
    assert -1e-9 * gn.costs[-1] <= gap < 0.02 * gap_start
    whitened = lambda y: np.linalg.norm((y - x_map) / np.asarray(problem[-4]))  # prior-whitened  # noqa: E731
    assert whitened(x) < whitened(start)


def test_adam_steps_that_raise_the_cost_are_rejected(twin, noisy):
    """A learning rate far above the prior std makes every adam step overshoot: none may be accepted."""
    positions, obs, problem, start = noisy
    config = VarConfig(members=16, noise_std=NOISE, optimizer="adam", lr=2.0)
    est = assimilate_var(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0),
                         x_init=start, stages=(1.0,), iterations=3)
    x = to_real(est.samples.T @ est.weights)
    assert float(misfit(x, obs, twin.model, NOISE)) <= float(misfit(start, obs, twin.model, NOISE)) * (1 + 1e-12)
    assert est.info["cost"] <= est.info["cost_start"] and not est.info["converged"]


def test_levenberg_marquardt_at_the_minimum_reports_max_damping(noisy, runs):
    """With no convergence test (tol 0) at the MAP no step can lower the cost: the damping runs out."""
    _, _, problem, _ = noisy
    x_map, gn = runs["gauss_newton"]
    x, report = gauss_newton(x_map, problem, 50, tol=0.0)
    assert report.stop == "max_damping" and not report.converged
    assert report.costs[-1] <= gn.costs[-1] and np.all(np.diff(report.costs) <= 0)


def test_one_iteration_from_the_prior_mean_is_not_converged_and_noise_is_estimated(twin, noisy):
    positions, _, _, _ = noisy
    config = VarConfig(members=4, iterations=1)
    est = assimilate_var(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0), stages=(1.0,))
    info = est.info
    assert not info["converged"] and info["stop"] == "max_iterations" and info["iterations"] == 1
    assert info["noise_source"] == "evidence" and 0.8 * NOISE < info["sigmas_tried"][0] < 1.25 * NOISE
    assert 0.8 * NOISE < info["sigma"] < 1.25 * NOISE
    assert info["cost"] < info["cost_start"]


@pytest.mark.parametrize("noise", [1e-4, 1e-3])
def test_noise_of_sparse_tracks_is_estimated_from_the_evidence(noise):
    """4 drifters, 10 positions 100 RK4 steps apart: third differences see the track's curvature, not the
    noise (the fit starts at the floor); the evidence of the fit finds the noise. With 80 positions the
    estimate's sampling error is about 1 / sqrt(2 (80 - 18)) = 9%; the band is four of those, and the
    recorded 90% interval brackets the estimate."""
    sparse = make_twin(n_field=2, n_drifter=4, n_obs=10, stride=100, seed=2)
    rng = np.random.default_rng(5)
    for f in range(2):
        positions = sparse.positions[f] + noise * rng.normal(size=sparse.positions[f].shape)
        est = assimilate_var(positions, sparse.times, sparse.release[f], sparse.model,
                             VarConfig(members=4, iterations=10), jax.random.key(0))
        assert est.info["sigmas_tried"][0] == VarConfig().sigma_floor and est.info["noise_source"] == "evidence"
        assert 0.65 * noise < est.info["sigma"] < 1.35 * noise, est.info["sigmas_tried"]
        low, high = est.info["sigma_90"]  # the evidence's 90% interval: around the estimate, on the noise's scale
        assert low < est.info["sigma"] < high and 0.5 * noise < low and high < 2.0 * noise
        assert est.info["noise_determined"]  # 80 positions for 18 coefficients: the evidence has a peak
        line = describe_diagnostics("var", [est.info])  # the line users read
        assert f"(90% {low:.2g} to {high:.2g})" in line and "undetermined" not in line


def test_noise_the_tracks_cannot_determine_is_said_with_the_way_out():
    """One exact drifter, 4 fixes (8 data for 18 coefficients): any noise std below the weakest signal
    direction fits as well, so the evidence is flat from 0 up to there (its 5% quantile about 0.1 of its
    median, as a uniform's) and the estimate is only the middle of that range: the user is told, with
    the setting that decides it."""
    sparse = make_twin(n_field=1, n_drifter=1, n_obs=4, stride=50, seed=3)
    est = assimilate_var(sparse.positions[0], sparse.times, sparse.release[0], sparse.model,
                         VarConfig(members=4, iterations=10), jax.random.key(0))
    low, high = est.info["sigma_90"]
    assert est.info["noise_source"] == "evidence" and low < 0.2 * est.info["sigma"] < high
    assert est.info["noise_determined"] is False
    line = describe_diagnostics("var", [est.info, est.info])
    assert line.count(f"undetermined: any std below about {high:.2g} fits as well") == 1  # fields 0-1 alike
    assert line.endswith(". The tracks of fields 0-1 do not determine the noise (the middle of the range they "
                         "allow is used): give --noise-std if it is known (0 for exact tracks)")


def test_a_given_zero_noise_means_exact_tracks_and_the_evidence_is_not_asked():
    sparse = make_twin(n_field=1, n_drifter=4, n_obs=10, stride=100, seed=2)
    config = VarConfig(members=4, iterations=10, noise_std=0.0)
    est = assimilate_var(sparse.positions[0], sparse.times, sparse.release[0], sparse.model, config, jax.random.key(0))
    assert est.info["noise_source"] == "given" and est.info["sigma"] == config.sigma_floor
    assert "sigma_90" not in est.info and est.info["sigmas_tried"] == [config.sigma_floor]


def test_noise_sigma_sources(twin, noisy):
    positions = noisy[0]
    exact = VarConfig()
    assert noise_sigma(twin.positions[0], twin.times, exact) == (exact.sigma_floor, "floored")
    assert noise_sigma(positions, twin.times, VarConfig(noise_std=2e-3)) == (2e-3, "given")
    assert noise_sigma(positions, twin.times, VarConfig(noise_std=0.0)) == (exact.sigma_floor, "given")  # exact


@pytest.mark.parametrize("sigma", [1e-3, 1e-8])
def test_laplace_covariance_is_the_symmetric_positive_definite_inverse_hessian(twin, sigma):
    """cov = (J_r^T J_r)^-1: exactly symmetric, Cholesky-factorable, never wider than the prior."""
    obs = arrange(twin.positions[0], twin.times, twin.release[0], twin.model.dt)
    x = to_real(twin.coef[0])
    cov = laplace_covariance(x, obs, twin.model, sigma)
    assert np.all(np.isfinite(cov)) and np.array_equal(cov, cov.T)
    np.linalg.cholesky(cov)
    prior_std = np.sqrt(twin.model.prior_var)
    whitened = np.linalg.eigvalsh(cov / prior_std[:, None] / prior_std[None, :])
    assert whitened.max() <= 1.0 + 1e-12
    if sigma == 1e-3:  # well conditioned: the inverse of the Gauss-Newton Hessian
        jac = np.asarray(jacobian(jnp.asarray(x), *observation_problem(obs, twin.model, sigma)))
        assert np.max(np.abs(cov @ (jac.T @ jac) - np.eye(18))) < 1e-8
