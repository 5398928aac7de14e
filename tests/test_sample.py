"""sample: tempered SMC against the linear-Gaussian twin's closed-form posterior and evidence, from the prior and
from an offset proposal, one compilation for every stage and call, R-hat and the lineage standard error
against their definitions; the field-level method in a chosen basis against the closed-form posterior of a
uniform current (linear in the coefficients), and on a tiny noisy track, started from the prior, from var's
Laplace Gaussian, from the learned conditional of an encoder (start "learned") and from hybrid's posterior
(start "hybrid").

Tolerances come from the sampler's own Monte Carlo error: each of RUNS independent runs (own key) gives an
estimate; their spread gives the standard error of the pooled one, so (pooled - exact) / se follows Student's
t with RUNS - 1 degrees of freedom, and the bound is its 1 - ALPHA / (2 n_tests) quantile (Bonferroni).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from lagda.assimilation.methods.config import DIVERGENT_WARN, SampleConfig, VarConfig
from lagda.assimilation.methods.learned import Scorer
from lagda.assimilation.methods.registry import Sample, make_method
from lagda.assimilation.methods.sample import (
    Gaussian,
    assimilate_sample,
    gaussian_root,
    importance_weights,
    learned_proposal,
    lineage_standard_error,
    pareto_k,
    progress_bar,
    run_diagnostics,
    smc_sample,
)
from lagda.assimilation.methods.search import posterior_cost
from lagda.assimilation.model import to_real
from lagda.io.tracks import Tracks
from lagda.testing import make_pairs, make_twin

RUNS, PARTICLES, ALPHA = 8, 256, 1e-3
TRACES = [0]  # incremented only while JAX traces the log likelihood


def linear_log_likelihood(x, data):
    """log N(y; A x, s^2 I) up to a constant, for data (A `(n, d)`, y `(n,)`, s)."""
    TRACES[0] += 1
    g, y, s = data
    return -0.5 * jnp.sum((g @ x - y) ** 2) / s**2 - y.shape[0] * jnp.log(jnp.sqrt(2.0 * jnp.pi) * s)


@pytest.fixture(scope="module")
def twin():
    """Returns (data, prior, exact mean, exact cov, exact log evidence) of y = A x + e, x ~ N(0, D)."""
    rng = np.random.default_rng(0)
    d, n, s = 6, 10, 0.3
    g, prior_var = rng.normal(size=(n, d)), np.linspace(0.5, 2.0, d)
    y = g @ (rng.normal(size=d) * np.sqrt(prior_var)) + s * rng.normal(size=n)
    cov = np.linalg.inv(g.T @ g / s**2 + np.diag(1.0 / prior_var))
    marginal = g @ np.diag(prior_var) @ g.T + s**2 * np.eye(n)
    log_evidence = stats.multivariate_normal(np.zeros(n), marginal).logpdf(y)
    mean = cov @ g.T @ y / s**2
    return (jnp.asarray(g), jnp.asarray(y), s), Gaussian(np.zeros(d), prior_var), mean, cov, log_evidence


def _per_run(samples, weights, runs):
    """Returns each run's weighted mean `(run, d)` and covariance `(run, d, d)` (runs are row blocks)."""
    x, w = samples.reshape(runs, -1, samples.shape[1]), weights.reshape(runs, -1) * runs
    mean = np.einsum("rn,rnd->rd", w, x)
    centred = x - mean[:, None, :]
    return mean, np.einsum("rn,rnd,rne->rde", w, centred, centred)


def _assert_within_mc_error(per_run, exact, alpha=ALPHA):
    """Asserts |mean over runs - exact| < t quantile x se for every entry (se from the runs' spread)."""
    per_run, exact = np.asarray(per_run), np.asarray(exact)
    se = per_run.std(axis=0, ddof=1) / np.sqrt(per_run.shape[0])
    bound = stats.t.ppf(1.0 - alpha / (2 * exact.size), per_run.shape[0] - 1)
    t = np.abs(per_run.mean(axis=0) - exact) / se
    assert np.all(t < bound), f"max |t| {t.max():.2f} >= {bound:.2f}"


