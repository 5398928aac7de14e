"""linear: the velocity design matrix, exactness on dense exact tracks, the Kalman closed form."""

import jax
import numpy as np
import pytest

from lagda.assimilation.methods.config import LinearConfig
from lagda.assimilation.methods.linear import (
    assimilate_linear,
    displacement_posterior,
    track_velocity_posterior,
)
from lagda.assimilation.methods.linear_gaussian import linear_posterior, noise_quantiles
from lagda.assimilation.methods.track_data import (
    central_differences,
    correlation_time,
    finite_differences,
    five_point_differences,
    observation_regime,
    velocity_data,
)
from lagda.assimilation.model import to_real
from lagda.testing import make_twin, write_twin_tracks
from simulate import many_points, velocity
from simulate.flow import velocity_basis


@pytest.fixture(scope="module")
def twin():
    return make_twin()


def test_velocity_basis_matches_flow_velocity(twin):
    m = twin.model
    points = np.random.default_rng(0).random((7, 2)) * 3
    t = np.linspace(0.0, 0.1, 7)
    expected = np.asarray(many_points(velocity, points[None], t[None], twin.coef[:1], m.k1, m.k2, m.omega))[0]
    assert np.allclose(velocity_basis(points, t, m.k1, m.k2, m.omega) @ to_real(twin.coef[0]), expected, atol=1e-10)


def test_dense_exact_tracks_recover_the_field(twin):
    for f in range(2):
        est = assimilate_linear(twin.positions[f], twin.times, twin.release[f], twin.model, LinearConfig(members=8),
                                jax.random.key(0))
        assert twin.field_error(est.samples.T @ est.weights, f) < 1e-3


