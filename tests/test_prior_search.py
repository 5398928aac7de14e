"""The no-climatology prior and error model of a chosen basis (lagda.assimilation.methods.prior_search)."""

import numpy as np
import pytest

from lagda.assimilation.methods import prior_search
from lagda.assimilation.methods.linear_gaussian import (
    log_evidence,
    normal_log_evidence,
    normal_posterior,
    rows_log_evidence,
    rows_posterior_mean,
)
from lagda.assimilation.methods.prior_search import (
    PriorSearch,
    _Whitened,
    climb,
    fit_shape,
    log_spectrum_features,
    search_prior,
)
from lagda.assimilation.methods.representation import track_series
from lagda.assimilation.model import flow_model
from simulate.flow import circular_modes, in_time, velocity_basis
from simulate.qg.projection import with_current

T_END = 40.0  # model time = days here (PriorSearch(day=1))


def _model(k_max=4, degree=1, **search):
    """Returns a circular basis with the current, Legendre 0..degree over [0, T_END], and a PriorSearch."""
    c1, c2, current = with_current(*circular_modes(k_max))
    e1, e2, omega, time = in_time(c1, c2, np.zeros(len(c1)), degree, 0.0, T_END, current)
    return flow_model(e1, e2, omega, np.ones(len(e1)), 1.0, time, search=PriorSearch(1.0, **search))


def _ou(rng, n_track, n_obs, h, var, tau):
    """Returns an OU process `(n_track, n_obs, 2)` of variance var and time scale tau on steps h."""
    phi = np.exp(-h / tau)
    e = np.empty((n_track, n_obs, 2))
    e[:, 0] = rng.normal(size=(n_track, 2)) * np.sqrt(var)
    for i in range(1, n_obs):
        e[:, i] = phi * e[:, i - 1] + rng.normal(size=(n_track, 2)) * np.sqrt(var * (1 - phi**2))
    return e


def _tracks(model, x, rng, n_track=24, n_obs=80, var=0.05, tau=2.0, noise_var=1e-4):
    """Returns (points `(n, 2)`, t, vel `(n, 2)`, track) of random-walk tracks seeing G x + OU + white noise."""
    h = T_END / n_obs
    t = np.tile((np.arange(n_obs) + 0.5) * h, (n_track, 1))
    walk = rng.uniform(size=(n_track, 1, 2)) + np.cumsum(rng.normal(size=(n_track, n_obs, 2)) * 0.02, axis=1)
    g = velocity_basis(walk % 1.0, t, *model.modes)
    vel = (g @ x if x is not None else 0.0) + _ou(rng, n_track, n_obs, h, var, tau)
    vel = vel + rng.normal(size=vel.shape) * np.sqrt(noise_var)
    track = np.repeat(np.arange(n_track), n_obs)
    return (walk % 1.0).reshape(-1, 2), t.ravel(), vel.reshape(-1, 2), track


def _truth(model, rng, theta):
    """Returns (x, prior_var) drawn from the log-spectrum prior theta (the current of variance 1)."""
    features, offset = log_spectrum_features(model, 1.0)
    prior_var = np.exp(features @ theta + offset)
    return rng.normal(size=len(prior_var)) * np.sqrt(prior_var), prior_var