@pytest.fixture(scope="module")
def from_prior(twin):
    """Returns smc_sample's output from the prior, and the progress calls (stage, l) it made."""
    data, prior = twin[:2]
    config, calls = SampleConfig(particles=PARTICLES, runs=RUNS), []
    out = smc_sample(linear_log_likelihood, prior, jax.random.key(1), config, data,
                     progress=lambda stage, tempering: calls.append((stage, tempering)))
    return out, calls


@pytest.fixture(scope="module")
def from_proposal(twin, from_prior):  # after from_prior: its compiled stage is reused
    """The same posterior from N(mean + 1 posterior std, 2 cov): a proposal off the posterior."""
    data, prior, mean, cov = twin[:4]
    traces = TRACES[0]
    proposal = Gaussian(mean + np.sqrt(np.diag(cov)), 2.0 * cov)
    config = SampleConfig(particles=PARTICLES, runs=RUNS, start="proposal")
    return smc_sample(linear_log_likelihood, prior, jax.random.key(2), config, data, proposal), TRACES[0] - traces


@pytest.mark.parametrize("start", ["prior", "proposal"])
def test_mean_and_covariance_match_the_closed_form(twin, from_prior, from_proposal, start):
    samples, weights, diagnostics = from_prior[0] if start == "prior" else from_proposal[0]
    mean, cov = _per_run(samples, weights, RUNS)
    _assert_within_mc_error(mean, twin[2])
    upper = np.triu_indices(cov.shape[1])
    _assert_within_mc_error(cov[:, upper[0], upper[1]], twin[3][upper])
    assert diagnostics["tempering_complete"]


@pytest.mark.parametrize("start", ["prior", "proposal"])
def test_log_evidence_matches_the_closed_form(twin, from_prior, from_proposal, start):
    diagnostics = (from_prior[0] if start == "prior" else from_proposal[0])[2]
    _assert_within_mc_error([r["log_evidence"] for r in diagnostics["runs"]], twin[4])


def test_proposal_start_agrees_with_prior_start_in_fewer_stages(from_prior, from_proposal):
    (samples, weights, diagnostics), retraces = from_proposal
    a, b = _per_run(*from_prior[0][:2], RUNS)[0], _per_run(samples, weights, RUNS)[0]
    # two-sample t (Welch): the runs of each start are independent estimates of the same mean
    se = np.sqrt(a.var(axis=0, ddof=1) / RUNS + b.var(axis=0, ddof=1) / RUNS)
    t = np.abs(a.mean(axis=0) - b.mean(axis=0)) / se
    assert np.all(t < stats.t.ppf(1.0 - ALPHA / (2 * a.shape[1]), RUNS - 1))
    assert diagnostics["stages_max"] < from_prior[0][2]["stages_max"]
    assert retraces == 0  # the proposal run reused the prior run's compiled stage


def test_the_exact_posterior_as_proposal_is_one_importance_step(twin):
    """With q the posterior, p0 L / q is constant: the first stage reaches l = 1 with every weight equal."""
    data, prior, mean, cov = twin[:4]
    config = SampleConfig(particles=PARTICLES, runs=2, start="proposal")
    _, weights, diagnostics = smc_sample(linear_log_likelihood, prior, jax.random.key(3), config, data,
                                         Gaussian(mean, cov))
    # one step, then the stages of moves at l = 1
    assert [r["tempering"] for r in diagnostics["runs"]] == [[1.0] * (1 + config.final_moves)] * 2
    assert diagnostics["runs"][0]["ess"][0] == pytest.approx(1.0, rel=1e-9)
    assert diagnostics["log_evidence"] == pytest.approx(twin[4], rel=1e-9)


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


@pytest.fixture(scope="module")
def by_importance(twin, from_prior):  # after from_prior: the linear twin's functions are compiled
    """Importance sampling from q = N(mean, 1.5 cov), wider than the posterior (bounded weights), and from
    N(mean, 0.04 cov), narrower (weights with a heavy tail: refused, so the runs temper from q)."""
    data, prior, mean, cov = twin[:4]
    config = SampleConfig(particles=PARTICLES, runs=RUNS, start="proposal", importance_draws=16 * PARTICLES)
    return [smc_sample(linear_log_likelihood, prior, jax.random.key(5), config, data, Gaussian(mean, scale * cov))
            for scale in (1.5, 0.04)]


