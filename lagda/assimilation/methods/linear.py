"""`linear`: the closed-form linear-Gaussian posterior of the coefficients from the tracks.

The data (lagda.assimilation.methods.track_data): differenced velocities on dense smooth tracks,
displacements (the path integral of the velocity, whitened against the errors of evaluating the
flow at noisy positions) on noisy dense tracks; with config.representation "ou", differenced
velocities whose error along each track is the velocity of the scales the basis leaves out, an
Ornstein-Uhlenbeck process in time, plus the white noise (`representation_posterior`). The
posterior (linear_gaussian) is Gaussian in closed form with empirical-Bayes noise unless noise_std is given
(config.representation
"auto": "ou" in a chosen basis, "white" in lagda's own model). Its covariance also takes a
posterior-predictive floor: the tracks re-integrated by RK4 from the posterior mean measure the
data error that the residuals cannot show because the coefficients absorbed it (on exact tracks,
the integrator's own error).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods.config import LinearConfig
from lagda.assimilation.methods.linear_gaussian import (
    gaussian_estimate,
    linear_posterior,
    normal_log_evidence,
    normal_posterior,
)
from lagda.assimilation.methods.observations import arrange, simulate_observed
from lagda.assimilation.methods.representation import ou_time_scale, thin_pairs, whiten_tracks
from lagda.assimilation.methods.track_data import (
    correlation_time,
    curvature_factor,
    data_kind,
    difference_velocities,
    displacement_data,
    observation_regime,
    track_segments,
    velocity_data,
)
from lagda.assimilation.model import FlowModel
from lagda.assimilation.posterior import FieldEstimate
from simulate.flow import velocity_basis


def displacement_posterior(positions, times, release, model: FlowModel, config: LinearConfig, prior_mean, prior_var):
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
                                           model.omega, model.dt, obs.n_sim, obs.stride, model.time), np.float64)
    return np.where(obs.mask[..., None] > 0, sim, np.asarray(positions, np.float64))


def predictive_noise_floor(positions, times, release, model: FlowModel, config: LinearConfig, regime, y, mean,
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


def assimilate_linear(positions, times, release, model: FlowModel, config: LinearConfig, key) -> FieldEstimate:
    """Returns the linear-Gaussian posterior of one field from the tracks' velocities or displacements.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)`
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.

    Raises
    ------
    ValueError
        if no pair of valid observations fd_lag apart exists, or for a model with a background (a prior mean
        velocity, `FlowModel.background`) under the white error model: only the error model along the tracks
        (`representation_posterior`) fits the departure from one.
    """
    if model.background is not None and error_model(model, config) != "ou":
        raise ValueError("linear fits the departure from a background with its error model along the tracks only "
                         "(representation 'ou', the default in a chosen basis), not 'white'")
    regime = observation_regime(positions, times, model, config)
    if error_model(model, config) == "ou":
        mean, cov, info = representation_posterior(positions, times, release, model, config, regime,
                                                   np.zeros(2 * model.n_modes), model.prior_var)
        return gaussian_estimate(key, mean, cov, config.members, info)
    if data_kind(regime, config) == "displacements":
        mean, cov, info = displacement_posterior(positions, times, release, model, config,
                                                 np.zeros(2 * model.n_modes), model.prior_var)
        return gaussian_estimate(key, mean, cov, config.members, {**regime, **info})
    mean, cov, info = track_velocity_posterior(positions, times, release, model, config, regime,
                                               np.zeros(2 * model.n_modes), model.prior_var)
    return gaussian_estimate(key, mean, cov, config.members, info)


def error_model(model: FlowModel, config: LinearConfig) -> str:
    """Returns "ou" or "white": config.representation, or for "auto" "ou" in a chosen basis (a time basis: the flow
    has scales the basis leaves out) and "white" in lagda's own model."""
    if config.representation != "auto":
        return config.representation
    return "ou" if model.time is not None else "white"


