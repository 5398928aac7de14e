"""sample on a tiny noisy track (one drifter, K = 9): from the prior, from var's Laplace Gaussian at a given and at
an estimated noise, importance sampling first, and `lagda assimilate --method sample` on a file."""

import json

import jax
import numpy as np
import pytest

from lagda.assimilation.methods.config import SampleConfig, VarConfig
from lagda.assimilation.methods.sample import assimilate_sample
from lagda.assimilation.methods.search import posterior_cost
from lagda.assimilation.model import to_real
from lagda.testing import make_twin
from tests.sample_problems import NOISE, noisy_field


@pytest.fixture(scope="module")
def field():
    """Returns (twin, noisy positions, estimate): sample_problems.noisy_field."""
    return noisy_field()


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

