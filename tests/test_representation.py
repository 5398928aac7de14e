"""representation: the Kalman whitening of OU + white errors against the dense GLS, its limits, the OU fit."""

import numpy as np
import pytest

from lagda.assimilation.methods.representation import (
    ou_time_scale,
    thin_pairs,
    whiten_series,
    whiten_tracks,
)

REP_VAR = 0.7


def _problem(seed=0, sizes=(5, 7, 6), p=4):
    """Returns g (n, 2, p), y (n, 2), track (n,), times (n,): irregular times, a gap in track 1, interleaved order."""
    rng = np.random.default_rng(seed)
    track = np.repeat(np.arange(len(sizes)) * 3 + 2, sizes)  # ids 2, 5, 8
    steps = rng.uniform(0.05, 0.3, len(track))
    steps[sizes[0] + 3] += 2.0  # a gap
    times = np.concatenate([np.cumsum(steps[track == k]) for k in np.unique(track)])
    perm = rng.permutation(len(track))
    return rng.normal(size=(len(track), 2, p))[perm], rng.normal(size=(len(track), 2))[perm], track[perm], times[perm]


def _dense_cov(track, times, tau, noise_var):
    """Returns Cov `(2n, 2n)` of the errors in the order of y.reshape(-1): (point, component)."""
    same = track[:, None] == track[None, :]
    ou = REP_VAR * np.exp(-np.abs(times[:, None] - times[None, :]) / tau) + noise_var * np.eye(len(track))
    return np.einsum("ab,cd->acbd", same * ou, np.eye(2)).reshape(2 * len(track), 2 * len(track))


@pytest.mark.parametrize("tau, noise_var", [(0.3, 0.05), (0.3, 0.0), (np.inf, 0.05), (4.0, 1e-3)])
def test_whitening_matches_dense_gls(tau, noise_var):
    g, y, track, times = _problem()
    g_white, y_white, log_det = whiten_tracks(g, y, track, times, REP_VAR, tau, noise_var)
    assert g_white.shape == (2 * len(y), g.shape[2]) and y_white.shape == (2 * len(y),)
    cov = _dense_cov(track, times, tau, noise_var)
    gd, yd = g.reshape(2 * len(y), -1), y.reshape(-1)
    for x in np.random.default_rng(1).normal(size=(3, g.shape[2])):
        res, res_white = yd - gd @ x, y_white - g_white @ x
        assert np.isclose(res_white @ res_white, res @ np.linalg.solve(cov, res), rtol=1e-10)
    sign, logdet = np.linalg.slogdet(cov)
    assert sign > 0 and np.isclose(log_det, logdet, rtol=1e-10)
    gls = np.linalg.solve(gd.T @ np.linalg.solve(cov, gd), gd.T @ np.linalg.solve(cov, yd))
    assert np.allclose(np.linalg.lstsq(g_white, y_white, rcond=None)[0], gls, rtol=1e-9, atol=1e-12)


def test_limits_white_and_ar1():
    rng = np.random.default_rng(2)
    data, times = rng.normal(size=(3, 9, 2)), np.cumsum(rng.uniform(0.1, 0.5, (3, 9)), axis=1)
    valid = np.ones(times.shape, bool)
    for tau in (0.0, 1e-12):  # white: plain scaling
        white, log_det = whiten_series(data, times, valid, REP_VAR, tau, 0.2)
        assert np.allclose(white, data / np.sqrt(REP_VAR + 0.2), rtol=1e-12)
        assert np.isclose(log_det, data.shape[0] * data.shape[1] * np.log(REP_VAR + 0.2))
    tau = 0.4  # no noise: AR(1) prewhitening
    white, _ = whiten_series(data, times, valid, REP_VAR, tau, 0.0)
    phi = np.exp(-np.diff(times, axis=1) / tau)[..., None]
    assert np.allclose(white[:, 0], data[:, 0] / np.sqrt(REP_VAR), rtol=1e-12)
    assert np.allclose(white[:, 1:], (data[:, 1:] - phi * data[:, :-1]) / np.sqrt(REP_VAR * (1 - phi**2)), rtol=1e-10)


