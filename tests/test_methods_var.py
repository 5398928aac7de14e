"""var: the 4D-Var gradient against finite differences (DAPPER test_TLMs style), convergence from
a nearby start, Laplace covariance shape."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.assimilation.methods import AssimConfig, assimilate_var
from lagda.assimilation.methods._common import arrange, to_real
from lagda.assimilation.methods.variational import _problem, jacobian, misfit, residuals
from tests.assim_twin import make_twin


@pytest.fixture(scope="module")
def twin():
    return make_twin(n_field=1, n_drifter=4, n_obs=150)


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
    config = AssimConfig(members=16, var_iterations=15)
    est = assimilate_var(twin.positions[0], twin.times, twin.release[0], twin.model, config, jax.random.key(0),
                         x_init=start, stages=(1.0,))
    mean = est.samples.T @ est.weights
    assert twin.field_error(mean, 0) < 1e-3 < twin.field_error(start[:9] + 1j * start[9:], 0)
    assert est.samples.shape == (16, 9)


def test_sensitivity_jacobian_equals_forward_mode_autodiff(twin):
    """The one-run sensitivity Jacobian (RK4 on z and dz/dx) is the derivative of the RK4 map itself."""
    positions = twin.positions[0][:, 2::3].copy()  # every 3rd step: stride 3, with a gap
    positions[1, 5:9] = np.nan
    obs = arrange(positions, twin.times[:, 2::3], twin.release[0], twin.model.dt)
    problem = _problem(obs, twin.model, 1e-3)
    x = to_real(twin.coef[0]) + 0.2 * np.random.default_rng(2).normal(size=18) * np.sqrt(twin.model.prior_var)
    ours = np.asarray(jacobian(jnp.asarray(x), *problem))
    reference = np.asarray(jax.jacfwd(residuals)(jnp.asarray(x), *problem))
    assert obs.stride == 3 and ours.shape == reference.shape == (4 * obs.index.shape[1] * 2 + 18, 18)
    assert np.max(np.abs(ours - reference)) < 1e-10 * np.max(np.abs(reference))