def test_importance_sampling_from_a_wider_proposal_is_the_exact_posterior(twin, by_importance):
    samples, weights, diagnostics = by_importance[0]
    assert diagnostics["importance_runs"] == RUNS and diagnostics["stages_max"] == 0  # no tempering, no moves
    assert diagnostics["importance_ess_min"] >= 0.5 * PARTICLES and diagnostics["importance_pareto_k_max"] < 0.7
    mean, cov = _per_run(samples, weights, RUNS)
    _assert_within_mc_error(mean, twin[2])
    _assert_within_mc_error(np.diagonal(cov, axis1=1, axis2=2), np.diag(twin[3]))
    _assert_within_mc_error([r["log_evidence"] for r in diagnostics["runs"]], twin[4])


def test_importance_sampling_from_a_narrow_proposal_is_refused_and_tempers(twin, by_importance):
    samples, weights, diagnostics = by_importance[1]
    refused = [r["importance"] for r in diagnostics["runs"]]
    assert not any(i["accepted"] for i in refused) and min(i["pareto_k"] for i in refused) > 0.7
    assert all(i["draws"] == 16 * PARTICLES for i in refused)  # it drew all it could before refusing
    assert diagnostics["tempering_complete"] and min(r["stages"] for r in diagnostics["runs"]) > 1
    _assert_within_mc_error(_per_run(samples, weights, RUNS)[0], twin[2])


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
    per_run_mean, per_run_cov = _per_run(to_real(estimate.samples), estimate.weights, RUNS)
    _assert_within_mc_error(per_run_mean, mean)
    _assert_within_mc_error(per_run_cov, cov)


def test_progress_reports_every_stage(from_prior):
    (_, _, diagnostics), calls = from_prior
    stages = [r["stages"] for r in diagnostics["runs"]]
    assert [c[0] for c in calls] == list(range(1, sum(stages) + 1))  # counted on across the runs
    assert [c[1] for c in calls] == [t for r in diagnostics["runs"] for t in r["tempering"]]


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


def test_rhat_is_near_one_and_runs_agree(from_prior):
    diagnostics = from_prior[0][2]
    assert diagnostics["rhat_max"] < 1.01  # the conventional threshold (Vehtari et al. 2021)
    assert diagnostics["agreement_fraction_beyond_p99"] < 0.5
    run = diagnostics["runs"][0]
    assert np.all(np.diff(run["tempering"]) >= 0) and run["tempering"][-1] == 1.0
    assert 0.3 < np.mean(run["acceptance"]) < 0.95  # the step size adapts towards target_acceptance
    assert diagnostics["divergent_max"] == max(max(r["divergent"]) for r in diagnostics["runs"])
    assert diagnostics["divergent_max"] < DIVERGENT_WARN  # a Gaussian posterior: the moves follow it everywhere


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


def test_proposal_must_match_start(twin):
    data, prior = twin[:2]
    with pytest.raises(ValueError, match="needs proposal"):
        smc_sample(linear_log_likelihood, prior, jax.random.key(0), SampleConfig(start="proposal"), data)


NOISE = 1e-2