def test_input_order_and_invalid_entries():
    g, y, track, times = _problem(3)
    order = np.lexsort((times, track))
    x = np.random.default_rng(4).normal(size=g.shape[2])
    forms = []
    for idx in (order, np.arange(len(y))):  # sorted, interleaved
        g_white, y_white, log_det = whiten_tracks(g[idx], y[idx], track[idx], times[idx], REP_VAR, 0.3, 0.05)
        forms.append((np.sum((y_white - g_white @ x) ** 2), log_det))
    assert np.allclose(forms[0], forms[1], rtol=1e-12)
    # invalid entries of a series are skipped: the same as the series without them
    data, t = np.random.default_rng(5).normal(size=(1, 8, 3)), np.cumsum(np.full((1, 8), 0.2), axis=1)
    valid = np.array([[True, False, True, True, False, False, True, True]])
    white, log_det = whiten_series(np.where(valid[..., None], data, np.nan), t, valid, REP_VAR, 0.5, 0.1)
    kept, kept_log_det = whiten_series(data[:, valid[0]], t[:, valid[0]], np.ones((1, 5), bool), REP_VAR, 0.5, 0.1)
    assert np.allclose(white[:, valid[0]], kept, rtol=1e-12) and np.all(white[:, ~valid[0]] == 0)
    assert np.isclose(log_det, kept_log_det, rtol=1e-12)


def test_ou_time_scale_recovers_tau():
    rng = np.random.default_rng(6)
    tracks, steps, h, tau, var = 4, 2000, 0.5, 3.0, 2.0
    phi = np.exp(-h / tau)
    r = np.empty((tracks, steps, 2))
    r[:, 0] = rng.normal(scale=np.sqrt(var), size=(tracks, 2))
    kicks = rng.normal(scale=np.sqrt(var * (1 - phi**2)), size=(tracks, steps, 2))
    for i in range(1, steps):
        r[:, i] = phi * r[:, i - 1] + kicks[:, i]
    times = np.arange(steps) * h + rng.uniform(0, 10, (tracks, 1))
    track = np.repeat(np.arange(tracks), steps)
    perm = rng.permutation(tracks * steps)
    est_var, est_tau = ou_time_scale(r.reshape(-1, 2)[perm], times.reshape(-1)[perm], track[perm])
    assert abs(est_tau / tau - 1) < 0.15 and abs(est_var / var - 1) < 0.15


def test_constant_error_needs_noise():
    g, y, track, times = _problem()
    with pytest.raises(ValueError, match="noise_var > 0"):
        whiten_tracks(g, y, track, times, REP_VAR, np.inf, 0.0)


def test_thin_pairs_keeps_each_tracks_first_then_one_per_spacing():
    # two tracks, shuffled; spacing 1: greedy in time from each track's first point
    t = np.array([0.0, 0.4, 1.0, 1.1, 2.05, 2.5, 3.05, 5.0, 5.99, 6.0, 7.5])  # 3.05: the spacing exactly
    track = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    order = np.random.default_rng(0).permutation(len(t))
    kept = thin_pairs(t[order], track[order], 1.0)
    assert sorted(t[order][kept].tolist()) == [0.0, 1.0, 2.05, 3.05, 5.0, 6.0, 7.5]
    assert len(thin_pairs(t, track, 0.0)) == len(t)  # spacing 0: every pair


def test_most_evident_prior_scores_each_prior_by_its_exact_marginal_likelihood():
    # whitened data y = G x + e, e ~ N(0, I): the evidence of the prior N(m, diag V) is N(y; G m, I + G V G^T); the
    # scores of `most_evident` differ between priors exactly as those log densities do
    from scipy.stats import multivariate_normal

    from lagda.assimilation.methods.linear import most_evident

    rng = np.random.default_rng(4)
    g = rng.normal(size=(30, 5))
    m_true, v_true = rng.normal(size=5), np.full(5, 0.3)
    y = g @ (m_true + np.sqrt(v_true) * rng.normal(size=5)) + rng.normal(size=30)
    priors = [(np.zeros(5), np.full(5, 4.0)), (m_true, v_true), (m_true, np.full(5, 1e-4)), (-m_true, v_true)]
    choice, scores = most_evident(g.T @ g, g.T @ y, float(y @ y), priors)
    exact = [multivariate_normal(g @ m, np.eye(30) + g @ np.diag(v) @ g.T).logpdf(y) for m, v in priors]
    np.testing.assert_allclose(np.diff(scores), np.diff(exact), rtol=1e-10, atol=1e-9)
    assert choice == int(np.argmax(exact)) == 1
