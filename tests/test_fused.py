"""The fused observation operator (lagda.assimilation.methods.fused) against the reference RK4 run: the same
positions and the same derivative of the discrete map on sparse K = 9 twins, and var's MAP the same with and
without it; models it does not serve fall back to the reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.assimilation.methods import fused, variational
from lagda.assimilation.methods.config import VarConfig
from lagda.assimilation.methods.observations import arrange, simulate_observed, simulate_observed_tangent
from lagda.testing import make_twin

jax.config.update("jax_enable_x64", True)


def _case(stride, n_sim_fraction):
    """Returns (x, arguments of the reference, arguments of the fused functions) for a sparse twin."""
    twin = make_twin(n_field=1, n_drifter=3, n_obs=8, stride=stride, seed=3)
    model = twin.model
    obs = arrange(twin.positions[0], twin.times, twin.release[0], model.dt)
    n_sim = max(1, int(round(n_sim_fraction * obs.n_sim)))
    index = np.minimum(obs.index, n_sim - 1)
    x = 1.3 * np.random.default_rng(4).normal(size=2 * model.n_modes) * np.sqrt(model.prior_var)
    op = fused.fused_operator(model.k1, model.k2, model.dt, obs.stride, model.time)
    assert op is not None and obs.stride == stride
    ref = (jnp.asarray(x), obs.z0, obs.t0, index, model.k1, model.k2, model.omega, model.dt, n_sim, obs.stride)
    new = (jnp.asarray(x), jnp.asarray(obs.z0), jnp.asarray(obs.t0), jnp.asarray(index), jnp.asarray(model.omega),
           n_sim, op)
    return ref, new


CASES = [(fused.FUSED_MIN_STRIDE, 1.0), (13, 1.0), (13, 0.4)]  # 0.4: a continuation stage's shorter run


@pytest.mark.parametrize("stride, fraction", CASES)
def test_fused_positions_equal_the_reference_run(stride, fraction):
    ref, new = _case(stride, fraction)
    want = np.asarray(simulate_observed(*ref))
    got = np.asarray(fused.fused_positions(*new))
    assert np.max(np.abs(want)) > 0.1  # the drifters moved: a wrong record would show
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("stride, fraction", CASES)
def test_fused_tangent_equals_the_reference_sensitivity(stride, fraction):
    ref, new = _case(stride, fraction)
    want_z, want_s = (np.asarray(a) for a in simulate_observed_tangent(*ref))
    got_z, got_s = (np.asarray(a) for a in fused.fused_tangent(*new))
    np.testing.assert_allclose(got_z, want_z, rtol=0, atol=1e-12)
    assert np.max(np.abs(got_s - want_s)) <= 1e-10 * np.max(np.abs(want_s))


def test_models_the_fused_path_does_not_serve_fall_back():
    model = make_twin(n_field=1, n_drifter=1, n_obs=2).model
    serve = lambda stride, time=None: fused.fused_operator(model.k1, model.k2, model.dt, stride, time)  # noqa: E731
    assert serve(fused.FUSED_MIN_STRIDE) is not None
    assert serve(fused.FUSED_MIN_STRIDE - 1) is None  # dense tracks: simulate_observed_tangent
    assert serve(fused.FUSED_MIN_STRIDE, time=object()) is None  # a time basis (and its current): the reference


def test_var_finds_the_same_map_with_and_without_the_fused_path(monkeypatch):
    twin = make_twin(n_field=1, n_drifter=4, n_obs=10, stride=50, seed=2)
    positions = twin.positions[0] + 1e-4 * np.random.default_rng(0).normal(size=twin.positions[0].shape)
    config = VarConfig(iterations=8, continuation=(0.5, 1.0))
    calls = []
    real = variational.fused_residuals_jacobian

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(variational, "fused_residuals_jacobian", counting)
    with_fused = variational.map_fit(positions, twin.times, twin.release[0], twin.model, config)
    assert calls  # the Gauss-Newton steps went through the fused sensitivity
    monkeypatch.setattr(variational, "fused_operator", lambda *args: None)
    calls.clear()
    reference = variational.map_fit(positions, twin.times, twin.release[0], twin.model, config)
    assert not calls
    scale = np.max(np.abs(reference.x))
    assert np.max(np.abs(with_fused.x - reference.x)) <= 1e-8 * scale
    assert with_fused.sigma == pytest.approx(reference.sigma, rel=1e-6)
    cov, want = with_fused.root @ with_fused.root.T, reference.root @ reference.root.T  # the root's V is not unique
    np.testing.assert_allclose(cov, want, rtol=0, atol=1e-8 * np.max(np.abs(want)))


def test_sampler_fused_likelihood_has_the_reference_value_and_gradient():
    """sample's log L through the fused operator (gradient -J^T r from the forward sensitivity, a custom VJP) equals
    the reference's (reverse mode through RK4) in value and gradient, vmapped over points and through a linear map,
    as the sampler's HMC moves take it."""
    from lagda.assimilation.methods.sample import fused_log_likelihood, problem_likelihood, track_log_likelihood

    twin = make_twin(n_field=1, n_drifter=3, n_obs=8, stride=13, seed=3)
    model = twin.model
    obs = arrange(twin.positions[0], twin.times, twin.release[0], model.dt)
    problem = variational.observation_problem(obs, model, 1e-3)
    fast, fast_data = problem_likelihood(problem, -2.5)
    assert fast is fused_log_likelihood(problem.operator)
    slow, slow_data = track_log_likelihood(*problem[-2:]), (problem[:-2], -2.5)
    d = 2 * model.n_modes
    rng = np.random.default_rng(5)
    shift = jnp.asarray(rng.normal(size=d) * np.sqrt(model.prior_var))
    factor = jnp.asarray(0.3 * np.diag(np.sqrt(model.prior_var)) + 0.01 * rng.normal(size=(d, d)))
    u = jnp.asarray(rng.normal(size=(5, d)))

    def value_and_grad(log_likelihood, data):
        return jax.jit(jax.vmap(jax.value_and_grad(lambda v: log_likelihood(shift + factor @ v, data))))(u)

    (want, want_grad), (got, got_grad) = value_and_grad(slow, slow_data), value_and_grad(fast, fast_data)
    assert np.all(np.asarray(want) < -10.0)  # away from the truth: a misfit whose gradient matters
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert np.max(np.abs(got_grad - want_grad)) <= 1e-9 * np.max(np.abs(want_grad))
    np.testing.assert_allclose(jax.vmap(lambda v: fast(shift + factor @ v, fast_data))(u), want, rtol=1e-10)
