"""hybrid (learned conditional x velocity likelihood), the automatic finite-difference lag and
`lagda evaluate --assimilation`, on the K = 9 twin."""

import json

import jax
import numpy as np
import pytest

from lagda.assimilation.methods.config import HybridConfig
from lagda.assimilation.methods.hybrid import (
    assimilate_hybrid,
    gaussian_product,
    select_prior,
)
from lagda.assimilation.methods.linear import assimilate_linear
from lagda.assimilation.methods.track_data import (
    choose_lag,
    displacement_data,
    velocity_data,
)
from lagda.testing import make_twin, write_twin_tracks


@pytest.fixture(scope="module")
def twin():
    return make_twin(n_field=2, n_drifter=4, n_obs=200)


def test_gaussian_product_equals_the_direct_product_of_two_gaussians():
    rng = np.random.default_rng(0)
    g, y = rng.normal(size=(30, 6)), rng.normal(size=30)
    m, v, s2 = rng.normal(size=6), rng.uniform(0.5, 2.0, 6), 0.3
    mean, cov, _ = gaussian_product(g, y, m, v, s2)
    precision = np.diag(1.0 / v) + g.T @ g / s2
    direct_cov = np.linalg.inv(precision)
    assert np.allclose(cov, direct_cov, atol=1e-10)
    assert np.allclose(mean, direct_cov @ (m / v + g.T @ y / s2), atol=1e-10)


def test_hybrid_with_a_broad_learned_covariance_equals_linear(twin):
    m, key, config = twin.model, jax.random.key(3), HybridConfig(members=16, refine="none")
    args = (twin.positions[0], twin.times, twin.release[0], m, config, key)
    lin = assimilate_linear(*args)
    hyb = assimilate_hybrid(*args, np.zeros(2 * m.n_modes), 1e6 * m.prior_var)
    assert np.allclose(hyb.samples, lin.samples, atol=1e-9)
    # an informative learned prior at the truth moves the estimate towards it (one 10-step track,
    # which leaves the field undetermined: linear error 0.52 alone, 6e-6 with the prior; a 50-step
    # exact track already pins it to ~1e-5 on its own)
    one = (twin.positions[0][:1, :10], twin.times[:1, :10], twin.release[0][:1], m, config, key)
    x_true = np.concatenate([twin.coef[0].real, twin.coef[0].imag])
    sharp, lin_one = assimilate_hybrid(*one, x_true, 1e-4 * m.prior_var), assimilate_linear(*one)
    assert twin.field_error(sharp.samples.mean(0), 0) < 1e-3 < 0.1 < twin.field_error(lin_one.samples.mean(0), 0)
    fifty = (twin.positions[0][:1, :50], twin.times[:1, :50], twin.release[0][:1], m, config, key)
    assert twin.field_error(assimilate_linear(*fifty).samples.mean(0), 0) < 1e-4  # measured 1.8e-5


def test_marginal_likelihood_keeps_a_right_learned_prior_and_overrules_a_wrong_one(twin):
    m, config = twin.model, HybridConfig()
    g, y, noise_var, _ = velocity_data(twin.positions[0][:1], twin.times[:1], twin.release[0][:1], m, config)
    x_true = np.concatenate([twin.coef[0].real, twin.coef[0].imag])
    x_other = np.concatenate([twin.coef[1].real, twin.coef[1].imag])  # another field's coefficients
    right = select_prior(g, y, (x_true, 1e-3 * m.prior_var), m, noise_var)
    wrong = select_prior(g, y, (x_other, 1e-3 * m.prior_var), m, noise_var)
    assert right[2] == 1.0  # a sharp prior at the truth: kept as it is
    assert wrong[2] > 1.0  # a sharp prior elsewhere: widened or replaced by the original prior
    assert np.all(wrong[1] >= 1e-3 * m.prior_var)


def test_lag_grows_with_the_noise_and_improves_noisy_linear(twin):
    rng = np.random.default_rng(1)
    pos = twin.positions[0]
    lags = [choose_lag(pos + s * rng.normal(size=pos.shape), twin.times)[0] for s in (0.0, 1e-5, 1e-4, 1e-3)]
    assert lags[0] == 1 and lags == sorted(lags) and lags[-1] > lags[1]
    m = twin.model
    noisy = pos + 1e-3 * rng.normal(size=pos.shape)
    errors = [twin.field_error(assimilate_linear(noisy, twin.times, twin.release[0], m,
                                                 HybridConfig(members=2, fd_lag=lag),
                                                 jax.random.key(0)).samples.mean(0), 0)
              for lag in (None, 1)]
    assert errors[0] < errors[1]


def test_noise_estimate_leaves_gaps_out(twin):
    """Tracks with missing observations (irregular times): third differences across a gap measure
    the gap, not the noise; the estimate from the regular stencils finds the noise level."""
    rng = np.random.default_rng(2)
    noisy = twin.positions[0] + 1e-4 * rng.normal(size=twin.positions[0].shape)
    keep = np.ones(noisy.shape[1], bool)
    keep[[20, 21, 22, 60, 61, 100, 140, 141, 142, 143]] = False  # gaps of 1-4 observations
    _, info = choose_lag(noisy[:, keep], twin.times[:, keep])
    _, dense = choose_lag(noisy, twin.times)
    assert 0.8e-4 < info["noise_std_est"] < 1.25e-4 and abs(info["noise_std_est"] / dense["noise_std_est"] - 1) < 0.1


