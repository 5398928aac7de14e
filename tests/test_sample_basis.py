"""sample in a chosen basis (--basis with a time basis): the posterior of a uniform current, linear in its
coefficients, against the closed form within the runs' Monte Carlo error (tests/sample_problems.py)."""

import jax
import numpy as np

from lagda.assimilation.methods.config import SampleConfig
from lagda.assimilation.methods.sample import assimilate_sample
from lagda.assimilation.model import to_real
from tests.sample_problems import PARTICLES, RUNS, assert_within_mc_error, per_run


def test_in_a_chosen_basis_the_posterior_of_a_uniform_current_is_the_closed_form():
    """A chosen basis (--basis) with a time basis: its uniform current of Legendre degrees 0-2 moves every point
    alike, so a drifter's positions are linear in x, y = z0 + A x + noise, with A the integrals of the Legendre
    factors (RK4 is Simpson's rule for a velocity that does not depend on the position: exact for these
    quadratics at any step, so one step per observation serves). assimilate_sample's mean and covariance from the
    prior, through the time basis's RK4 misfit, match that closed-form posterior within their Monte Carlo error.
    Two HMC transitions per stage, as the field's tests: the runs' spread (the standard error the bound is made of)
    measured the same as with the default five, about 0.02 posterior std in the mean and 0.03 in the variances."""
    from numpy.polynomial import legendre

    from lagda.assimilation.model import FlowModel
    from simulate.flow import in_time

    length, dt, stride, n_obs, s, degree = 0.1, 1e-2, 1, 10, 0.02, 2
    k1, k2, omega, time_basis = in_time([0], [0], [0.0], degree, 0.0, length, np.array([True]))
    model = FlowModel(k1, k2, omega, np.full(degree + 1, 3.0), dt, time_basis)
    times = dt * stride * np.arange(1, n_obs + 1)
    # F_p(t) = int_0^t L_p(2 t' / length - 1) dt' = length / 2 int_-1^s L_p(u) du
    f = np.stack([length / 2 * legendre.legval(2 * times / length - 1, legendre.legint(np.eye(degree + 1)[p], lbnd=-1))
                  for p in range(degree + 1)], axis=-1)
    a = np.kron(np.eye(2), f)  # x = (Re c, Im c): the x-positions from Re c, the y-positions from Im c
    rng = np.random.default_rng(4)
    truth = rng.normal(size=2 * (degree + 1)) * np.sqrt(model.prior_var)
    release = np.array([[0.3, 0.6]])
    y = np.repeat(release[0], n_obs) + a @ truth + s * rng.normal(size=2 * n_obs)
    positions = y.reshape(2, n_obs).T[None]  # (drifter, obs, 2)
    cov = np.linalg.inv(a.T @ a / s**2 + np.diag(1.0 / model.prior_var))
    mean = cov @ a.T @ (y - np.repeat(release[0], n_obs)) / s**2
    config = SampleConfig(particles=PARTICLES, runs=RUNS, mcmc_steps=2, noise_std=s, members=RUNS * PARTICLES)
    estimate = assimilate_sample(positions, times[None], release, model, config, jax.random.key(3))
    assert estimate.info["tempering_complete"] and estimate.info["noise_source"] == "given"
    per_run_mean, per_run_cov = per_run(to_real(estimate.samples), estimate.weights, RUNS)
    assert_within_mc_error(per_run_mean, mean)
    assert_within_mc_error(per_run_cov, cov)