@pytest.fixture(scope="module")
def field():
    """Returns (twin, noisy positions, estimate) for one drifter over 60 RK4 steps, K = 9, noise NOISE."""
    twin = make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2)
    positions = twin.positions[0] + NOISE * np.random.default_rng(0).normal(size=twin.positions[0].shape)
    config = SampleConfig(particles=48, runs=2, mcmc_steps=2, noise_std=NOISE)
    estimate = assimilate_sample(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    return twin, positions, estimate


def test_field_posterior_mean_fits_better_than_the_prior_mean(field):
    twin, positions, estimate = field
    assert estimate.samples.shape == (96, 9) and np.all(np.isfinite(estimate.samples))
    assert estimate.weights.sum() == pytest.approx(1.0) and estimate.info["tempering_complete"]
    cost = lambda x: posterior_cost(x, positions, twin.times, twin.release[0], twin.model,  # noqa: E731
                                    VarConfig(noise_std=NOISE))
    mean = to_real(estimate.weights @ estimate.samples)
    assert estimate.info["cost_mean"] == pytest.approx(cost(mean), rel=1e-9)
    json.dumps(estimate.info)  # the diagnostics are plain JSON types
    assert cost(mean) < cost(np.zeros(18))
    # the posterior mean is a better field than the prior mean (relative error exactly 1)
    assert twin.field_error(estimate.weights @ estimate.samples, 0) < 1.0


def test_var_start_at_a_given_noise_continues_from_the_estimated_noise_fit(field):
    """With the noise given, start "var" fits var with the noise estimated, then refits at the given noise from
    there: its recorded cost is at the given sigma, and no worse than var's own fit at it from the prior mean."""
    from lagda.assimilation.methods.variational import map_fit

    twin, positions, _ = field
    config = SampleConfig(particles=48, runs=2, mcmc_steps=2, start="var", members=64, noise_std=2 * NOISE)
    estimate = assimilate_sample(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    direct = map_fit(positions, twin.times, twin.release[0], twin.model, VarConfig(noise_std=2 * NOISE))
    assert estimate.info["sigma"] == 2 * NOISE and estimate.info["noise_source"] == "given"
    assert estimate.info["var_cost"] <= direct.info["cost"] * (1 + 1e-6)  # the same MAP here, to its convergence


def test_noise_from_var_and_its_laplace_start(field):
    """Without a noise level the misfit's sigma is var's evidence estimate (recorded); start "var" begins at
    var's Laplace Gaussian, which on this nearly Gaussian posterior needs no more stages than the prior start;
    members thins the pooled particles to equal weights."""
    twin, positions, from_prior = field
    config = SampleConfig(particles=48, runs=2, mcmc_steps=2, start="var", members=64)
    estimate = assimilate_sample(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    assert estimate.info["noise_source"] == "var evidence" and estimate.info["start"] == "var"
    assert NOISE / 2 < estimate.info["sigma"] < 2 * NOISE
    assert estimate.info["sigma_90"][0] < estimate.info["sigma"] < estimate.info["sigma_90"][1]
    assert estimate.info["noise_determined"]  # var's verdict on the noise travels with its sigma
    assert estimate.samples.shape == (64, 9) and np.allclose(estimate.weights, 1 / 64)
    assert estimate.info["stages_max"] <= from_prior.info["stages_max"]
    assert twin.field_error(estimate.weights @ estimate.samples, 0) < 1.0


def test_importance_first_on_a_track_is_recorded_and_shown(field):
    """importance_draws on a real track: each run says whether the start's weights served it, the result's
    summary and the field's decision line say so, and the estimate beats the prior mean."""
    from lagda.assimilation.posterior import _describe_field

    twin, positions, _ = field
    config = SampleConfig(particles=48, runs=2, mcmc_steps=2, start="var", members=64, importance_draws=16 * 48)
    estimate = assimilate_sample(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    runs = [r["importance"] for r in estimate.info["runs"]]
    assert estimate.info["importance_runs"] == sum(r["accepted"] for r in runs)
    for r, run in zip(runs, estimate.info["runs"]):  # a served run drew, weighed and stopped; the others tempered
        assert r["accepted"] == (r["ess"] >= 24 and r["pareto_k"] < 0.7) and (run["stages"] == 0) == r["accepted"]
    assert f"importance sampled {estimate.info['importance_runs']} of 2 runs" in _describe_field(estimate.info)
    json.dumps(estimate.info)
    assert twin.field_error(estimate.weights @ estimate.samples, 0) < 1.0


def test_cli_sample_writes_its_diagnostics(tmp_path, capsys):
    """`lagda assimilate --method sample` on a file: the result holds the sampler's diagnostics per field."""
    from lagda.cli import main
    from lagda.io.results import read_result
    from lagda.testing import write_twin_tracks

    twin = make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2)
    write_twin_tracks(twin, tmp_path / "tracks.nc")  # exact tracks, assimilated with noise NOISE
    code = main(["assimilate", "--tracks", str(tmp_path / "tracks.nc"), "--method", "sample", "--particles", "48",
                 "--runs", "2", "--mcmc-steps", "2", "--noise-std", str(NOISE), "--n-grid", "4", "--out",
                 str(tmp_path / "r.nc")])
    assert code == 0 and "wrote" in capsys.readouterr().out
    info = read_result(tmp_path / "r.nc").diagnostics[0]
    assert info["tempering_complete"] and info["noise_source"] == "given" and 0.9 < info["rhat_max"] < 1.5
    assert info["particles"] == 48 and info["n_runs"] == 2 and "log_evidence" in info and "stages_max" in info


# ---------------------------------------------------------------- start "learned": the learned conditional as q

FIELD = dict(particles=48, runs=2, mcmc_steps=2, noise_std=NOISE)  # the field fixture's settings: its compiled stage
FIELD_RUNS = 8  # runs of each start compared within Monte Carlo error


def _tracks(twin, positions) -> Tracks:
    """Returns the twin's one field with these (noisy) positions as Tracks."""
    n = len(positions)
    return Tracks(positions, twin.times, np.zeros(n, int), np.arange(n), release=twin.release[0])


def _oracle(x, model, tau=1.0) -> Scorer:
    """Returns an l2 encoder of any tracks whose closed-form conditional (learned.closed_form) has mean x: its
    embedding is e = x tau / v, v = 1 / (1 / D + 1 / tau) the conditional's variance."""
    e = x * tau * (1.0 / model.prior_var + 1.0 / tau)
    return Scorer(lambda positions, times, valid: e[None], "l2", tau, any_regime=True,
                  modes={"k1": model.k1.tolist(), "k2": model.k2.tolist()})


def _assert_same_posterior_mean(one, other):
    """Asserts two estimates of FIELD_RUNS runs each have the same posterior mean within Monte Carlo error (Welch t
    over the runs' means, Bonferroni over the coordinates)."""
    a, b = (_per_run(to_real(e.samples), e.weights, FIELD_RUNS)[0] for e in (one, other))
    se = np.sqrt(a.var(axis=0, ddof=1) / FIELD_RUNS + b.var(axis=0, ddof=1) / FIELD_RUNS)
    t = np.abs(a.mean(axis=0) - b.mean(axis=0)) / se
    assert np.all(t < stats.t.ppf(1.0 - ALPHA / (2 * a.shape[1]), FIELD_RUNS - 1)), f"max |t| {t.max():.2f}"


@pytest.fixture(scope="module")
def starts(field):
    """Returns (prior start, learned start) estimates of the field, FIELD_RUNS runs each; the learned conditional is
    centred at the truth, variance D / (1 + D) (an encoder that knows the field, but not the posterior)."""
    twin, positions, _ = field
    tracks, config = _tracks(twin, positions), FIELD | {"runs": FIELD_RUNS}
    prior = Sample(**config).estimate(tracks, twin.model, jax.random.key(5))
    learned = Sample(start="learned", encoder=_oracle(to_real(twin.coef[0]), twin.model), run="oracle",
                     **config).estimate(tracks, twin.model, jax.random.key(6))
    return prior, learned


def test_learned_start_reaches_the_prior_starts_posterior_mean(starts):
    """Both starts sample one posterior: their runs' means agree within Monte Carlo error (Welch t, Bonferroni)."""
    prior, learned = starts
    assert prior.samples.shape == learned.samples.shape == (FIELD_RUNS * 48, 9)  # every particle kept, runs in blocks
    _assert_same_posterior_mean(prior, learned)
    assert prior.info["tempering_complete"] and learned.info["tempering_complete"]


def test_learned_start_records_its_run_and_how_far_its_start_was(field, starts):
    """The info says the start, the run and the conditional used, and q's mean offset from the posterior mean in
    posterior stds (here the truth's offset, computed from the returned particles)."""
    twin = field[0]
    prior, learned = starts
    info = learned.info
    assert info["start"] == "learned" and info["learned_run"] == "oracle" and info["learned_conditional"] is True
    assert "learned_fallback" not in info and prior.info["start"] == "prior" and "learned_run" not in prior.info
    json.dumps(info)
    x, w = to_real(learned.samples), learned.weights
    mean = w @ x
    offset = (to_real(twin.coef[0]) - mean) / np.sqrt(w @ (x - mean) ** 2)
    assert info["start_offset_rms"] == pytest.approx(np.sqrt(np.mean(offset**2)), rel=1e-9)
    assert info["start_offset_max"] == pytest.approx(np.max(np.abs(offset)), rel=1e-9)
    spread = np.sqrt(1.0 / (1.0 / twin.model.prior_var + 1.0))  # the oracle's conditional std (tau 1)
    assert info["start_spread_median"] == pytest.approx(np.median(spread / np.sqrt(w @ (x - mean) ** 2)), rel=1e-9)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A one-epoch set encoder of the inner similarity on the twin's modes (make_pairs: same modes, frequencies and
    prior); at tau 1e4 its conditional N(D e / tau, D) is the prior shifted by ~1% of its std: a cheap start."""
    from lagda.learning.config import learned
    from lagda.learning.train import train

    run_dir = tmp_path_factory.mktemp("runs") / "inner"
    train(learned(set_head="ridge", epochs=1, batch_size=4, similarity="inner", tau=1e4, eval_library=0),
          make_pairs(8, seed=3), None, run_dir, progress=False)
    return run_dir


def test_learned_start_from_a_trained_run_records_the_run(field, run):
    """make_method (lagda assimilate --method sample --start learned --model RUN) restores the run's encoder; each
    field's info names the run (its portable identity, as a result file's model_run)."""
    from lagda.learning.model import run_identity

    twin, positions, _ = field
    method = make_method("sample", FIELD | {"start": "learned"}, run_dir=run)
    assert isinstance(method, Sample) and method.run == run_identity(run) and method.encoder.kind == "inner"
    estimate = method.estimate(_tracks(twin, positions), twin.model, jax.random.key(0))
    info = estimate.info
    assert info["start"] == "learned" and info["learned_run"] == run_identity(run) and info["learned_conditional"]
    assert info["tempering_complete"] and np.isfinite(info["start_offset_rms"]) and info["start_spread_median"] > 0.5


def test_tracks_the_encoder_cannot_read_start_from_the_prior_and_say_why(field):
    """hybrid's rule: a field the encoder cannot read (a transformer encoder trained at other times) takes the prior;
    here that is the prior start itself, the same draws as from start "prior" with the same key, and the info says
    why."""
    twin, positions, from_prior = field
    other_times = Scorer(lambda tracks: np.zeros((1, 18)), "l2", 1.0, times=2 * twin.times[0])
    sampler = Sample(start="learned", encoder=other_times, run="elsewhere", **FIELD)
    estimate = sampler.estimate(_tracks(twin, positions), twin.model, jax.random.key(0))
    info = estimate.info
    assert info["start"] == "learned" and info["learned_conditional"] is False and info["learned_run"] == "elsewhere"
    assert info["learned_fallback"].startswith("prior instead: drifter 0 is observed at 10 times")
    np.testing.assert_array_equal(estimate.samples, from_prior.samples)


def test_learned_start_without_a_usable_encoder_is_one_line(field, tmp_path, capsys):
    """No encoder (Python, or the command line without --model), an encoder for another start, a similarity with no
    closed-form conditional, other modes, a chosen basis: each one ValueError line, before any sampling."""
    import dataclasses

    from lagda.cli import main
    from lagda.testing import write_twin_tracks

    twin, positions, _ = field
    tracks = _tracks(twin, positions)
    for build in (lambda: Sample(start="learned"), lambda: make_method("sample", {"start": "learned"})):
        with pytest.raises(ValueError, match="start 'learned' needs a trained encoder") as error:
            build()
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="an encoder serves starts learned and hybrid only, not 'var'"):
        Sample(start="var", encoder=_oracle(np.zeros(18), twin.model))
    cosine = Scorer(lambda positions, times, valid: np.ones((1, 18)), "cosine", 0.05, any_regime=True)
    with pytest.raises(ValueError, match="similarity 'cosine' has no closed-form conditional: use a run trained with"):
        Sample(start="learned", encoder=cosine, **FIELD).estimate(tracks, twin.model, jax.random.key(0))
    oracle = _oracle(np.zeros(18), twin.model)
    shifted = dataclasses.replace(oracle, modes={"k1": (twin.model.k1 + 1).tolist(), "k2": twin.model.k2.tolist()})
    for encoder, model, message in ((shifted, twin.model, "trained on other modes than these tracks' model"),
                                    (oracle, dataclasses.replace(twin.model, time=object()), "not in a chosen basis")):
        with pytest.raises(ValueError, match=message):
            learned_proposal(tracks, model, encoder)
    write_twin_tracks(make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2), tmp_path / "tracks.nc")
    code = main(["assimilate", "--tracks", str(tmp_path / "tracks.nc"), "--method", "sample", "--start", "learned",
                 "--out", str(tmp_path / "r.nc")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "start 'learned' needs a trained encoder" in err[0]
    assert not (tmp_path / "r.nc").exists()


# ---------------------------------------------------------------- start "hybrid": hybrid's posterior as q


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


@pytest.fixture(scope="module")
def hybrid_start(field, run):
    """Returns the field's estimate started from hybrid's posterior (the one-epoch inner run's encoder, restored by
    make_method as `lagda assimilate --method sample --start hybrid --model RUN` does), FIELD_RUNS runs."""
    twin, positions, _ = field
    method = make_method("sample", FIELD | {"start": "hybrid", "runs": FIELD_RUNS}, run_dir=run)
    return method, method.estimate(_tracks(twin, positions), twin.model, jax.random.key(7))


def test_hybrid_start_reaches_the_prior_starts_posterior_mean(starts, hybrid_start):
    """From hybrid's posterior the sampler reaches the posterior the prior start reaches: the runs' means agree within
    Monte Carlo error (Welch t, Bonferroni), in no more stages than from the prior."""
    prior, hybrid = starts[0], hybrid_start[1]
    _assert_same_posterior_mean(prior, hybrid)
    assert hybrid.info["tempering_complete"] and hybrid.info["stages_max"] <= prior.info["stages_max"]


def test_hybrid_start_records_hybrids_decisions_and_the_run(field, run, hybrid_start):
    """The info says the start, the run, what hybrid decided (its learned conditional used, the noise it was given)
    and hybrid's seconds; hybrid drew HYBRID_MEMBERS_PER_DIM members per coordinate for q."""
    from lagda.assimilation.methods.sample import HYBRID_MEMBERS_PER_DIM
    from lagda.learning.model import run_identity

    method, estimate = hybrid_start
    info = estimate.info
    assert isinstance(method, Sample) and method.run == run_identity(run)
    assert info["start"] == "hybrid" and info["learned_run"] == run_identity(run) and info["hybrid_seconds"] > 0
    assert info["hybrid"]["learned_conditional"] is True and info["hybrid"]["noise_source"] == "given"
    assert method.hybrid.config.members == HYBRID_MEMBERS_PER_DIM * 18 and method.hybrid.config.noise_std == NOISE
    assert np.isfinite(info["start_offset_rms"]) and info["start_spread_median"] > 0
    json.dumps(info)


def test_command_line_starts_hybrid_from_the_shipped_encoder_by_default(tmp_path, monkeypatch):
    """`lagda assimilate --method sample --start hybrid` without --model reads the shipped encoder, as the learned
    methods do; start "learned" does not default (its closed form needs another similarity)."""
    from lagda.assimilation import assimilate as module
    from lagda.cli import main
    from lagda.examples import DEFAULT_MODEL, shipped
    from lagda.testing import write_twin_tracks

    write_twin_tracks(make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2), tmp_path / "tracks.nc")
    calls = []

    def make_method(method, config, run_dir):  # the run the method would read, then stop before it runs
        calls.append(run_dir)
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(module, "make_method", make_method)
    for start in ("hybrid", "var"):
        assert main(["assimilate", "--tracks", str(tmp_path / "tracks.nc"), "--method", "sample", "--start", start,
                     "--out", str(tmp_path / "r.nc")]) != 0
    assert not (tmp_path / "r.nc").exists()
    assert calls == [str(shipped(DEFAULT_MODEL)), None]
