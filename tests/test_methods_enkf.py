"""enkf: ES-MDA weights every observation once (exact posterior on a linear-Gaussian twin) and
reduces the error and the spread of its prior ensemble on drifter tracks."""

import jax
import numpy as np

from lagda.assimilation.methods.config import EnkfConfig
from lagda.assimilation.methods.ensemble import (
    assimilate_enkf,
    esmda,
    esmda_update,
    observation_alphas,
)
from lagda.assimilation.methods.observations import arrange, window_mask
from lagda.testing import make_twin

N_MEMBERS = 2000
# Tolerance in iid standard errors. With a gain estimated from the ensemble the ES-MDA
# statistics scatter a little more than those of N iid posterior draws: over 30 seeds of this
# twin the largest deviations were 3.8 (mean) and 2.8 (covariance) iid standard errors.
TOLERANCE = 5.0


def linear_twin(n_state=3, n_obs=6, sigma=0.7):
    """Returns (prior var `(p,)`, H `(m, p)`, sigma, y `(m,)`, exact posterior mean `(p,)` and cov `(p, p)`)."""
    rng = np.random.default_rng(0)
    prior_var = np.array([1.0, 0.5, 2.0])[:n_state]
    h = rng.normal(size=(n_obs, n_state))
    y = h @ (rng.normal(size=n_state) * np.sqrt(prior_var)) + sigma * rng.normal(size=n_obs)
    cov = np.linalg.inv(np.diag(1.0 / prior_var) + h.T @ h / sigma**2)
    return prior_var, h, sigma, y, cov @ h.T @ y / sigma**2, cov


# three stages of a growing window: observations 0-1 enter at stage 0, 2-3 at stage 1, 4-5 at stage 2
MASKS = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.float64)


def prior_ensemble(prior_var, seed=0):
    """Returns N_MEMBERS prior draws `(member, p)`."""
    draws = jax.random.normal(jax.random.key(seed), (N_MEMBERS, len(prior_var)))
    return np.asarray(draws, np.float64) * np.sqrt(prior_var)[None, :]


def whitened_errors(xs, mean, cov):
    """Returns the ensemble mean and covariance errors in iid standard errors, `(p,)` and `(p, p)`.

    With cov = L L^T and N iid posterior draws, sqrt(N) L^-1 (sample mean - mean) has unit
    variance per entry and entry (k, l) of L^-1 (sample cov) L^-T - I has variance (1 + [k = l]) / N.
    """
    n, inv_root = len(xs), np.linalg.inv(np.linalg.cholesky(cov))
    mean_err = np.sqrt(n) * inv_root @ (xs.mean(0) - mean)
    cov_err = (inv_root @ np.cov(xs.T) @ inv_root.T - np.eye(len(mean))) * np.sqrt(n / (1.0 + np.eye(len(mean))))
    return mean_err, cov_err


def test_schedule_weights_every_observation_once():
    twin = make_twin(n_field=1, n_drifter=4, n_obs=100)
    obs = arrange(twin.positions[0], twin.times, twin.release[0], twin.model.dt)
    masks = np.stack([window_mask(obs, f).reshape(-1) for f in EnkfConfig().continuation])
    iterations = 3
    alpha = observation_alphas(masks, iterations)
    total_weight = iterations * np.sum(masks / alpha[None, :], axis=0)  # sum of 1 / alpha over the passes that see j
    np.testing.assert_allclose(total_weight, obs.mask.reshape(-1), rtol=1e-12)
    assert alpha[0] == iterations * len(masks) and alpha[-1] == iterations  # first enters first, last at the end


def test_esmda_update_is_the_perturbed_observation_kalman_update():
    rng = np.random.default_rng(1)
    n, p, m, sigma = 7, 3, 10, 0.3  # fewer members than observations: the ensemble-space branch matters
    xs, predicted = rng.normal(size=(n, p)), rng.normal(size=(n, m))
    observed, eps = rng.normal(size=m), rng.normal(size=(n, m))
    mask, alpha = (rng.random(m) < 0.7).astype(np.float64), rng.uniform(1.0, 5.0, m)
    on = mask > 0
    c_xz = np.cov(xs.T, predicted[:, on].T)[:p, p:]
    c_zz = np.cov(predicted[:, on].T)
    gain = c_xz @ np.linalg.inv(c_zz + sigma**2 * np.diag(alpha[on]))
    perturbed = observed[on] + np.sqrt(alpha[on]) * sigma * eps[:, on]
    expected = xs + (perturbed - predicted[:, on]) @ gain.T
    np.testing.assert_allclose(esmda_update(xs, predicted, observed, mask, sigma, alpha, eps), expected, rtol=1e-10,
                               atol=1e-12)


def test_esmda_over_growing_windows_samples_the_exact_kalman_posterior():
    prior_var, h, sigma, y, mean, cov = linear_twin()
    xs, _, skipped = esmda(prior_ensemble(prior_var), lambda xs, s: xs @ h.T, y, MASKS, sigma, 2, jax.random.key(1))
    mean_err, cov_err = whitened_errors(xs, mean, cov)
    assert skipped == 0
    assert np.max(np.abs(mean_err)) < TOLERANCE, mean_err
    assert np.max(np.abs(cov_err)) < TOLERANCE, cov_err


def test_constant_alpha_over_growing_windows_is_detected():
    """The scheme that weights an observation once per stage that sees it fails the exact-posterior check."""
    prior_var, h, sigma, y, mean, cov = linear_twin()
    xs, iterations, key = prior_ensemble(prior_var), 2, jax.random.key(1)
    for s, mask in enumerate(MASKS):
        for a in range(iterations):
            eps = np.asarray(jax.random.normal(jax.random.fold_in(key, s * iterations + a), (N_MEMBERS, len(y))))
            xs = esmda_update(xs, xs @ h.T, y, mask, sigma, float(iterations), eps)
    mean_err, cov_err = whitened_errors(xs, mean, cov)
    assert max(np.max(np.abs(mean_err)), np.max(np.abs(cov_err))) > 2 * TOLERANCE


def _enkf_twin(noise_std):
    """Returns (twin, config, estimate) of enkf on a 4-drifter twin (shapes shared, so compiled once)."""
    twin = make_twin(n_field=1, n_drifter=4, n_obs=100)
    config = EnkfConfig(members=32, iterations=2, continuation=(0.3, 1.0), noise_std=noise_std)
    return twin, config, assimilate_enkf(twin.positions[0], twin.times, twin.release[0], twin.model, config,
                                         jax.random.key(0))


def test_enkf_reduces_the_error_of_its_prior_ensemble():
    twin, config, est = _enkf_twin(None)
    posterior_error = twin.field_error(est.samples.T @ est.weights, 0)
    prior_error = twin.field_error(np.zeros(9), 0)  # the prior ensemble's mean is the prior mean 0
    assert posterior_error < 0.3 * prior_error
    assert est.info["spread_per_stage"][-1] < 0.5 * np.sqrt(np.mean(twin.model.prior_var))
    assert est.info["sigma"] == config.sigma_floor and est.info["sigma_floored"]
    assert not est.info["noise_std_given"]
    assert est.info["passes"] == 4 and est.info["alpha_min"] == 2.0 and est.info["alpha_max"] == 4.0


def test_enkf_records_a_given_noise_std():
    _, _, est = _enkf_twin(0.01)
    assert est.info["sigma"] == 0.01 and est.info["noise_std_given"] and not est.info["sigma_floored"]
