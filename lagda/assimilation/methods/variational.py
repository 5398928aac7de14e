"""`var`: strong-constraint 4D-Var over the coefficients through the differentiable simulator.

MAP estimate of x = (Re c, Im c) minimising
    J(x) = sum_{d,j} |z_dj(x) - y_dj|^2 / (2 sigma^2) + sum_i x_i^2 / (2 D_i)
where z_dj(x) is the RK4 position (simulate.integrate, the reference physics) of drifter d at
observation j, started from its release (or its first valid observation), y the observed
unwrapped positions, sigma = max(noise_std, var_sigma_floor) and D the prior variances.
Positions are unwrapped, so the misfit compares them directly (no torus wrap-around).

Optimisers: Levenberg-Marquardt Gauss-Newton on the residual vector (default; the Jacobian
of 2K columns comes from one run of the sensitivity equations, simulate_observed_tangent, and
is needed for the Laplace covariance anyway),
optax.lbfgs or optax.adam. From the prior mean c = 0 (no motion) a long chaotic track is a
very non-convex target, so the window is lengthened by continuation: fit the first 5% of
the observations, then 10%, ... 100% (AssimConfig.continuation), each stage started from
the last. The posterior spread is the Laplace / Gauss-Newton approximation
cov = (J_r^T J_r)^-1 = (H^T H / sigma^2 + D^-1)^-1 at the optimum.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagda.assimilation.methods._common import (FieldEstimate, FlowModel, Observations, arrange, gaussian_estimate, simulate_observed,
                                   simulate_observed_tangent, window_mask)
from lagda.assimilation.methods.config import AssimConfig


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def residuals(x, mask, target, z0, t0, index, k1, k2, omega, dt, sigma, prior_std, prior_mean, n_sim: int, stride: int):
    """Returns the whitened residual vector r(x) with J(x) = |r|^2 / 2: `(drifter*obs*2 + 2K,)`."""
    sim = simulate_observed(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride)
    misfit = (sim - target) * (jnp.sqrt(mask)[:, :, None] / sigma)
    return jnp.concatenate([misfit.reshape(-1), (x - prior_mean) / prior_std])


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def jacobian(x, mask, target, z0, t0, index, k1, k2, omega, dt, sigma, prior_std, prior_mean, n_sim: int, stride: int):
    """Returns dr/dx `(drifter*obs*2 + 2K, 2K)` of `residuals`, from one sensitivity run (simulate_observed_tangent)."""
    _, sens = simulate_observed_tangent(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride)
    misfit = sens * (jnp.sqrt(mask)[:, :, None, None] / sigma)
    return jnp.concatenate([misfit.reshape(-1, x.shape[0]), jnp.diag(1.0 / prior_std)])


def misfit(x, obs: Observations, model: FlowModel, sigma: float, mask=None):
    """Returns the 4D-Var cost J(x) = |r(x)|^2 / 2 (a scalar), differentiable in x `(2K,)`."""
    r = residuals(x, *_problem(obs, model, sigma, mask))
    return 0.5 * jnp.sum(r**2)


def _problem(obs: Observations, model: FlowModel, sigma: float, mask=None, n_sim=None, prior=None):
    """Returns the argument tuple of `residuals` after x, restricted to the first n_sim states.

    prior: (mean `(2K,)`, var `(2K,)`) of a Gaussian prior replacing N(0, D) (hybrid), or None.
    """
    mean, var = (np.zeros(2 * model.n_modes), model.prior_var) if prior is None else prior
    mask = obs.mask if mask is None else mask
    n_sim = obs.n_sim if n_sim is None else n_sim
    index = np.minimum(obs.index, n_sim - 1)
    return (jnp.asarray(mask), jnp.asarray(obs.target), jnp.asarray(obs.z0), jnp.asarray(obs.t0),
            jnp.asarray(index), jnp.asarray(model.k1), jnp.asarray(model.k2), jnp.asarray(model.omega),
            model.dt, sigma, jnp.asarray(np.sqrt(var)), jnp.asarray(mean), n_sim, obs.stride)


def _stage_problem(obs, model, sigma, fraction, prior=None):
    """Returns `_problem` for the first `fraction` of the window, simulating only that far."""
    mask = window_mask(obs, fraction)
    n_sim = int(np.max(np.where(mask > 0, obs.index, 0))) + 1
    return _problem(obs, model, sigma, mask, n_sim, prior)


def gauss_newton(x, problem, iterations: int, tol: float = 1e-9):
    """Returns (x, cost, iterations used) after Levenberg-Marquardt steps on |r(x)|^2 / 2."""
    r = np.asarray(residuals(x, *problem))
    cost, damping, used = 0.5 * r @ r, 1e-3, 0
    for used in range(1, iterations + 1):
        jac = np.asarray(jacobian(x, *problem))
        jtj, grad = jac.T @ jac, jac.T @ r
        while True:
            step = np.linalg.solve(jtj + damping * np.diag(np.diag(jtj)), -grad)
            r_new = np.asarray(residuals(jnp.asarray(x + step), *problem))
            cost_new = 0.5 * r_new @ r_new
            if np.isfinite(cost_new) and cost_new < cost:
                damping = max(damping / 3.0, 1e-9)
                break
            damping *= 10.0
            if damping > 1e8:
                return x, cost, used
        x, r, decrease, cost = x + step, r_new, cost - cost_new, cost_new
        if decrease < tol * cost:
            break
    return x, cost, used


def first_order(x, problem, iterations: int, optimizer: str, lr: float):
    """Returns (x, cost, iterations) after optax lbfgs or adam steps on |r(x)|^2 / 2."""
    def cost_fn(x):
        r = residuals(x, *problem)
        return 0.5 * jnp.sum(r**2)

    opt = optax.lbfgs() if optimizer == "lbfgs" else optax.adam(lr)
    value_and_grad = optax.value_and_grad_from_state(cost_fn) if optimizer == "lbfgs" else jax.value_and_grad(cost_fn)

    @jax.jit
    def update(x, state):
        if optimizer == "lbfgs":
            value, grad = value_and_grad(x, state=state)
            updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=cost_fn)
        else:
            value, grad = value_and_grad(x)
            updates, state = opt.update(grad, state, x)
        return optax.apply_updates(x, updates), state, value

    x = jnp.asarray(x)
    state = opt.init(x)
    for _ in range(iterations):
        x, state, value = update(x, state)
    return np.asarray(x), float(cost_fn(x)), iterations


def fit(x0, obs: Observations, model: FlowModel, config: AssimConfig, stages, iterations: int, prior=None):
    """Returns (x_map, history) minimising the 4D-Var cost through the continuation stages."""
    sigma = max(config.noise_std or 0.0, config.var_sigma_floor)
    x, history = np.asarray(x0, np.float64), []
    for fraction in stages:
        problem = _stage_problem(obs, model, sigma, fraction, prior)
        if config.optimizer == "gauss_newton":
            x, cost, used = gauss_newton(x, problem, iterations)
        else:
            x, cost, used = first_order(x, problem, iterations, config.optimizer, config.var_lr)
        history.append((fraction, float(cost), used))
    return x, history


def laplace_covariance(x, obs: Observations, model: FlowModel, sigma: float, prior=None) -> np.ndarray:
    """Returns the Gauss-Newton posterior covariance (J_r^T J_r)^-1 at x, `(2K, 2K)`."""
    jac = np.asarray(jacobian(jnp.asarray(x), *_problem(obs, model, sigma, prior=prior)))
    return np.linalg.inv(jac.T @ jac)


def assimilate_var(positions, times, release, model: FlowModel, config: AssimConfig, key,
                   x_init=None, stages=None, iterations=None, prior=None) -> FieldEstimate:
    """Returns the 4D-Var MAP with its Laplace spread for one field.

    Args:
        positions: `(drifter, obs, 2)` unwrapped; times: `(drifter, obs)`; release: `(drifter, 2)` or None.
        x_init: `(2K,)` start (default the prior mean 0); stages: window fractions (default
            config.continuation); iterations: per stage (default config.var_iterations).
        prior: (mean `(2K,)`, var `(2K,)`) Gaussian prior replacing N(0, D) (hybrid), or None.
    """
    start = time.perf_counter()
    obs = arrange(positions, times, release, model.dt)
    x0 = np.zeros(2 * model.n_modes) if x_init is None else np.asarray(x_init, np.float64)
    stages = config.continuation if stages is None else stages
    x, history = fit(x0, obs, model, config, stages, iterations or config.var_iterations, prior)
    cov = laplace_covariance(x, obs, model, max(config.noise_std or 0.0, config.var_sigma_floor), prior)
    info = {"history": history, "fit_seconds": time.perf_counter() - start}
    return gaussian_estimate(key, x, cov, config.members, info)
