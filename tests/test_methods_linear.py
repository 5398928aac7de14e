"""linear: the velocity design matrix, exactness on dense exact tracks, the Kalman closed form."""

import jax
import numpy as np
import pytest

from lagda.assimilation.methods import AssimConfig, assimilate_linear
from lagda.assimilation.methods._common import to_real, velocity_matrix
from lagda.assimilation.methods.linear import finite_differences, five_point_differences, linear_posterior, velocity_data
from simulate import many_points, velocity
from tests.assim_twin import make_twin, write_twin_tracks


@pytest.fixture(scope="module")
def twin():
    return make_twin()


def test_velocity_matrix_matches_flow_velocity(twin):
    m = twin.model
    points = np.random.default_rng(0).random((7, 2)) * 3
    t = np.linspace(0.0, 0.1, 7)
    expected = np.asarray(many_points(velocity, points[None], t[None], twin.coef[:1], m.k1, m.k2, m.omega))[0]
    assert np.allclose(velocity_matrix(points, t, m.k1, m.k2, m.omega) @ to_real(twin.coef[0]), expected, atol=1e-10)


def test_dense_exact_tracks_recover_the_field(twin):
    for f in range(2):
        est = assimilate_linear(twin.positions[f], twin.times, twin.release[f], twin.model, AssimConfig(members=8),
                                jax.random.key(0))
        assert twin.field_error(est.samples.T @ est.weights, f) < 1e-3


def test_mean_mode_keeps_its_prior(twin):
    est = assimilate_linear(twin.positions[0], twin.times, twin.release[0], twin.model, AssimConfig(members=4000),
                            jax.random.key(0))
    zero = int(np.flatnonzero((twin.model.k1 == 0) & (twin.model.k2 == 0))[0])
    assert abs(np.std(est.samples[:, zero].real) / (twin.model.scale[zero] / np.sqrt(2)) - 1) < 0.1


def test_posterior_equals_the_kalman_closed_form():
    rng = np.random.default_rng(3)
    g = rng.normal(size=(40, 6))
    prior_var = rng.uniform(0.5, 2.0, 6)
    x = rng.normal(size=6) * np.sqrt(prior_var)
    noise_var = 0.3
    y = g @ x + rng.normal(size=40) * np.sqrt(noise_var)
    mean, cov, _ = linear_posterior(g, y, prior_var, noise_var)
    d = np.diag(prior_var)
    gain = d @ g.T @ np.linalg.solve(g @ d @ g.T + noise_var * np.eye(40), np.eye(40))
    assert np.allclose(mean, gain @ y, atol=1e-10)
    assert np.allclose(cov, d - gain @ g @ d, atol=1e-10)


def test_empirical_bayes_finds_the_noise_level():
    rng = np.random.default_rng(4)
    g = rng.normal(size=(2000, 6))
    y = g @ rng.normal(size=6) + 0.1 * rng.normal(size=2000)
    _, _, noise_var = linear_posterior(g, y, np.ones(6), n_grid=81)
    assert 0.5 < noise_var / 0.01 < 2.0


def test_pairs_with_a_missing_end_are_skipped(twin):
    positions = twin.positions[0, :1].copy()
    positions[0, 10] = np.nan
    _, _, vel, _ = finite_differences(positions, twin.times[:1])
    assert len(vel) == positions.shape[1] - 1 - 2 and np.all(np.isfinite(vel))


def test_assimilate_file_writes_a_result(twin, tmp_path):
    from lagda.assimilation.assimilate import assimilate_file
    from lagda.io.results import read_result

    write_twin_tracks(twin, tmp_path / "t.nc")
    summary = assimilate_file(tmp_path / "t.nc", tmp_path / "r.nc", "linear", n_grid=8, members=16)
    assert summary["fields"] == 2 and summary["velocity_rel_l2"] < 1e-2
    assert read_result(tmp_path / "r.nc") is not None
    with pytest.raises(ValueError, match="exists"):
        assimilate_file(tmp_path / "t.nc", tmp_path / "r.nc", "linear")


def test_five_point_difference_is_fourth_order_and_skips_gaps():
    errors = []
    for stride in (8, 4):
        tw = make_twin(n_field=1, n_drifter=1, n_obs=800 // stride, stride=stride)
        positions = tw.positions[0].copy()
        positions[0, 40 // stride] = np.nan  # a gap: the four points around it have no stencil
        points, t, vel, h = five_point_differences(positions, tw.times, tw.release[0])
        assert len(t) == positions.shape[1] + 1 - 4 - 5 and np.allclose(h, stride * tw.model.dt)
        x = np.concatenate([tw.coef[0].real, tw.coef[0].imag])
        exact = velocity_matrix(points, t, tw.model.k1, tw.model.k2, tw.model.omega) @ x
        errors.append(np.sqrt(np.mean((vel - exact) ** 2)))
    assert 12.0 < errors[0] / errors[1] < 20.0  # 2^4 = 16


def test_fourth_order_differences_make_the_dense_exact_posterior_calibrated(twin):
    """Second-order differences leave an O(h^2) bias, smooth along the track, that the white-noise
    model takes for information: errors of 7-8 posterior std. The five-point difference removes it."""
    keep = ~((twin.model.k1 == 0) & (twin.model.k2 == 0))  # (0, 0) never moves a drifter
    keep = np.concatenate([keep, keep])
    for f in range(2):
        z_rms = {}
        for order in (2, 4):
            g, y, noise_var, info = velocity_data(twin.positions[f], twin.times, twin.release[f], twin.model,
                                                  AssimConfig(fd_order=order))
            mean, cov, _ = linear_posterior(g, y, twin.model.prior_var, noise_var)
            z = (to_real(twin.coef[f]) - mean) / np.sqrt(np.diag(cov))
            z_rms[info["fd_order"]] = np.sqrt(np.mean(z[keep] ** 2))
        assert z_rms[4] < 2.0 < 4.0 < z_rms[2]
