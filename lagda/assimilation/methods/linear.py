"""`linear`: the closed-form linear-Gaussian posterior of the coefficients from the tracks.

The data (lagda.assimilation.methods.track_data): differenced velocities on dense smooth tracks,
displacements (the path integral of the velocity, whitened against the errors of evaluating the
flow at noisy positions) on noisy dense tracks. The posterior (linear_gaussian) is Gaussian in
closed form with empirical-Bayes noise unless noise_std is given. Its covariance also takes a
posterior-predictive floor: the tracks re-integrated by RK4 from the posterior mean measure the
data error that the residuals cannot show because the coefficients absorbed it (on exact tracks,
the integrator's own error).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods._common import FieldEstimate, FlowModel, arrange, gaussian_estimate, simulate_observed
from lagda.assimilation.methods.config import AssimConfig
from lagda.assimilation.methods.linear_gaussian import linear_posterior
from lagda.assimilation.methods.track_data import (correlation_time, curvature_factor, data_kind, difference_velocities,
                                                    displacement_data,
                                                    observation_regime, track_segments, velocity_data)


def displacement_posterior(positions, times, release, model: FlowModel, config: AssimConfig, prior_mean, prior_var):
    """Returns (mean `(2K,)`, cov `(2K, 2K)`, info) of prior N(prior_mean, diag prior_var) x displacements.

    First under the white displacement model, then config.eiv_iterations times with the
    errors-in-variables whitening (`displacement_data`) linearised at the last mean: a
    fixed-point iteration of the linear-Gaussian update. The position noise variance is
    config.noise_std^2, or empirical Bayes on the whitened data at each pass; the whitened
    passes de-bias the columns by `curvature_factor` at the previous pass's variance
    (config.eiv_curvature).
    """
    segments = track_segments(positions, times, release, model)
    given = config.noise_std**2 if config.noise_std else None
    x, mean, cov, changes, noise_var = None, prior_mean, None, [], None
    for _ in range(1 + config.eiv_iterations):
        a, b = displacement_data(positions, times, release, model, x, segments)
        if x is not None and config.eiv_curvature:
            a = a * curvature_factor(model, given if given else noise_var)[None, :]
        delta, cov, noise_var = linear_posterior(a, b - a @ prior_mean, prior_var, given, config.noise_grid)
        new = prior_mean + delta
        if x is not None:
            changes.append(float(np.linalg.norm(new - mean) / max(np.linalg.norm(mean), 1e-300)))
        x = mean = new
    info = {"data": "displacements", "position_noise_std": float(np.sqrt(noise_var)),
            "noise_source": "given" if given else "empirical_bayes", "eiv_iterations": config.eiv_iterations,
            "eiv_curvature": config.eiv_curvature, "eiv_relative_changes": changes, "observations": len(b)}
    return mean, cov, info


def resimulated_tracks(positions, times, release, model: FlowModel, x) -> np.ndarray:
    """Returns the tracks `(drifter, obs, 2)` re-integrated by RK4 at model.dt from x `(2K,)`.

    Each drifter starts where its observations start (release or first valid point); other
    valid slots hold the simulated positions, invalid ones stay as observed (NaN).
    """
    obs = arrange(positions, times, release, model.dt)
    with jax.enable_x64(True):
        sim = np.asarray(simulate_observed(jnp.asarray(x, jnp.float64), obs.z0, obs.t0, obs.index, model.k1, model.k2,
                                           model.omega, model.dt, obs.n_sim, obs.stride), np.float64)
    return np.where(obs.mask[..., None] > 0, sim, np.asarray(positions, np.float64))


def predictive_noise_floor(positions, times, release, model: FlowModel, config: AssimConfig, regime, y, mean,
                           p_eff: float):
    """Returns (floor, misfit rms): the data noise variance that the absorbed data error implies.

    Errors smooth along the track (RK4 and truncation errors of the differences) are partly
    fitted by the coefficients and vanish from the residuals, so the evidence noise is too
    small. The tracks re-integrated from the mean, turned into data y_sim as the observed ones
    were, have the same difference errors; y_sim - y ~ G (mean - x_true) shows the absorbed
    part. Spread over the p_eff directions the data determine (`velocity_posterior`'s
    "data_dimensions"; expected chi^2 of the coefficient error = p_eff), its noise variance is
    |y_sim - y|^2 / p_eff.
    """
    sim = resimulated_tracks(positions, times, release, model, mean)
    y_sim = difference_velocities(sim, times, release, config, regime)[2].reshape(-1)  # the data only, no G
    misfit = float(np.sum((y_sim - y) ** 2))
    return misfit / max(p_eff, 1.0), float(np.sqrt(misfit / len(y)))


def assimilate_linear(positions, times, release, model: FlowModel, config: AssimConfig, key) -> FieldEstimate:
    """Returns the linear-Gaussian posterior of one field from the tracks' velocities or displacements.

    Args:
        positions: `(drifter, obs, 2)`; times: `(drifter, obs)`; release: `(drifter, 2)` or None.
    Raises:
        ValueError: if no pair of valid observations fd_lag apart exists.
    """
    regime = observation_regime(positions, times, model, config)
    if data_kind(regime, config) == "displacements":
        mean, cov, info = displacement_posterior(positions, times, release, model, config,
                                                 np.zeros(2 * model.n_modes), model.prior_var)
        return gaussian_estimate(key, mean, cov, config.members, {**regime, **info})
    mean, cov, info = track_velocity_posterior(positions, times, release, model, config, regime,
                                               np.zeros(2 * model.n_modes), model.prior_var)
    return gaussian_estimate(key, mean, cov, config.members, info)


def track_velocity_posterior(positions, times, release, model: FlowModel, config: AssimConfig, regime, prior_mean,
                             prior_var):
    """Returns (mean `(2K,)`, cov, info) of N(prior_mean, diag prior_var) x the tracks' difference velocities.

    `velocity_posterior`, then (config.predictive_floor) the covariance at no less than the
    `predictive_noise_floor` of the tracks re-integrated from the mean.
    """
    g, y, noise_var, info = velocity_data(positions, times, release, model, config, regime)
    mean, cov, post_info = velocity_posterior(g, y, prior_mean, prior_var, noise_var, config)
    if config.predictive_floor:
        mean, cov, post_info = floored_velocity_posterior(positions, times, release, model, config, info, g, y,
                                                          (prior_mean, prior_var), mean, cov, post_info)
    return mean, cov, {**info, **post_info}


def floored_velocity_posterior(positions, times, release, model, config, regime, g, y, prior, mean, cov, info):
    """Returns (mean, cov, info) with the covariance at noise max(tau v, `predictive_noise_floor`); the mean is kept."""
    noise_var = info["velocity_noise_std"] ** 2
    floor, misfit = predictive_noise_floor(positions, times, release, model, config, regime, y, mean, info["data_dimensions"])
    cov_noise = max(info["residual_correlation_time"] * noise_var, floor)
    if floor > info["residual_correlation_time"] * noise_var:
        _, cov, _ = linear_posterior(g, y - g @ prior[0], prior[1], cov_noise)
    return mean, cov, {**info, "predictive_noise_floor": floor, "predictive_misfit_rms": misfit,
                       "covariance_noise_source": "predictive" if floor >= cov_noise else "residuals",
                       "covariance_noise_std": float(np.sqrt(cov_noise))}


def velocity_posterior(g, y, prior_mean, prior_var, noise_var, config: AssimConfig):
    """Returns (mean `(2K,)`, cov, info) of N(prior_mean, diag prior_var) x N(y; G x, s^2 I), errors correlated.

    The differences' errors are not white (overlapping pairs share their ends; truncation and
    RK4 errors are smooth along the track), so n correlated data carry the information of
    n / tau white ones. The mean is the white-noise posterior mean at s^2 (given or empirical
    Bayes); the covariance is the posterior covariance at tau s^2, tau the correlation time
    of the residuals y - G mean (`correlation_time`; config.correlated_errors False: tau = 1).
    """
    delta, cov, noise_var = linear_posterior(g, y - g @ prior_mean, prior_var, noise_var, config.noise_grid)
    mean = prior_mean + delta
    # directions the data determine, sum s^2 / (s^2 + v) = p - tr(D^-1 cov) (whitened SVD of G D^1/2)
    p_eff = float(len(prior_var) - np.sum(np.diag(cov) / prior_var))
    tau = correlation_time((y - g @ mean).reshape(-1, 2)) if config.correlated_errors else 1.0
    if tau > 1.0:
        _, cov, _ = linear_posterior(g, y - g @ prior_mean, prior_var, tau * noise_var)
    return mean, cov, {"data": "velocities", "noise_source": "given" if config.noise_std else "empirical_bayes",
                       "velocity_noise_std": float(np.sqrt(noise_var)), "residual_correlation_time": tau,
                       "data_dimensions": p_eff}