def test_normal_log_evidence_matches_the_svd_evidence_and_its_gradient():
    rng = np.random.default_rng(0)
    g, y, d = rng.normal(size=(60, 12)), rng.normal(size=60), np.exp(rng.normal(size=12))
    ratio, grad = normal_log_evidence(g.T @ g, g.T @ y, float(y @ y), d, gradient=True)
    assert ratio == pytest.approx(log_evidence(g, y, d, 1.0) + 0.5 * float(y @ y), rel=1e-10)
    eps = 1e-6
    numeric = [(normal_log_evidence(g.T @ g, g.T @ y, 0.0, d * np.exp(eps * e)) - ratio) / eps for e in np.eye(12)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_the_evidence_and_mean_from_fewer_rows_than_unknowns_are_the_normal_equations_ones():
    rng = np.random.default_rng(3)
    g, y, d = rng.normal(size=(12, 60)), rng.normal(size=12), np.exp(rng.normal(size=60))
    ratio, grad = rows_log_evidence(g, y, d, gradient=True)
    # the closed form (an SVD of G D^1/2 at unit noise), and the same quantity from G^T G in the unknowns' space
    assert ratio == pytest.approx(log_evidence(g, y, d, 1.0) + 0.5 * float(y @ y), rel=1e-10)
    normal, normal_grad = normal_log_evidence(g.T @ g, g.T @ y, float(y @ y), d, gradient=True)
    assert ratio == pytest.approx(normal, rel=1e-10)
    np.testing.assert_allclose(grad, normal_grad, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(rows_posterior_mean(g, y, d), normal_posterior(g.T @ g, g.T @ y, d)[0], rtol=1e-9)


def test_whitened_folds_with_fewer_rows_than_unknowns_answer_as_their_normal_equations():
    rng = np.random.default_rng(4)
    model = _model(k_max=4, degree=1)
    points, t, vel, track = _tracks(model, None, rng, n_track=6, n_obs=6)
    g = velocity_basis(points, t, *model.modes)
    folds = [np.flatnonzero(track % 3 == f) for f in range(3)]
    whitened = _Whitened.build([track_series(g[f], vel[f], track[f], t[f]) for f in folds], (0.05, 2.0, 1e-4))
    assert whitened.dual  # 72 rows, 100 unknowns
    grams = [gw.T @ gw for gw, _ in whitened.rows]
    rhss = [gw.T @ yw for gw, yw in whitened.rows]
    prior_var = np.exp(rng.normal(size=g.shape[-1]))
    assert whitened.log_evidence(prior_var) == pytest.approx(
        normal_log_evidence(sum(grams), sum(rhss), whitened.yy, prior_var), rel=1e-10)
    without_first = normal_posterior(grams[1] + grams[2], rhss[1] + rhss[2], prior_var, covariance=False)[0]
    np.testing.assert_allclose(whitened.mean(prior_var, leave_out=0), without_first, rtol=1e-8, atol=1e-10)
    mean, cov = whitened.posterior(prior_var)
    np.testing.assert_allclose(mean, whitened.mean(prior_var), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(cov, normal_posterior(sum(grams), sum(rhss), prior_var)[1], rtol=1e-8, atol=1e-9)


def test_fitted_log_spectrum_recovers_a_known_spectrum():
    rng = np.random.default_rng(1)
    model = _model(k_max=5, degree=1)
    theta = np.array([-7.0, -8.0, -3.0, -0.5])  # a_0, a_1, b, c
    x, prior_var = _truth(model, rng, theta)
    points, t, vel, track = _tracks(model, x, rng, var=1e-3)
    features, offset = log_spectrum_features(model, 1.0)
    whitened = _Whitened.build([track_series(velocity_basis(points, t, *model.modes), vel, track, t)],
                               (1e-3, 2.0, 1e-4))
    fitted, ratio = fit_shape(whitened, features, offset, np.array([-6.0, -6.0, -4.0, 0.0]))
    assert ratio > 0
    # the amplitude per degree within a factor 1.5 of the truth's (a few hundred coefficients of each)
    np.testing.assert_allclose(fitted[:2], theta[:2], atol=np.log(1.5))
    assert abs(fitted[2] - theta[2]) < 1.0


@pytest.mark.parametrize("true_tau", [1.0, 8.0])
def test_cross_validation_picks_the_true_error_model(true_tau):
    rng = np.random.default_rng(2)
    model = _model(k_max=3, degree=1, taus_days=(1.0, 8.0), var_fractions=(0.5,), folds=4, spacing_days=0.0)
    x, _ = _truth(model, rng, np.array([-5.0, -6.0, -3.0, 0.0]))
    points, t, vel, track = _tracks(model, x, rng, n_track=32, var=0.5, tau=true_tau)
    # the OU variance given (the truth's); the time scale chosen between 1 and 8 days
    mean, _, _, _, tau, info = search_prior(points, t, vel, track, 1e-4, model, rep_var=0.5)
    assert tau == true_tau
    assert info["representation_time_source"] == "cross-validation"
    assert info["cv_ratio"] < 1 and not info["zero_guard"]
    cvs = {row["tau_days"]: row["cv_ratio"] for row in info["error_model_table"]}
    assert cvs[true_tau] == min(cvs.values())
    if true_tau == 8.0:  # one drifter: nothing to hold out, the error model by the evidence, and said so
        one = track == track[0]
        info = search_prior(points[one], t[one], vel[one], track[one], 1e-4, model)[-1]
        assert info["cv_folds"] == 1 and np.isnan(info["cv_ratio"])
        assert info["representation_time_source"] == "evidence (one drifter: none to hold out)"


def test_zero_guard_on_tracks_without_signal():
    rng = np.random.default_rng(3)
    model = _model(k_max=3, degree=1, taus_days=(2.0,), var_fractions=(0.5, 1.0), folds=4, spacing_days=0.0)
    points, t, vel, track = _tracks(model, None, rng, n_track=16, var=1.0, tau=2.0)
    mean, cov, prior_var, _, _, info = search_prior(points, t, vel, track, 1e-4, model)
    assert info["zero_guard"] and "prior mean (zero)" in info["zero_guard_note"]
    assert np.all(mean == 0) and np.allclose(np.diag(cov), prior_var)


@pytest.mark.parametrize("minimum", [0, 1, 2, 3, 4])
def test_climb_finds_the_minimum_of_a_unimodal_grid_without_trying_the_far_side(minimum):
    grid = (1.0, 2.0, 4.0, 8.0, 16.0)
    tried = []

    def objective(x):
        tried.append(x)
        return (np.log2(x) - minimum) ** 2

    assert climb(grid, objective) == grid[minimum]
    # from the middle (index 2): its left neighbour, then onwards while the objective falls; never both ends
    expected = {0: {0, 1, 2}, 1: {0, 1, 2}, 2: {1, 2, 3}, 3: {1, 2, 3, 4}, 4: {1, 2, 3, 4}}[minimum]
    assert set(tried) == {grid[i] for i in expected} and len(tried) == len(expected)


@pytest.mark.parametrize("minimum", [0.0, 1.4, 2.0, 2.7, 4.0])
def test_climb_refined_lands_on_the_minimum_of_a_parabola_in_log_grid(minimum):
    """The CV ratio near its least is about a parabola in log variance: the refined climb finds its minimum between
    grid points (exactly, for an exact parabola), with one evaluation more, and none at the grid's ends."""
    grid = (1.0, 2.0, 4.0, 8.0, 16.0)
    tried = {True: [], False: [], None: []}

    def objective(x, refine):
        tried[refine].append(x)
        return 0.8 + 0.01 * (np.log2(x) - minimum) ** 2

    found = climb(grid, lambda x: objective(x, True), refine=True)
    plain = climb(grid, lambda x: objective(x, False))
    assert tried[True][: len(tried[False])] == tried[False]  # the same descent first
    if minimum in (0.0, 4.0):  # at an end: the grid point, nothing more tried
        assert found == plain == 2.0**minimum and len(tried[True]) == len(tried[False])
    else:
        assert found == pytest.approx(2.0**minimum, rel=1e-9) and tried[True][len(tried[False]):] == [found]
        assert objective(found, None) <= objective(plain, None)


def test_climb_refined_moves_continuously_through_a_near_tie():
    """Two grid points nearly tied (the CV ratio of the data a few fixes apart): the plain climb jumps between them,
    the refined one moves a little."""
    grid = (0.5, 1.0, 2.0, 4.0)
    picks = {}
    for tilt in (-1e-4, 1e-4):
        objective = lambda x, tilt=tilt: (np.log2(x) - 0.5) ** 2 + tilt * np.log2(x)
        picks[tilt] = climb(grid, objective), climb(grid, objective, refine=True)
    assert {picks[-1e-4][0], picks[1e-4][0]} == {1.0, 2.0}  # a jump by a factor 2
    assert picks[-1e-4][1] / picks[1e-4][1] == pytest.approx(1.0, abs=1e-3)  # 2^0.5 both times, to 1e-4 x log 2


def _spiked(vel, n_obs, drifters, size):
    """Returns vel `(n, 2)` with one position fix displaced at the middle of each drifter in `drifters`: the lag-1
    velocities into and out of that fix off by +size and -size `(2,)`."""
    vel = vel.copy()
    for d in drifters:
        i = d * n_obs + n_obs // 2
        vel[i - 1] += size
        vel[i] -= size
    return vel


def _robust_case():
    """Returns (model, x, (points, t, vel, track)): a low-mode flow, 16 drifters of 80 points, one error model."""
    rng = np.random.default_rng(5)
    model = _model(k_max=3, degree=1, taus_days=(2.0,), var_fractions=(0.1,), folds=4, spacing_days=0.0)
    x, _ = _truth(model, rng, np.array([-5.0, -6.0, -3.0, 0.0]))
    return model, x, _tracks(model, x, rng, n_track=16, var=0.05, tau=2.0)


def test_clean_tracks_leave_no_velocity_out_and_the_answer_unchanged(monkeypatch):
    model, x, (points, t, vel, track) = _robust_case()
    mean, cov, _, _, _, info = search_prior(points, t, vel, track, 1e-4, model)
    assert info["velocity_outliers_dropped"] == 0 and "velocity_outliers_note" not in info
    monkeypatch.setattr(prior_search, "OUTLIER_K", np.inf)  # the plain Gaussian search
    gaussian, gaussian_cov, _, _, _, plain = search_prior(points, t, vel, track, 1e-4, model)
    np.testing.assert_array_equal(mean, gaussian)
    np.testing.assert_array_equal(cov, gaussian_cov)
    assert info["cv_ratio"] == plain["cv_ratio"]


def test_fixes_a_few_kilometres_off_are_left_out_instead_of_zeroing_the_answer(monkeypatch):
    model, x, (points, t, vel, track) = _robust_case()
    error = lambda mean: np.linalg.norm(mean - x) / np.linalg.norm(x)
    clean = search_prior(points, t, vel, track, 1e-4, model)[0]
    # 4 fixes off their track: hops of 30 x the velocities' RMS, as a fix 5 km off in hourly data of 0.2 m/s
    spiked = _spiked(vel, 80, [1, 6, 9, 13], 30 * np.sqrt(np.mean(vel**2)) * np.array([0.6, 0.8]))
    mean, _, _, _, _, info = search_prior(points, t, spiked, track, 1e-4, model)
    assert info["velocity_outliers_dropped"] == 8  # both velocities of each displaced fix, nothing else
    assert "8 of 1280 velocities left out as outliers" in info["velocity_outliers_note"]
    assert not info["zero_guard"] and info["cv_ratio"] < 0.1
    assert error(mean) < 1.5 * error(clean) < 0.1
    monkeypatch.setattr(prior_search, "OUTLIER_K", np.inf)  # the plain Gaussian search: the spikes zero the answer
    gaussian, _, _, _, _, plain = search_prior(points, t, spiked, track, 1e-4, model)
    assert plain["zero_guard"] and plain["cv_ratio"] >= 1 and np.all(gaussian == 0)


def test_drifters_that_never_move_are_refused_in_words():
    """Every velocity zero (drifters aground, or a file of one position per drifter): no scale for the prior, so no
    search (it took the log of zero and ended in a linear-algebra error about NaNs)."""
    model = _model()
    points, t, vel, track = _tracks(model, None, np.random.default_rng(5), n_track=4, n_obs=10)
    with pytest.raises(ValueError, match=r"^no drifter moves between its fixes \(every velocity is zero\)"):
        search_prior(points, t, np.zeros_like(vel), track, 1e-4, model)
