"""sample on the linear-Gaussian twin: tempered SMC against its closed-form posterior and evidence, from the prior
and from an offset proposal, one compilation for every stage and call, importance sampling from a wider and a
narrower proposal, R-hat and the progress callback. Tolerances: the runs' Monte Carlo error
(tests/sample_problems.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from lagda.assimilation.methods.config import DIVERGENT_WARN, SampleConfig
from lagda.assimilation.methods.sample import Gaussian, smc_sample
from tests.sample_problems import ALPHA, PARTICLES, RUNS, assert_within_mc_error, per_run

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
    mean, cov = per_run(samples, weights, RUNS)
    assert_within_mc_error(mean, twin[2])
    upper = np.triu_indices(cov.shape[1])
    assert_within_mc_error(cov[:, upper[0], upper[1]], twin[3][upper])
    assert diagnostics["tempering_complete"]


@pytest.mark.parametrize("start", ["prior", "proposal"])
def test_log_evidence_matches_the_closed_form(twin, from_prior, from_proposal, start):
    diagnostics = (from_prior[0] if start == "prior" else from_proposal[0])[2]
    assert_within_mc_error([r["log_evidence"] for r in diagnostics["runs"]], twin[4])


def test_proposal_start_agrees_with_prior_start_in_fewer_stages(from_prior, from_proposal):
    (samples, weights, diagnostics), retraces = from_proposal
    a, b = per_run(*from_prior[0][:2], RUNS)[0], per_run(samples, weights, RUNS)[0]
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
    mean, cov = per_run(samples, weights, RUNS)
    assert_within_mc_error(mean, twin[2])
    assert_within_mc_error(np.diagonal(cov, axis1=1, axis2=2), np.diag(twin[3]))
    assert_within_mc_error([r["log_evidence"] for r in diagnostics["runs"]], twin[4])


def test_importance_sampling_from_a_narrow_proposal_is_refused_and_tempers(twin, by_importance):
    samples, weights, diagnostics = by_importance[1]
    refused = [r["importance"] for r in diagnostics["runs"]]
    assert not any(i["accepted"] for i in refused) and min(i["pareto_k"] for i in refused) > 0.7
    assert all(i["draws"] == 16 * PARTICLES for i in refused)  # it drew all it could before refusing
    assert diagnostics["tempering_complete"] and min(r["stages"] for r in diagnostics["runs"]) > 1
    assert_within_mc_error(per_run(samples, weights, RUNS)[0], twin[2])


def test_progress_reports_every_stage(from_prior):
    (_, _, diagnostics), calls = from_prior
    stages = [r["stages"] for r in diagnostics["runs"]]
    assert [c[0] for c in calls] == list(range(1, sum(stages) + 1))  # counted on across the runs
    assert [c[1] for c in calls] == [t for r in diagnostics["runs"] for t in r["tempering"]]



def test_rhat_is_near_one_and_runs_agree(from_prior):
    diagnostics = from_prior[0][2]
    assert diagnostics["rhat_max"] < 1.01  # the conventional threshold (Vehtari et al. 2021)
    assert diagnostics["agreement_fraction_beyond_p99"] < 0.5
    run = diagnostics["runs"][0]
    assert np.all(np.diff(run["tempering"]) >= 0) and run["tempering"][-1] == 1.0
    assert 0.3 < np.mean(run["acceptance"]) < 0.95  # the step size adapts towards target_acceptance
    assert diagnostics["divergent_max"] == max(max(r["divergent"]) for r in diagnostics["runs"])
    assert diagnostics["divergent_max"] < DIVERGENT_WARN  # a Gaussian posterior: the moves follow it everywhere



def test_proposal_must_match_start(twin):
    data, prior = twin[:2]
    with pytest.raises(ValueError, match="needs proposal"):
        smc_sample(linear_log_likelihood, prior, jax.random.key(0), SampleConfig(start="proposal"), data)