def test_a_few_fixes_off_the_track_are_not_read_as_noise_on_every_fix(twin):
    """Fixes displaced far beyond the noise carry the third differences' mean square: the median's estimate judges
    the tracks instead (smooth exact tracks stay lag 1 without noise; noisy ones keep their noise level)."""
    rng = np.random.default_rng(3)
    pos = twin.positions[0].copy()
    off = pos.copy()
    off[[0, 1, 2, 3], [50, 90, 130, 170]] += 0.01  # 4 of 800 fixes, a hundred times the noise below
    lag, info = choose_lag(off, twin.times)
    assert lag == 1 and "noise_std_est" not in info and info["third_difference_heavy_tail"] > 4
    assert "position noise judged by the median of the third differences: none" in info["noise_note"]
    noise = 1e-4 * rng.normal(size=pos.shape)
    _, plain = choose_lag(pos + noise, twin.times)
    _, spiked = choose_lag(off + noise, twin.times)
    assert "third_difference_heavy_tail" not in plain  # normal noise: the mean square as before
    assert 0.8e-4 < spiked["noise_std_est"] < 1.25e-4 and spiked["noise_std_source"] == "median of the third " \
        "differences"


def test_cli_evaluate_assimilation_prints_a_table_and_writes_json(twin, tmp_path, capsys):
    from lagda.cli import main

    write_twin_tracks(twin, tmp_path / "t.nc")
    out = tmp_path / "scores.json"
    assert main(["evaluate", "--assimilation", "--tracks", str(tmp_path / "t.nc"), "--methods", "linear", "--out",
                 str(out)]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "| linear |" in printed and "field err" in printed
    assert "lagda evaluate: note: prior" in captured.err  # no model: the guessed prior is said, not silent
    scores = json.loads(out.read_text())
    assert list(scores) == ["linear"] and scores["linear"]["velocity_rel_l2"] < 0.05
    assert main(["evaluate", "--assimilation", "--tracks", str(tmp_path / "t.nc"), "--methods", "embed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "embed / hybrid and sample --start learned / hybrid need a trained model" in err[0]
    from lagda.assimilation.evaluation import evaluate_assimilation

    for start in ("learned", "hybrid"):  # the starts that read an encoder (an option in Python; no flag in evaluate)
        with pytest.raises(ValueError, match="need a trained model"):
            evaluate_assimilation(tmp_path / "t.nc", ["sample"], start=start)
    assert main(["evaluate", "--model", str(tmp_path)]) == 2  # retrieval mode still needs --data


def test_hybrid_reads_noisy_tracks_as_displacements_and_beats_finite_differences(twin):
    """With position noise hybrid inverts the displacements (integral model, white noise) under
    the original prior, and ends nearer the truth than the finite-difference inversion."""
    m, rng = twin.model, np.random.default_rng(4)
    config = HybridConfig(members=4)  # noise std not given: estimated by empirical Bayes
    for f in range(2):
        noisy = twin.positions[f] + 1e-3 * rng.normal(size=twin.positions[f].shape)
        args = (noisy, twin.times, twin.release[f], m, config, jax.random.key(f))
        lin = assimilate_linear(noisy, twin.times, twin.release[f], m, HybridConfig(members=4, track_data="velocities"),
                                jax.random.key(f))
        x_other = np.concatenate([twin.coef[1 - f].real, twin.coef[1 - f].imag])  # a wrong learned conditional
        hyb = assimilate_hybrid(*args, x_other, 1e-3 * m.prior_var)
        assert hyb.info["data"] == "displacements" and hyb.info["prior_inflation"] == float("inf")
        assert 0.7e-3 < hyb.info["data_noise_std"] < 1.4e-3  # the position noise, recovered
        assert twin.field_error(hyb.samples.mean(0), f) < twin.field_error(lin.samples.mean(0), f)


@pytest.mark.parametrize("anchored", [True, False], ids=["release", "centred"])
def test_displacement_model_is_second_order_in_the_observation_step(anchored):
    """b - A x_true on exact tracks is the trapezoid error of the path integral: O(h^2)."""
    misfits = []
    for stride in (4, 2):
        tw = make_twin(n_field=1, n_drifter=2, n_obs=400 // stride, stride=stride)
        positions = tw.positions[0].copy()
        positions[1, 20 // stride: 40 // stride] = np.nan  # a gap: the second drifter in two segments
        a, b = displacement_data(positions, tw.times, tw.release[0] if anchored else None, tw.model)
        x_true = np.concatenate([tw.coef[0].real, tw.coef[0].imag])
        misfits.append(np.sqrt(np.mean((b - a @ x_true) ** 2)))
    assert 3.0 < misfits[0] / misfits[1] < 5.0 and misfits[1] < 1e-4


def test_gauss_newton_refinement_lowers_the_position_misfit_of_sparse_tracks():
    """On sparse tracks (every 20 steps) the product is biased by the differences; the refinement
    (a short 4D-Var on the positions from the product mean) must fit the positions better."""
    from lagda.assimilation.methods.observations import arrange
    from lagda.assimilation.methods.variational import misfit

    tw = make_twin(n_field=1, n_drifter=2, n_obs=10, stride=20, seed=2)
    m, key = tw.model, jax.random.key(0)
    args = (tw.positions[0], tw.times, tw.release[0], m)
    broad = (np.zeros(2 * m.n_modes), 1e6 * m.prior_var)
    plain = assimilate_hybrid(*args, HybridConfig(members=2, refine="none"), key, *broad)
    refined = assimilate_hybrid(*args, HybridConfig(members=2, refine="auto", iterations=5), key, *broad)
    assert plain.info["sparse"] and not plain.info["refined"] and refined.info["refined"]
    obs = arrange(*args[:3], m.dt)
    cost = [float(misfit(np.concatenate([e.samples.mean(0).real, e.samples.mean(0).imag]), obs, m, 1e-6))
            for e in (plain, refined)]
    assert cost[1] < 0.5 * cost[0]
