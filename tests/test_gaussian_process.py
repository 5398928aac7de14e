"""The space-time Gaussian process (lagda.assimilation.gaussian_process): its gradient, its fit and its closed
forms."""

from __future__ import annotations

import numpy as np
import pytest

from lagda.assimilation.gaussian_process import (
    Hyper,
    NearestInTime,
    Predictor,
    fit,
    kernel,
    local_km,
    neg_log_likelihood,
    predict,
)


@pytest.mark.parametrize("centre", [True, False])
def test_gradient_matches_finite_differences(centre):
    rng = np.random.default_rng(1)
    x = np.stack([rng.uniform(0, 300, 40), rng.uniform(0, 300, 40), rng.uniform(0, 20, 40)], -1)
    y = np.sin(x[:, 0] / 80.0) * 0.1 + 0.01 * rng.standard_normal(40)
    theta = np.log([90.0, 4.0, 0.02, 0.002])
    _, grad = neg_log_likelihood(theta, [(x, y)], centre)
    step = 1e-6
    numeric = [(neg_log_likelihood(theta + step * e, [(x, y)], centre)[0]
                - neg_log_likelihood(theta - step * e, [(x, y)], centre)[0]) / (2 * step) for e in np.eye(4)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


def test_fit_recovers_a_smooth_field_and_its_noise():
    rng = np.random.default_rng(2)
    field = lambda p: 0.1 + 0.08 * np.sin(2 * np.pi * p[:, 0] / 400.0) * np.cos(2 * np.pi * p[:, 1] / 500.0)
    x = np.stack([rng.uniform(0, 500, 200), rng.uniform(0, 500, 200), rng.uniform(0, 10, 200)], -1)
    y = field(x) + 0.005 * rng.standard_normal(200)
    hyper = fit([(x, y)])
    assert np.sqrt(hyper.n2) == pytest.approx(0.005, rel=0.5)
    g = np.stack(np.meshgrid(np.linspace(50, 450, 9), np.linspace(50, 450, 9)), -1).reshape(-1, 2)
    xs = np.concatenate([g, np.full((len(g), 1), 5.0)], -1)
    mean, std = predict(x, y, xs, hyper)
    assert np.sqrt(np.mean((mean - field(xs)) ** 2)) < 0.1 * np.sqrt(np.mean(field(xs) ** 2))
    assert np.all(std > 0) and np.all(std < 0.02)


def test_two_observations_match_the_closed_form():
    # two points d km apart at one time: the 2x2 posterior written out by hand
    hyper = Hyper(ell_km=50.0, tau_days=2.0, s2=0.04, n2=0.01)
    x = np.array([[0.0, 0.0, 1.0], [30.0, 40.0, 1.0]])  # 50 km apart
    y = np.array([0.2, -0.1])
    xs = np.array([[0.0, 0.0, 2.0], [500.0, 0.0, 1.0]])
    c = hyper.s2 * np.exp(-0.5)  # covariance of the two data
    k = np.array([[hyper.s2, c], [c, hyper.s2]]) + hyper.n2 * np.eye(2)
    ks = hyper.s2 * np.array([[np.exp(-0.125), np.exp(-0.5 - 0.125)], [0.0, 0.0]])  # one day lag: exp(-1/8)
    ks[1] = hyper.s2 * kernel(xs[1:], x, hyper.ell_km, hyper.tau_days)[0]
    mean, std = predict(x, y, xs, hyper, centre=False)
    np.testing.assert_allclose(mean, ks @ np.linalg.solve(k, y), rtol=1e-12)
    np.testing.assert_allclose(std**2, hyper.s2 - np.einsum("ij,ji->i", ks, np.linalg.solve(k, ks.T)), rtol=1e-10)
    assert std[1] == pytest.approx(np.sqrt(hyper.s2), rel=1e-6)  # 500 km away: the prior


def test_local_km_is_true_along_parallels_and_meridian():
    x, y = local_km(np.array([10.0, 11.0]), np.array([60.0, 61.0]), (10.0, 60.0))
    assert x[0] == 0.0 and y[0] == 0.0
    assert y[1] == pytest.approx(6371.0088 * np.pi / 180, rel=1e-12)
    assert x[1] == pytest.approx(6371.0088 * np.pi / 180 * np.cos(np.deg2rad(61.0)), rel=1e-12)


def test_predictions_on_a_lattice_of_days_are_the_pointwise_ones():
    rng = np.random.default_rng(5)
    x = np.stack([rng.uniform(0, 200, 60), rng.uniform(0, 200, 60), rng.uniform(0, 10, 60)], -1)
    y = rng.standard_normal((60, 2)) * 0.05
    gp = Predictor(x, y, Hyper(ell_km=40.0, tau_days=3.0, s2=0.003, n2=1e-4), centre=False)
    xy, days = rng.uniform(0, 200, (7, 2)), np.array([0.5, 4.0, 9.0])
    points = np.concatenate([np.column_stack([xy, np.full(len(xy), d)]) for d in days])
    np.testing.assert_allclose(gp.mean_on(xy, days), gp.mean(points).reshape(3, 7, 2), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gp.std_on(xy, days), gp.std(points).reshape(3, 7), rtol=1e-10)


def test_conditioning_on_the_nearest_in_time_is_the_whole_gp_where_the_rest_is_far():
    # two bursts of data 40 time scales apart: under the squared-exponential kernel the far burst is independent of
    # the near one (exp(-800) = 0), so the GP on the nearest 50 points is the GP on all 100 near each burst; with a
    # cap over the data it is the whole GP everywhere
    rng = np.random.default_rng(6)
    x = np.stack([rng.uniform(0, 200, 100), rng.uniform(0, 200, 100),
                  np.r_[rng.uniform(0, 2, 50), rng.uniform(120, 122, 50)]], -1)
    y = rng.standard_normal((100, 2)) * 0.05
    hyper = Hyper(ell_km=40.0, tau_days=3.0, s2=0.003, n2=1e-4)
    whole = Predictor(x, y, hyper, centre=False)
    xy, days = rng.uniform(0, 200, (7, 2)), np.array([1.0, 121.0])
    nearest = NearestInTime(x, y, hyper, cap=50)
    assert {round(float(t)) for t in nearest.at(1.0).x[:, 2]} <= {0, 1, 2}
    np.testing.assert_allclose(nearest.mean_on(xy, days), whole.mean_on(xy, days), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(nearest.std_on(xy, days), whole.std_on(xy, days), rtol=1e-9)
    every = NearestInTime(x, y, hyper, cap=500)
    days = np.array([1.0, 60.0, 121.0])
    np.testing.assert_allclose(every.mean_on(xy, days), whole.mean_on(xy, days), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(every.std_on(xy, days), whole.std_on(xy, days), rtol=1e-9)
    # both at once, the std on some of the days and other points: the same as each alone
    mean, std = nearest.on_days(xy, days, xy[:3], days[[0, 2]])
    np.testing.assert_array_equal(mean, nearest.mean_on(xy, days))
    np.testing.assert_array_equal(std, nearest.std_on(xy[:3], days[[0, 2]]))
