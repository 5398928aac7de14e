"""sample's parts against their definitions: Pareto k, importance weights and their ESS, the progress bar, R-hat
and the lineage standard error, the config's and the field's refusals, the Gaussian square roots; and the
divergent moves on Neal's funnel. The sampler against closed forms: tests/test_sample_twin.py (linear twin),
tests/test_sample_basis.py (a chosen basis); on a track: tests/test_sample_field.py, tests/test_sample_starts.py
(starts learned and hybrid)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from lagda.assimilation.methods.config import DIVERGENT_WARN, SampleConfig
from lagda.assimilation.methods.sample import (
    Gaussian,
    assimilate_sample,
    gaussian_root,
    importance_weights,
    lineage_standard_error,
    pareto_k,
    progress_bar,
    run_diagnostics,
    smc_sample,
)
from lagda.testing import make_twin


@pytest.mark.parametrize("shape", [0.3, 0.9])
def test_pareto_k_recovers_the_shape_of_a_generalised_pareto_tail(shape):
    """Exceedances of a generalised Pareto over any threshold are generalised Pareto of the same shape, so the
    fit of the top M of n draws estimates it with sd ~ (1 + shape) / sqrt(M)."""
    n = 10_000
    draws = stats.genpareto.rvs(shape, size=n, random_state=np.random.default_rng(4))
    tail = int(min(n / 5, 3 * np.sqrt(n)))
    assert pareto_k(np.log(draws)) == pytest.approx(shape, abs=4 * (1 + shape) / np.sqrt(tail))
    assert pareto_k(np.zeros(n)) == -np.inf  # equal weights: no tail
    assert pareto_k(np.zeros(24)) == np.inf  # too few weights to see a tail: not trusted


def test_importance_weights_and_their_ess():
    """ESS = (sum w)^2 / sum w^2: n equal weights give n, one weight k times the rest of n (n - 1 + k)^2 /
    (n - 1 + k^2); -inf is a weight of 0; a NaN or +inf, or nothing finite, leaves no usable draw."""
    w, ess = importance_weights(np.zeros(8))
    assert np.allclose(w, 1 / 8) and ess == pytest.approx(8.0)
    w, ess = importance_weights(np.log([1.0, 1.0, 1.0, 3.0]) + 700.0)  # far from 0: no overflow
    assert np.allclose(w, np.array([1, 1, 1, 3]) / 6) and ess == pytest.approx(36 / 12)
    w, ess = importance_weights(np.array([0.0, -np.inf, 0.0]))
    assert np.allclose(w, [0.5, 0.0, 0.5]) and ess == pytest.approx(2.0)
    for unusable in ([0.0, np.nan], [0.0, np.inf], [-np.inf, -np.inf]):
        w, ess = importance_weights(np.array(unusable))
        assert ess == 0.0 and not np.any(w)



def test_progress_bar_appears_on_the_first_stage_only(capsys):
    """An error before the first stage (a setting the field's size rules out) prints no empty bar before it."""
    with progress_bar("sample"):
        pass
    assert capsys.readouterr().err == ""
    with progress_bar("sample") as progress:
        progress(1, 0.25)
        progress(2, 1.0)
    err = capsys.readouterr().err
    assert "stage 2, l = 1" in err and "100% of l" in err



def funnel_log_likelihood(x, data):
    """Neal's funnel over the prior N(0, 9 I): x0 ~ N(0, 9), x_i | x0 ~ N(0, exp(x0)), i = 1..d-1 (data unused)."""
    funnel = -x[0] ** 2 / 18.0 - 0.5 * jnp.sum(x[1:] ** 2) * jnp.exp(-x[0]) - 0.5 * (x.shape[0] - 1) * x[0]
    return funnel + 0.5 * jnp.sum(x**2) / 9.0


def test_divergent_moves_flag_a_spread_too_narrow():
    """On Neal's funnel HMC cannot enter the narrow neck: the sample's x0 is far narrower than the exact N(0, 9)
    (std 3), and the diagnostics and the field's decision line say the moves diverged."""
    from lagda.assimilation.posterior import _describe_field

    d = 10
    samples, weights, diagnostics = smc_sample(funnel_log_likelihood, Gaussian(np.zeros(d), np.full(d, 9.0)),
                                               jax.random.key(0), SampleConfig(particles=128, runs=2), ())
    x0_std = np.sqrt(weights @ (samples[:, 0] - weights @ samples[:, 0]) ** 2)
    assert x0_std < 2.0  # measured 1.2
    assert diagnostics["divergent_max"] > DIVERGENT_WARN  # measured 0.53
    line = _describe_field(diagnostics)
    assert f"R-hat max {diagnostics['rhat_max']:.3g}" in line and "spread may be too narrow" in line
    assert "spread may be too narrow" not in _describe_field(diagnostics | {"divergent_max": 0.0})


def test_rhat_of_shifted_runs_is_its_formula():
    """Two runs of n points, identical up to a shift delta of their means: B = delta^2 / 2, so
    R-hat = sqrt((n - 1) / n + delta^2 / (2 W))."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(1000, 3))
    base = (base - base.mean(0)) / base.std(0)  # W = 1 per coordinate
    delta = np.array([0.0, 0.1, 1.0])
    runs = [{"particles": base + s * delta, "weights": np.full(1000, 1e-3), "eves": np.arange(1000)} for s in (0, 1)]
    out = run_diagnostics(runs)
    rhat = np.sqrt(999 / 1000 + delta**2 / 2)
    assert out["rhat_max"] == pytest.approx(rhat.max(), rel=1e-12)
    assert out["rhat_median"] == pytest.approx(np.median(rhat), rel=1e-12)


def test_lineage_standard_error_of_independent_particles_is_std_over_sqrt_n():
    """With every particle its own lineage and equal weights, se^2 = sum_i (x_i - xbar)^2 / n^2 = var / n."""
    x = np.random.default_rng(1).normal(size=(400, 2))
    se = lineage_standard_error(x, np.full(400, 1 / 400), np.arange(400))
    np.testing.assert_allclose(se, x.std(axis=0) / np.sqrt(400), rtol=1e-12)
    # one lineage for all: the centred weighted sum is 0, the estimator collapses (why lineages are reported)
    assert np.allclose(lineage_standard_error(x, np.full(400, 1 / 400), np.zeros(400, int)), 0.0)


@pytest.mark.parametrize("change, message", [
    ({"particles": 1}, "particles must be >= 2"),
    ({"target_ess": 1.0}, "target_ess must be in (0, 1)"),
    ({"particles": 64, "importance_draws": 32}, "importance_draws must be 0 (off) or >= particles (64)"),
    ({"mass_matrix": "full"}, "mass_matrix must be one of"),
    ({"start": "laplace"}, "start must be one of"),
    ({"step_size": 5.0}, "step_size must be in"),
], ids=["particles", "target_ess", "importance_draws", "mass_matrix", "start", "step_size"])
def test_config_errors_are_one_line(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SampleConfig(**change).validate()


def test_too_few_particles_for_the_field_are_refused_before_var_fits(monkeypatch):
    """The dense mass matrix needs particles > 2 d, d = 2K: a field's sampler says so before the noise estimate's
    var fit, which on a large field takes seconds to minutes before the sampler could find out."""
    import lagda.assimilation.methods.sample as sample_module

    def no_fit(*args, **kwargs):
        raise AssertionError("var ran before the particles were checked")

    monkeypatch.setattr(sample_module, "var_laplace", no_fit)
    twin = make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2)  # K = 9: d = 18
    with pytest.raises(ValueError, match=r"mass_matrix 'dense' needs particles > 2 d = 36, got 36"):
        assimilate_sample(twin.positions[0], twin.times, twin.release[0], twin.model, SampleConfig(particles=36),
                          jax.random.key(0))


def test_gaussian_root_of_a_covariance_singular_to_rounding():
    """A rank-deficient PSD covariance factorises with the smallest relative ridge; an indefinite one is refused;
    a given square root S is factorised without forming S S^T (L^-1 S is orthogonal)."""
    a = np.random.default_rng(2).normal(size=(5, 4))
    _, root = gaussian_root(Gaussian(np.zeros(5), a @ a.T))
    np.testing.assert_allclose(root @ root.T, a @ a.T, atol=1e-9 * np.max(np.diag(a @ a.T)))
    with pytest.raises(ValueError, match="positive definite"):
        gaussian_root(Gaussian(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]])))
    # a square root (not triangular) whose covariance spans 1e20, beyond what a float64 covariance holds
    s = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0] @ np.diag([1.0, 1e-5, 1e-10])
    _, root = gaussian_root(Gaussian(np.zeros(3), root=s))
    assert np.allclose(np.tril(root), root) and np.all(np.diag(root) > 0)
    # QR is backward stable: the error is about eps x condition (1e-16 x 1e10), not eps
    np.testing.assert_allclose(np.linalg.solve(root, s) @ np.linalg.solve(root, s).T, np.eye(3), atol=1e-5)



def test_gaussian_of_members_is_their_weighted_mean_and_covariance():
    """Gaussian.of_members keeps the members' deviations as its root: L L^T is their weighted covariance exactly
    (an identity, not a Monte Carlo estimate), also for complex members; fewer members than coordinates is refused."""
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(40, 6)) * np.linspace(1e-6, 2.0, 6), rng.uniform(size=40)
    w /= w.sum()
    mean, lower = gaussian_root(Gaussian.of_members(x, w))
    centred = x - w @ x
    np.testing.assert_allclose(mean, w @ x, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(lower @ lower.T, (centred * w[:, None]).T @ centred, rtol=1e-10, atol=1e-22)
    np.testing.assert_allclose(np.diag(gaussian_root(Gaussian.of_members(x, w), scale=4.0)[1]), 2 * np.diag(lower))
    complex_members = Gaussian.of_members(x[:, :3] + 1j * x[:, 3:], w)
    np.testing.assert_array_equal(complex_members.mean, Gaussian.of_members(x, w).mean)
    with pytest.raises(ValueError, match=r"root must be \(6, n\) with n >= 6"):
        gaussian_root(Gaussian.of_members(x[:5], np.full(5, 0.2)))

