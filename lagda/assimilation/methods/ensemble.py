"""`enkf`: ensemble Kalman inversion of the coefficients (ES-MDA over growing windows).

Following Kuznetsov, Ide & Jones (2003) the unknowns are augmented with the drifter
positions; here in the smoother / inversion form: the state x = (Re c, Im c) is the only
unknown and the positions are the (nonlinear) observation operator z(x), RK4 from the
release as in 4D-Var. Ensemble smoother with multiple data assimilation (Emerick & Reynolds
2013). The window grows as in 4D-Var (EnkfConfig.continuation), so that the ensemble
linearisation holds while the tracks are short; each stage makes `iterations` passes
    x_i <- x_i + C_xz (C_zz + R_a)^-1 (y + R_a^{1/2} eps_i - z(x_i)),
R_a = sigma^2 diag(alpha_j) over the observations j in the stage's window,
sigma = max(noise_std, sigma_floor), eps_i ~ N(0, I) (perturbed observations).
Observation j is seen by every pass of every stage whose window holds it; its inflation
alpha_j is the number of those passes, so sum 1 / alpha_j = 1 over them: each observation
enters with total weight one. For a linear observation operator and a Gaussian prior the
final ensemble then samples the exact posterior as the ensemble grows; it is returned as the
posterior samples. The gain is formed in ensemble space (a thin SVD of the N x m whitened
predicted anomalies). An ensemble not much larger than the 2K unknowns collapses on long
tracks (its spread falls far below its error): sampling noise in the gain.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods.config import EnkfConfig
from lagda.assimilation.methods.observations import (
    arrange,
    simulate_observed,
    window_mask,
)
from lagda.assimilation.model import FlowModel, to_complex
from lagda.assimilation.posterior import FieldEstimate


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def ensemble_positions(xs, z0, t0, index, k1, k2, omega, time, dt, n_sim: int, stride: int):
    """Returns simulated positions at the observation slots `(member, drifter, obs, 2)` for xs `(member, 2K)`."""
    one = lambda x: simulate_observed(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride, time)  # noqa: E731
    return jax.lax.map(one, xs, batch_size=16)


def observation_alphas(masks, iterations: int) -> np.ndarray:
    """Returns the per-observation inflation alpha `(m,)` for stage masks `(stage, m)` of 0/1.

    alpha_j = iterations * (stages whose window holds j), the number of passes that see j,
    so the passes give j total weight sum 1 / alpha_j = 1. Observations no stage sees get 1.
    """
    seen = np.sum(np.asarray(masks) > 0, axis=0)
    return iterations * np.maximum(seen, 1).astype(np.float64)


def esmda_update(xs, predicted, observed, mask, sigma: float, alpha, eps) -> np.ndarray:
    """Returns the ES-MDA analysis ensemble `(member, p)` for the error covariance sigma^2 diag(alpha).

    Parameters
    ----------
    xs
        `(member, p)`
    predicted
        `(member, m)` z(x_i)
    observed
        `(m,)`
    mask
        `(m,)` 0/1
    alpha
        `(m,)` per-observation inflation (or a scalar)
    eps
        `(member, m)` standard normal.
    """
    n = xs.shape[0]
    alpha = np.broadcast_to(np.asarray(alpha, np.float64), observed.shape)
    whiten = np.sqrt(mask / alpha) / sigma  # R_a^{-1/2} on the window, 0 outside it
    anomalies = (xs - xs.mean(0)) / np.sqrt(n - 1)
    pred_anom = (predicted - predicted.mean(0)) * whiten[None, :] / np.sqrt(n - 1)
    innovation = (observed[None, :] + np.sqrt(alpha) * sigma * eps - predicted) * whiten[None, :]
    # with whitened S: S^T (S S^T + I)^-1 = (I + S^T S)^-1 S^T = U diag(s / (1 + s^2)) V^T for S^T = U diag(s) V^T
    u, s, vt = np.linalg.svd(pred_anom, full_matrices=False)
    weights = (u * (s / (1.0 + s**2))[None, :]) @ (vt @ innovation.T)  # (member, member)
    return xs + (anomalies.T @ weights).T


def esmda(xs, forward, observed, masks, sigma: float, iterations: int, key):
    """Returns (ensemble `(member, p)`, spread per stage, member-passes skipped as non-finite).

    Runs `iterations` ES-MDA passes per stage with the alphas of `observation_alphas`.

    Parameters
    ----------
    xs
        `(member, p)` prior ensemble; forward(xs, stage) -> `(member, m)` predictions
    observed
        `(m,)`
    masks
        `(stage, m)` 0/1 windows
    key
        jax key of the perturbations.
    """
    alpha = observation_alphas(masks, iterations)
    spread, skipped = [], 0
    for s, mask in enumerate(masks):
        for a in range(iterations):
            predicted = np.asarray(forward(xs, s), np.float64)
            eps = np.asarray(jax.random.normal(jax.random.fold_in(key, s * iterations + a), predicted.shape),
                             np.float64)
            ok = np.all(np.isfinite(predicted), axis=1)  # a blown-up member is left out of the statistics and stays
            skipped += int(np.sum(~ok))
            if np.sum(ok) >= 2:
                xs = xs.copy()
                xs[ok] = esmda_update(xs[ok], predicted[ok], observed, mask, sigma, alpha, eps[ok])
        spread.append(float(np.sqrt(np.mean(xs.var(0)))))
    return xs, spread, skipped


def assimilate_enkf(positions, times, release, model: FlowModel, config: EnkfConfig, key) -> FieldEstimate:
    """Returns the ES-MDA ensemble (config.members equal-weight samples) for one field.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.
    """
    obs = arrange(positions, times, release, model.dt)
    noise_std = config.noise_std or 0.0
    sigma = max(noise_std, config.sigma_floor)
    key_prior, key_noise = jax.random.split(key)
    n = config.members
    xs = (np.asarray(jax.random.normal(key_prior, (n, 2 * model.n_modes)), np.float64)
          * np.sqrt(model.prior_var)[None, :])
    modes = (jnp.asarray(model.k1), jnp.asarray(model.k2), jnp.asarray(model.omega), model.time)
    windows = [window_mask(obs, fraction) for fraction in config.continuation]
    masks = np.stack([np.repeat(w.reshape(-1), 2) for w in windows])  # both coordinates of each position
    stages = []
    for w in windows:
        n_sim = int(np.max(np.where(w > 0, obs.index, 0))) + 1
        stages.append((jnp.asarray(np.minimum(obs.index, n_sim - 1)), n_sim))

    def forward(xs, s):
        index, n_sim = stages[s]
        return np.asarray(ensemble_positions(jnp.asarray(xs), jnp.asarray(obs.z0), jnp.asarray(obs.t0), index,
                                             *modes, model.dt, n_sim, obs.stride)).reshape(len(xs), -1)

    xs, spread, skipped = esmda(xs, forward, obs.target.reshape(-1), masks, sigma, config.iterations, key_noise)
    alpha = observation_alphas(masks, config.iterations)[np.max(masks, axis=0) > 0]
    info = {"sigma": sigma, "noise_std_given": config.noise_std is not None,
            "sigma_floored": noise_std < config.sigma_floor, "passes": len(masks) * config.iterations,
            "iterations_per_stage": config.iterations, "stages": [float(f) for f in config.continuation],
            "alpha_min": float(alpha.min()), "alpha_max": float(alpha.max()),
            "spread_per_stage": spread, "nonfinite_member_passes": skipped}
    return FieldEstimate(to_complex(xs), np.full(n, 1.0 / n), info=info)