def track_velocity_posterior(positions, times, release, model: FlowModel, config: LinearConfig, regime, prior_mean,
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
    floor, misfit = predictive_noise_floor(positions, times, release, model, config, regime, y, mean,
                                           info["data_dimensions"])
    cov_noise = max(info["residual_correlation_time"] * noise_var, floor)
    if floor > info["residual_correlation_time"] * noise_var:
        _, cov, _ = linear_posterior(g, y - g @ prior[0], prior[1], cov_noise)
    return mean, cov, {**info, "predictive_noise_floor": floor, "predictive_misfit_rms": misfit,
                       "covariance_noise_source": "predictive" if floor >= cov_noise else "residuals",
                       "covariance_noise_std": float(np.sqrt(cov_noise))}


def velocity_posterior(g, y, prior_mean, prior_var, noise_var, config: LinearConfig):
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


def track_differences(positions, times, release, config: LinearConfig, regime: dict):
    """Returns `difference_velocities` of every drifter, with the drifter of each point: (points, t, vel, span,
    order, gain, track `(n,)`). Drifters without a usable difference are left out.

    Raises
    ------
    ValueError
        if no drifter has one.
    """
    parts = []
    for d in range(np.shape(positions)[0]):
        try:
            out = difference_velocities(positions[d : d + 1], times[d : d + 1],
                                        None if release is None else release[d : d + 1], config, regime)
        except ValueError:
            continue
        parts.append((*out, np.full(len(out[1]), d)))
    if not parts:
        raise ValueError(f"no two valid observations {regime['lag']} apart: cannot form finite differences")
    order, gain = max(p[4] for p in parts), max(p[5] for p in parts)
    return (*(np.concatenate([p[i] for p in parts]) for i in range(4)), order, gain,
            np.concatenate([p[6] for p in parts]))


def _track_chunks(model: FlowModel, points, t, track, chunk: int = 4):
    """Yields (rows, G `(rows, 2, 2K)`) for `chunk` drifters at a time: memory O(chunk points x 2K)."""
    drifters = np.unique(track)
    for lo in range(0, len(drifters), chunk):
        rows = np.flatnonzero(np.isin(track, drifters[lo : lo + chunk]))
        yield rows, velocity_basis(points[rows], t[rows], *model.modes)


def normal_equations(model: FlowModel, points, t, vel, track, error=None):
    """Returns (G^T C^-1 G `(2K, 2K)`, G^T C^-1 y `(2K,)`, y^T C^-1 y), G built a few drifters at a time
    (`_track_chunks`).

    error: (rep_var, tau, noise_var) of the OU + white error covariance C, whitened by
    representation.whiten_tracks; None: C = I (the plain normal equations).
    """
    gram, rhs, yy = np.zeros((2 * model.n_modes, 2 * model.n_modes)), np.zeros(2 * model.n_modes), 0.0
    for rows, g in _track_chunks(model, points, t, track):
        if error is None:
            gw, yw = g.reshape(-1, g.shape[-1]), vel[rows].reshape(-1)
        else:
            gw, yw, _ = whiten_tracks(g, vel[rows], track[rows], t[rows], *error)
        gram += gw.T @ gw
        rhs += gw.T @ yw
        yy += float(yw @ yw)
    return gram, rhs, yy


def track_residuals(model: FlowModel, points, t, vel, track, x) -> np.ndarray:
    """Returns the residual velocities y - G x `(n, 2)` of coefficients x `(2K,)`, G built a few drifters at a time."""
    residuals = np.empty_like(vel)
    for rows, g in _track_chunks(model, points, t, track):
        residuals[rows] = vel[rows] - g @ x
    return residuals


def white_evidence_fit(gram, rhs, yy: float, n: int, prior_var) -> np.ndarray:
    """Returns the posterior mean `(p,)` of y = G x + e, x ~ N(0, D), e ~ N(0, s^2 I) at the s^2 of most evidence,
    from the normal equations only: gram = G^T G, rhs = G^T y, yy = y^T y, n = len(y).

    With D^1/2 G^T G D^1/2 = V diag(l) V^T and z = V^T D^1/2 G^T y: log p(y | s^2) = -(n log s^2
    + sum log(1 + l / s^2) + (yy - sum z^2 / (l + s^2)) / s^2) / 2, maximised over a log grid of s^2.
    """
    root = np.sqrt(prior_var)
    lam, vec = np.linalg.eigh(root[:, None] * gram * root[None, :])
    lam = np.clip(lam, 0.0, None)
    z = vec.T @ (root * rhs)
    grid = float(yy) / n * np.logspace(-12, 0, 97)
    evidence = [-(n * np.log(s2) + np.sum(np.log1p(lam / s2)) + (yy - np.sum(z**2 / (lam + s2))) / s2) for s2 in grid]
    s2 = grid[int(np.argmax(evidence))]
    return root * (vec @ (z / (lam + s2)))


def representation_posterior(positions, times, release, model: FlowModel, config: LinearConfig, regime, prior_mean,
                             prior_var, alternatives=()):
    """Returns (mean `(2K,)`, cov, info) of N(prior_mean, diag prior_var) x the tracks' difference velocities,
    their error an OU process along each track (the representation error) plus white difference noise.

    The scales the basis leaves out move with each drifter: their velocity is an error correlated
    along the track over a Lagrangian time scale, which a white model counts as independent data
    (overconfident, and a mean fitted to the error). Modelled as an OU process of variance
    representation_var and time scale representation_time per component and drifter, plus the
    white noise of the differences (gain sigma^2 / h^2, sigma given or estimated from the tracks),
    the GLS posterior is exact (representation.whiten_tracks). A variance or time scale not given
    is estimated (representation.ou_time_scale) from the residuals of a first fit with white
    errors of empirical-Bayes variance (`white_evidence_fit`), then OU at the estimate. A chosen basis
    without a climatology (model.search) instead takes the prior's spectrum and the error model that
    prior_search.search_prior chooses from the tracks (prior_var unused; its choices in the info).

    alternatives: further priors (mean, var) beside N(prior_mean, diag prior_var) (not with model.search); the one
    of most evidence under the OU + white error model is used (`most_evident`), its index in info["prior_choice"]
    (0: prior_mean, prior_var).

    A model with a background (`FlowModel.background`, a prior mean velocity) has the velocities less the
    background's at the same points and times as its data: the whole fit, the prior's spectrum, the error model and
    the search's guard included, is that of the departure from it (lagda.assimilation.background).
    """
    # lag-1 pairs unless set: the correlated error dominates the noise, and pairs keep every fix (their noise,
    # shared by neighbouring pairs, is taken as white)
    regime = {**regime, "lag": config.fd_lag or 1}
    config = dataclasses.replace(config, fd_order=config.fd_order or 2)
    points, t, vel, span, order, gain, track = track_differences(positions, times, release, config, regime)
    if model.background is not None:  # the one place the observed velocities enter: the departure is fitted
        vel = vel - model.background(points, t)
    sigma = config.noise_std if config.noise_std is not None else regime.get("noise_std_est", 0.0)
    noise_var = gain * sigma**2 / float(np.median(span)) ** 2
    rep_var, tau = config.representation_var, config.representation_time
    sources = {"representation_var_source": "given" if rep_var is not None else "residuals of a first fit",
               "representation_time_source": "given" if tau is not None else "residuals of a first fit"}
    if model.unresolved is not None:  # the climatology's, unless given
        for name, value in zip(("var", "time"), model.unresolved):
            if getattr(config, f"representation_{name}") is None:
                sources[f"representation_{name}_source"] = "the model's climatology"
        rep_var = model.unresolved[0] if rep_var is None else rep_var
        tau = model.unresolved[1] if tau is None else tau
    info = {"data": "velocities", "error_model": "ou", "fd_order": order, **regime,
            "velocity_noise_std": float(np.sqrt(noise_var))}
    if model.search is not None:  # no climatology: the prior's spectrum and the error model from the tracks
        from lagda.assimilation.methods.prior_search import search_prior

        data = track_residuals(model, points, t, vel, track, prior_mean) if np.any(prior_mean) else vel
        delta, cov, _, rep_var, tau, found = search_prior(points, t, data, track, noise_var, model, rep_var, tau)
        return prior_mean + delta, cov, {**info, "pairs": len(t), "representation_std": float(np.sqrt(rep_var)),
                                         "representation_time": float(tau), **sources, **found}
    gram, rhs, yy, system = representation_system(model, config, (points, t, vel, track), noise_var, rep_var, tau,
                                                  prior_mean, prior_var)
    if alternatives:
        choice, evidence = most_evident(gram, rhs, yy, [(prior_mean, prior_var), *alternatives])
        prior_mean, prior_var = ((prior_mean, prior_var), *alternatives)[choice]
        system = {**system, "prior_choice": choice, "prior_log_evidence": evidence}
    delta, cov = normal_posterior(gram, rhs - gram @ prior_mean, prior_var)
    return prior_mean + delta, cov, {**info, **system, **sources}


def most_evident(gram, rhs, yy: float, priors) -> tuple[int, list[float]]:
    """Returns (index, log evidences) of the prior (mean `(p,)`, var `(p,)`) that whitened data, given by its normal
    equations gram, rhs, yy, support best: log N(y; G m, I + G D G^T) up to a constant shared by all priors."""
    evidence = []
    for mean, var in priors:
        shifted = rhs - gram @ mean
        yy_m = yy - 2 * rhs @ mean + mean @ gram @ mean  # |y - G m|^2
        evidence.append(normal_log_evidence(gram, shifted, yy_m, var) - 0.5 * yy_m)
    return int(np.argmax(evidence)), [float(e) for e in evidence]


def representation_system(model: FlowModel, config: LinearConfig, pairs, noise_var: float, rep_var, tau, prior_mean,
                          prior_var):
    """Returns (gram, rhs, yy, info): the normal equations of the velocity pairs whitened against the OU + white error.

    pairs: (points, t, vel, track) of `track_differences`. A variance or time scale given as None is estimated
    (representation.ou_time_scale) from the residuals of a first fit under N(prior_mean, diag prior_var) with white
    errors of empirical-Bayes variance (`white_evidence_fit`). The pairs are thinned to config.ou_spacing tau apart.
    """
    points, t, vel, track = pairs
    if rep_var is None or tau is None:
        gram, rhs, yy = normal_equations(model, points, t, vel, track)
        yy = yy - 2 * rhs @ prior_mean + prior_mean @ gram @ prior_mean  # |y - G prior_mean|^2
        first = prior_mean + white_evidence_fit(gram, rhs - gram @ prior_mean, yy, vel.size, prior_var)
        est_var, est_tau = ou_time_scale(track_residuals(model, points, t, vel, track, first), t, track)
        rep_var = rep_var if rep_var is not None else max(est_var - noise_var, 1e-3 * est_var)
        tau = tau if tau is not None else est_tau
    keep = thin_pairs(t, track, config.ou_spacing * tau)
    gram, rhs, yy = normal_equations(model, points[keep], t[keep], vel[keep], track[keep], (rep_var, tau, noise_var))
    return gram, rhs, yy, {"pairs": len(t), "pairs_used": len(keep), "pair_spacing": config.ou_spacing * tau,
                           "representation_std": float(np.sqrt(rep_var)), "representation_time": float(tau)}
