"""`enkf`: ensemble Kalman inversion of the coefficients (ES-MDA over growing windows).

Following Kuznetsov, Ide & Jones (2003) the unknowns are augmented with the drifter
positions; here in the smoother / inversion form: the state x = (Re c, Im c) is the only
unknown and the positions are the (nonlinear) observation operator z(x), RK4 from the
release as in 4D-Var. Ensemble smoother with multiple data assimilation (Emerick & Reynolds
2013): for each of n_a passes with inflation alpha = n_a (so sum 1 / alpha = 1)
    x_i <- x_i + C_xz (C_zz + alpha R)^-1 (y + sqrt(alpha) R^{1/2} eps_i - z(x_i)),
R = sigma^2 I, sigma = max(noise_std, enkf_sigma_floor), eps_i ~ N(0, I) (perturbed
observations). The window grows as in 4D-Var (AssimConfig.continuation), so that the
ensemble linearisation holds while the tracks are short; the final ensemble is returned as
the posterior samples. The gain is formed in ensemble space (an N x N solve).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods._common import FieldEstimate, FlowModel, arrange, simulate_observed, to_complex, window_mask
from lagda.assimilation.methods.config import AssimConfig


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def ensemble_positions(xs, z0, t0, index, k1, k2, omega, dt, n_sim: int, stride: int):
    """Returns simulated positions at the observation slots `(member, drifter, obs, 2)` for xs `(member, 2K)`."""
    one = lambda x: simulate_observed(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride)  # noqa: E731
    return jax.lax.map(one, xs, batch_size=16)


def esmda_update(xs, predicted, observed, mask, sigma: float, alpha: float, eps) -> np.ndarray:
    """Returns the ES-MDA analysis ensemble `(member, p)`.

    Args:
        xs: `(member, p)`; predicted: `(member, m)` z(x_i); observed: `(m,)`; mask: `(m,)` 0/1;
        eps: `(member, m)` standard normal perturbations.
    """
    n = xs.shape[0]
    anomalies = (xs - xs.mean(0)) / np.sqrt(n - 1)
    pred_anom = (predicted - predicted.mean(0)) * mask[None, :] / np.sqrt(n - 1)
    innovation = (observed[None, :] + np.sqrt(alpha) * sigma * eps - predicted) * mask[None, :]
    gram = pred_anom @ pred_anom.T + alpha * sigma**2 * np.eye(n)
    weights = np.linalg.solve(gram, pred_anom @ innovation.T)  # (member, member)
    return xs + (anomalies.T @ weights).T


def assimilate_enkf(positions, times, release, model: FlowModel, config: AssimConfig, key) -> FieldEstimate:
    """Returns the ES-MDA ensemble (enkf_members equal-weight samples) for one field.

    Args:
        positions: `(drifter, obs, 2)` unwrapped; times: `(drifter, obs)`; release: `(drifter, 2)` or None.
    """
    obs = arrange(positions, times, release, model.dt)
    sigma = max(config.noise_std or 0.0, config.enkf_sigma_floor)
    key_prior, key_noise = jax.random.split(key)
    n = config.enkf_members
    xs = np.asarray(jax.random.normal(key_prior, (n, 2 * model.n_modes)), np.float64) * np.sqrt(model.prior_var)[None, :]
    modes = (jnp.asarray(model.k1), jnp.asarray(model.k2), jnp.asarray(model.omega))
    observed = obs.target.reshape(-1)
    spread = []
    for s, fraction in enumerate(config.continuation):
        mask = window_mask(obs, fraction)
        n_sim = int(np.max(np.where(mask > 0, obs.index, 0))) + 1
        index = jnp.asarray(np.minimum(obs.index, n_sim - 1))
        mask_flat = np.repeat(mask.reshape(-1), 2)
        for a in range(config.enkf_iterations):
            predicted = np.asarray(ensemble_positions(jnp.asarray(xs), jnp.asarray(obs.z0), jnp.asarray(obs.t0), index,
                                                      *modes, model.dt, n_sim, obs.stride)).reshape(n, -1)
            ok = np.all(np.isfinite(predicted), axis=1)
            predicted = np.where(ok[:, None], predicted, observed[None, :])  # a blown-up member gets no update
            eps = np.asarray(jax.random.normal(jax.random.fold_in(key_noise, s * 1000 + a), predicted.shape), np.float64)
            xs = esmda_update(xs, predicted, observed, mask_flat, sigma, float(config.enkf_iterations), eps)
        spread.append(float(np.sqrt(np.mean(xs.var(0)))))
    info = {"sigma": sigma, "spread_per_stage": spread}
    return FieldEstimate(to_complex(xs), np.full(n, 1.0 / n), info=info)
