"""experiments/learning/retrieval_ceiling.py: the misfit as an inner product, the velocity-error estimate, the
rankings."""

import dataclasses
import json

import numpy as np
import pytest

from experiments.learning import retrieval_ceiling as ceiling
from lagda.learning import physics
from lagda.testing import make_pairs


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(8, seed=3, n_obs=60)


def test_inner_product_is_minus_the_misfit(pairs):
    """u_j . v_i = -stride sum |v_i - G_i theta_j|^2, for candidates that are not the tracks' own fields."""
    rng = np.random.default_rng(0)
    coef = rng.normal(size=(5, 9)) + 1j * rng.normal(size=(5, 9))
    stride = 2
    z = pairs.positions[:, 0]
    g, v = physics.design_matrix(z, pairs.time, pairs.k1, pairs.k2, pairs.omega, stride)
    theta = np.concatenate([coef.real, coef.imag], axis=1)
    direct = stride * np.sum((v[:, None] - np.einsum("tjcm,fm->tfjc", g, theta)) ** 2, axis=(2, 3))  # (track, field)
    u = ceiling.coefficient_features(coef)
    tracks = ceiling.track_features(z, pairs.time, pairs.k1, pairs.k2, pairs.omega, stride, chunk=3)
    np.testing.assert_allclose(-(tracks @ u.T), direct, rtol=1e-10)


def test_velocity_noise_of_noisy_positions(pairs):
    """Position noise eps gives finite-difference velocity errors of std sqrt(2) eps / (stride dt), lag-1
    correlation -1/2 (consecutive intervals share an endpoint); the truncation error is far below it here."""
    data = pairs
    eps, dt = 1e-3, data.time[1] - data.time[0]
    noisy = data.positions + np.random.default_rng(1).normal(0.0, eps, data.positions.shape).astype(np.float32)
    noisy = dataclasses.replace(data, positions=noisy)
    for stride in (1, 2):
        sigma, lag1, _ = ceiling.velocity_noise(noisy, stride, n_fields=8)
        assert sigma == pytest.approx(np.sqrt(2) * eps / (stride * dt), rel=0.1)
        assert lag1 == pytest.approx(-0.5, abs=0.1)
    exact_sigma, _, v_rms = ceiling.velocity_noise(data, 1, n_fields=8)
    assert exact_sigma < 1e-2 * np.sqrt(2) * eps / dt
    z = data.positions[:, 0].astype(np.float64)
    assert v_rms == pytest.approx(np.sqrt(np.mean(((z[:, 1:] - z[:, :-1]) / dt) ** 2)), rel=1e-6)


def test_likelihood_ranks_exact_tracks_first(pairs):
    """Exact tracks: every field's own track has the smallest misfit; with the pairing scrambled, none does."""
    scores = ceiling.likelihood_recall(pairs, stride=1, batch=4)
    assert all(scores[key] == 1.0 for key in ceiling.METRICS)
    assert scores["traj_to_coef/margin_min"] > 1 and scores["coef_to_traj/margin_min"] > 1
    shifted = dataclasses.replace(pairs, coef=np.roll(pairs.coef, 1, axis=0))
    scores = ceiling.likelihood_recall(shifted, stride=1, batch=4)
    assert scores["traj_to_coef/R@1"] == 0.0 and scores["coef_to_traj/R@1"] == 0.0
    assert scores["traj_to_coef/margin_median"] < 1


def test_posterior_mean_ranks_exact_tracks_first(pairs):
    """A well-determined posterior mean (K = 9, 60 exact velocities, a tiny ridge) is near theta: R@1 = 1."""
    scores = ceiling.posterior_mean_recall(pairs, noise=1e-10, stride=1, batch=4)
    assert all(scores[key] == 1.0 for key in ceiling.METRICS)


def _write(path, data, omega=None):
    np.savez(path, coef=data.coef, positions=data.positions, time=data.time, k1=data.k1, k2=data.k2,
             omega=data.omega if omega is None else omega, prior_scale=data.prior_scale,
             attrs=json.dumps({"dt": 1e-3}))


def test_cli_writes_rows(tmp_path, pairs, capsys):
    _write(tmp_path / "train.npz", pairs.subset(slice(4, 8)))
    _write(tmp_path / "test.npz", pairs)
    out = tmp_path / "ceiling.csv"
    assert ceiling.main(["--train", str(tmp_path / "train.npz"), "--test", str(tmp_path / "test.npz"),
                         "--library", "6", "--strides", "1", "--batch", "4", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == list(ceiling.COLUMNS)
    rows = [dict(zip(ceiling.COLUMNS, line.split(","))) for line in lines[1:]]
    assert [r["method"] for r in rows] == ["posterior-mean:cpu-preset", "likelihood", "posterior-mean:estimated-noise"]
    assert {r["library"] for r in rows} == {"6"}
    assert float(rows[1]["traj_to_coef/R@1"]) == 1.0
    assert "wrote" in capsys.readouterr().out


def test_cli_refuses_other_frequencies(tmp_path, pairs, capsys):
    _write(tmp_path / "train.npz", pairs, omega=pairs.omega + 1.0)
    _write(tmp_path / "test.npz", pairs)
    out = tmp_path / "ceiling.csv"
    with pytest.raises(SystemExit) as exit_info:
        ceiling.main(["--train", str(tmp_path / "train.npz"), "--test", str(tmp_path / "test.npz"), "--out", str(out)])
    assert exit_info.value.code == 2
    assert "frequencies" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not out.exists()