def test_mean_mode_keeps_its_prior(twin):
    est = assimilate_linear(twin.positions[0], twin.times, twin.release[0], twin.model, LinearConfig(members=4000),
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


@pytest.mark.parametrize("n", [6, 30])
def test_noise_posterior_median_is_the_quadrature_of_the_evidence(n):
    """The 5%, 50% and 95% quantiles of p(s | y) ∝ N(y; 0, G D G^T + s^2 I) on [0, rms(y)], by direct quadrature
    in s."""
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(n)
    g, d = rng.normal(size=(n, 10)), rng.uniform(0.5, 2.0, 10)
    y = g @ (np.sqrt(d) * rng.normal(size=10)) + 0.3 * rng.normal(size=n)
    # from rms / 8000; from rms / 1000 when G D G^T is singular (n > 10), where p(s | y) ~ 0 below it
    s = np.linspace(0.0, np.sqrt(np.mean(y**2)), 8001)[1 if n < 10 else 8:]
    log_p = np.array([multivariate_normal.logpdf(y, np.zeros(n), (g * d) @ g.T + v**2 * np.eye(n)) for v in s])
    cumulative = np.cumsum(np.exp(log_p - log_p.max()))
    quadrature = np.interp(np.array([0.05, 0.5, 0.95]) * cumulative[-1], cumulative, s)
    assert noise_quantiles(g, y, d) == pytest.approx(quadrature, rel=1e-3)


def test_noise_estimate_stays_on_the_noise_scale_where_the_evidence_maximum_collapses():
    """20 data, 40 parameters, signal singular values 0.3-30 against noise 1: the evidence is flat below the
    weakest signal directions, and its maximum falls to ~0 on some draws; the posterior median under the
    uniform prior on s stays within a factor 6 of the noise on every draw, and is unbiased to 30% over them."""
    rng = np.random.default_rng(1)
    most_evidence, median = [], []
    for _ in range(40):
        u, _ = np.linalg.qr(rng.normal(size=(20, 20)))
        v, _ = np.linalg.qr(rng.normal(size=(40, 20)))
        g = (u * np.logspace(np.log10(0.3), np.log10(30.0), 20)) @ v.T
        y = g @ rng.normal(size=40) + rng.normal(size=20)
        most_evidence.append(np.sqrt(linear_posterior(g, y, np.ones(40))[2]))
        median.append(noise_quantiles(g, y, np.ones(40), (0.5,))[0])
    assert np.sum(np.array(most_evidence) < 1e-3) >= 2
    assert 1.0 / 6.0 < min(median) and max(median) < 6.0 and 0.7 < np.median(median) < 1.3


def test_pairs_with_a_missing_end_are_skipped(twin):
    positions = twin.positions[0, :1].copy()
    positions[0, 10] = np.nan
    _, _, vel, _ = finite_differences(positions, twin.times[:1])
    assert len(vel) == positions.shape[1] - 1 - 2 and np.all(np.isfinite(vel))


def test_assimilate_file_writes_a_result(twin, tmp_path):
    from lagda.assimilation.assimilate import assimilate_file
    from lagda.assimilation.methods.config import LinearConfig
    from lagda.assimilation.settings import AssimilateSettings
    from lagda.io.results import read_result

    write_twin_tracks(twin, tmp_path / "t.nc")
    summary = assimilate_file(tmp_path / "t.nc", tmp_path / "r.nc",
                              AssimilateSettings("linear", LinearConfig(members=16), n_grid=8))
    assert summary.method == "linear" and summary.fields == 2 and summary.scores["velocity_rel_l2"] < 1e-2
    assert read_result(tmp_path / "r.nc") is not None
    with pytest.raises(ValueError, match="exists"):
        assimilate_file(tmp_path / "t.nc", tmp_path / "r.nc", AssimilateSettings("linear"))


def test_five_point_difference_is_fourth_order_and_skips_gaps():
    errors = []
    for stride in (8, 4):
        tw = make_twin(n_field=1, n_drifter=1, n_obs=800 // stride, stride=stride)
        positions = tw.positions[0].copy()
        positions[0, 40 // stride] = np.nan  # a gap: the four points around it have no stencil
        points, t, vel, h = five_point_differences(positions, tw.times, tw.release[0])
        assert len(t) == positions.shape[1] + 1 - 4 - 5 and np.allclose(h, stride * tw.model.dt)
        x = np.concatenate([tw.coef[0].real, tw.coef[0].imag])
        exact = velocity_basis(points, t, tw.model.k1, tw.model.k2, tw.model.omega) @ x
        errors.append(np.sqrt(np.mean((vel - exact) ** 2)))
    assert 12.0 < errors[0] / errors[1] < 20.0  # 2^4 = 16


def test_predictive_noise_floor_calibrates_the_dense_exact_posterior(twin):
    """Sixth-order differences of exact tracks leave RK4 / truncation errors smooth along the track;
    the coefficients absorb them, so the evidence noise (~2e-10) is too small: z-score rms
    2.8 and 4.7 measured. The floor from the tracks re-integrated from the mean (misfit
    ~6e-10, over p_eff directions) gives 0.46 and 0.73; the mean is unchanged."""
    keep = ~((twin.model.k1 == 0) & (twin.model.k2 == 0))  # (0, 0) never moves a drifter
    keep = np.concatenate([keep, keep])
    z_rms, means = {}, {}
    for floor in (False, True):
        for f in range(2):
            config = LinearConfig(predictive_floor=floor)
            regime = observation_regime(twin.positions[f], twin.times, twin.model, config)
            mean, cov, info = track_velocity_posterior(twin.positions[f], twin.times, twin.release[f], twin.model,
                                                       config, regime, np.zeros(18), twin.model.prior_var)
            z = (to_real(twin.coef[f]) - mean) / np.sqrt(np.diag(cov))
            z_rms[floor, f], means[floor, f] = np.sqrt(np.mean(z[keep] ** 2)), mean
        assert info["fd_order"] == 6
    assert max(z_rms[False, 0], z_rms[False, 1]) > 3.5 and z_rms[False, 0] > 2.0
    assert 0.2 < z_rms[True, 0] < 1.5 and 0.2 < z_rms[True, 1] < 1.5
    assert info["covariance_noise_source"] == "predictive" and np.array_equal(means[True, 1], means[False, 1])


def test_empirical_bayes_reaches_the_rounding_level_of_exact_tracks(twin):
    """One dense exact track determines the field; the evidence grid must reach noise variances far
    below 1e-14 mean(y^2) (the old floor) and not lose |y - U U^T y|^2 to cancellation."""
    one = (twin.positions[0][:1], twin.times[:1], twin.release[0][:1], twin.model)
    est = assimilate_linear(*one, LinearConfig(members=2), jax.random.key(0))
    g, y, _, info = velocity_data(*one, LinearConfig())
    assert info["fd_order"] == 6 and est.info["velocity_noise_std"] ** 2 < 1e-16 * np.mean(y**2)
    assert twin.field_error(est.samples.mean(0), 0) < 1e-5


def test_seven_point_difference_is_sixth_order():
    errors = []
    for stride in (16, 8):
        tw = make_twin(n_field=1, n_drifter=1, n_obs=1600 // stride, stride=stride)
        points, t, vel, _ = central_differences(tw.positions[0], tw.times, tw.release[0], order=6)
        exact = velocity_basis(points, t, tw.model.k1, tw.model.k2, tw.model.omega) @ to_real(tw.coef[0])
        errors.append(np.sqrt(np.mean((vel - exact) ** 2)))
    assert 40.0 < errors[0] / errors[1] < 90.0  # 2^6 = 64


def test_correlation_time_of_white_and_moving_average_series():
    rng = np.random.default_rng(0)
    white = rng.normal(size=(20000, 2))
    assert 0.9 < correlation_time(white) < 1.1
    average = np.stack([np.convolve(white[:, i], np.ones(8), "valid") for i in range(2)], 1)  # tau = 8
    assert 6.5 < correlation_time(average) < 9.5


@pytest.fixture(scope="module")
def fast_twin():
    """Fast flow (rms speed 60): G at noisy positions errs by a random walk ~ sigma along 400 steps."""
    return {n: make_twin(n_field=1, n_drifter=n, n_obs=400, seed=5, rms_speed=60.0) for n in (8, 32)}


def test_errors_in_variables_whitening_calibrates_many_noisy_drifters(fast_twin):
    """White displacement noise (eiv_iterations 0) ignores the random walk of G at noisy positions,
    an error shared by each track's data, so its overconfidence grows with the drifters: z-score
    rms 2.26 (8) and 3.43 (32) measured. Whitening against it gives 1.46 and 1.32, and the error
    keeps falling from 8 to 32 drifters (4.6e-4 to 1.6e-4)."""
    errors = {}
    for n, tw in fast_twin.items():
        noisy = tw.positions[0] + 1e-3 * np.random.default_rng(0).normal(size=tw.positions[0].shape)
        keep = ~((tw.model.k1 == 0) & (tw.model.k2 == 0))
        keep = np.concatenate([keep, keep])
        z_rms = {}
        for iterations in (0, 2):
            mean, cov, info = displacement_posterior(noisy, tw.times, tw.release[0], tw.model,
                                                     LinearConfig(eiv_iterations=iterations), np.zeros(18),
                                                     tw.model.prior_var)
            z = (to_real(tw.coef[0]) - mean) / np.sqrt(np.diag(cov))
            z_rms[iterations] = np.sqrt(np.mean(z[keep] ** 2))
        assert 0.8e-3 < info["position_noise_std"] < 1.2e-3
        assert z_rms[0] > {8: 1.9, 32: 2.8}[n] and z_rms[2] < 1.8, z_rms
        errors[n] = tw.field_error(mean[:9] + 1j * mean[9:], 0)
    assert errors[32] < 0.7 * errors[8]


def test_curvature_factor_removes_the_second_order_noise_bias(fast_twin):
    """G and the whitening Jacobian at noisy positions bias the whitened displacements by
    -2 pi^2 sigma^2 |k|^2 per mode (`curvature_factor`): the |k|^2 = 2 modes shrink by 5.4e-3
    (expected 3.9e-3) at sigma = 1e-2, beyond their posterior std with 32 fast drifters, z-score
    rms 3.27 and error 3.1e-3 measured. The de-biased columns give shrink 1.5e-3, z-score rms
    1.75, error 2.4e-3."""
    tw = fast_twin[32]
    noisy = tw.positions[0] + 1e-2 * np.random.default_rng(0).normal(size=tw.positions[0].shape)
    k_sq = np.tile(tw.model.k1**2 + tw.model.k2**2, 2)
    x = to_real(tw.coef[0])
    z_rms, shrink, errors = {}, {}, {}
    for curvature in (False, True):
        mean, cov, _ = displacement_posterior(noisy, tw.times, tw.release[0], tw.model,
                                              LinearConfig(eiv_curvature=curvature), np.zeros(18), tw.model.prior_var)
        z = (x - mean) / np.sqrt(np.diag(cov))
        z_rms[curvature] = np.sqrt(np.mean(z[k_sq > 0] ** 2))
        high = k_sq == 2
        shrink[curvature] = 1.0 - mean[high] @ x[high] / (x[high] @ x[high])
        errors[curvature] = tw.field_error(mean[:9] + 1j * mean[9:], 0)
    assert z_rms[False] > 2.6 and z_rms[True] < 2.2, z_rms
    assert shrink[False] > 4e-3 and abs(shrink[True]) < 2.5e-3, shrink
    assert errors[True] < 0.9 * errors[False], errors

def test_linear_reads_noisy_dense_tracks_as_displacements(twin):
    noisy = twin.positions[0] + 1e-3 * np.random.default_rng(2).normal(size=twin.positions[0].shape)
    est = assimilate_linear(noisy, twin.times, twin.release[0], twin.model, LinearConfig(members=2), jax.random.key(0))
    assert est.info["data"] == "displacements" and est.info["noise_source"] == "empirical_bayes"
    assert est.info["lag"] > 1 and len(est.info["eiv_relative_changes"]) == 2


def test_normal_posterior_survives_a_gram_that_rounding_made_indefinite():
    from lagda.assimilation.methods.linear_gaussian import normal_posterior

    gram = np.array([[1.0, 1.0], [1.0, 1.0 - 1e-12]])  # rank one, one eigenvalue rounded below zero
    assert np.linalg.eigvalsh(gram).min() < 0
    prior_var = np.full(2, 1e16)  # I + D^1/2 G D^1/2 is then indefinite as stored
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(np.eye(2) + 1e16 * gram)
    mean, cov = normal_posterior(gram, np.array([2.0, 2.0]), prior_var)
    # the data fix c1 + c2 = 2 (y = G^T-whitened ones): the posterior mean satisfies it, its spread is finite
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))
    assert mean.sum() == pytest.approx(2.0, rel=1e-3)
