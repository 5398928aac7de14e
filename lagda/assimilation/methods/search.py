"""Multi-start global search for the 4D-Var MAP: short Gauss-Newton runs from many starts.

On sparse or long chaotic tracks the 4D-Var cost
    J(x) = sum_{d,j} |z_dj(x) - y_dj|^2 / (2 sigma^2) + (x - m)^T diag(v)^-1 (x - m) / 2
(lagda.assimilation.methods.variational; prior N(m, diag v), by default the original N(0, D))
has many local minima, and one Gauss-Newton run finds the basin its start lies in.
`multistart_map` runs the 4D-Var fit (no continuation by default) from every start and scores
every end point by J on the full window (the negative log posterior density up to a
constant). Where the end points lie in one basin the answer is the lowest one's Laplace
Gaussian; where they lie in several, the posterior is the mixture of each basin's Laplace
Gaussian weighted by its Laplace evidence, exp(-J_b) det(Sigma_b)^(1/2) (normalised), whose
mean, not any one mode, is the estimate of least expected error. The spread of
the end points is reported in `info`: every cost, every end point's prior-whitened distance
to the best, how many ended in the best's basin (distance below `basin_tol`), and the chosen
start's index.

Starts: `gaussian_starts` draws from a Gaussian (the prior, or a learned conditional),
`candidate_starts` takes given candidates (e.g. retrieval's top k).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods.config import OptimiserConfig, VarConfig
from lagda.assimilation.methods.linear_gaussian import gaussian_estimate, mixture_estimate
from lagda.assimilation.methods.observations import arrange
from lagda.assimilation.methods.variational import (
    cost,
    fit,
    fit_noise,
    laplace_covariance,
    laplace_root,
    noise_sigma,
    observation_problem,
    root_covariance,
)
from lagda.assimilation.model import FlowModel, to_real
from lagda.assimilation.posterior import FieldEstimate


def gaussian_starts(mean, var, n: int, key, include_mean: bool = True) -> np.ndarray:
    """Returns n starts `(n, 2K)` drawn from N(mean, diag var); the first is the mean itself if include_mean.

    Parameters
    ----------
    mean, var
        `(2K,)`
    key
        JAX PRNG key (the draws are a function of it only).
    """
    mean, std = np.asarray(mean, np.float64), np.sqrt(np.asarray(var, np.float64))
    xi = np.array(jax.random.normal(key, (n, mean.shape[0]), jnp.float64), np.float64)
    if include_mean:
        xi[0] = 0.0
    return mean[None, :] + xi * std[None, :]


def prior_starts(model: FlowModel, n: int, key, include_mean: bool = True) -> np.ndarray:
    """Returns n starts `(n, 2K)` from the prior N(0, D) (the first the prior mean 0 if include_mean)."""
    return gaussian_starts(np.zeros(2 * model.n_modes), model.prior_var, n, key, include_mean)


def candidate_starts(candidates, k: int | None = None) -> np.ndarray:
    """Returns the first k candidates as starts `(k, 2K)`.

    Parameters
    ----------
    candidates
        complex coefficients `(rank, mode)` (e.g. FieldEstimate.candidates) or real x `(rank, 2K)`.
    """
    candidates = np.asarray(candidates)
    x = to_real(candidates) if np.iscomplexobj(candidates) else np.asarray(candidates, np.float64)
    return x[:k] if k is not None else x


def whitened_distance(x, y, var) -> np.ndarray:
    """Returns the RMS prior-whitened distance sqrt(mean((x - y)^2 / var)) over the last axis of `(..., 2K)`."""
    return np.sqrt(np.mean((np.asarray(x) - np.asarray(y)) ** 2 / np.asarray(var), axis=-1))


def posterior_cost(x, positions, times, release, model: FlowModel, config: OptimiserConfig, prior=None) -> float:
    """Returns the full-window 4D-Var cost J(x) (misfit + prior, as assimilate_var minimises) of x `(2K,)`.

    sigma as `var` takes it (variational.noise_sigma); prior: (mean `(2K,)`, var `(2K,)`) replacing N(0, D), or None.
    """
    obs = arrange(positions, times, release, model.dt)
    sigma, _ = noise_sigma(positions, times, config)
    return cost(x, observation_problem(obs, model, sigma, prior=prior))


def run_starts(obs, model: FlowModel, config: OptimiserConfig, starts, iterations: int, sigma: float, stages=(1.0,),
               prior=None) -> tuple[np.ndarray, np.ndarray]:
    """Returns (end points `(start, 2K)`, full-window costs `(start,)`) of a short 4D-Var from each start.

    Each start runs the continuation `stages` (variational.fit) with `iterations` per stage;
    non-finite end points get cost inf.
    """
    full = observation_problem(obs, model, sigma, prior=prior)
    ends, costs = [], []
    for x0 in np.asarray(starts, np.float64):
        x, _ = fit(x0, obs, model, config, stages, iterations, sigma, prior)
        ends.append(x)
        costs.append(cost(x, full) if np.all(np.isfinite(x)) else np.inf)
    return np.stack(ends), np.asarray(costs, np.float64)


def multistart_map(positions, times, release, model: FlowModel, config: OptimiserConfig, key, starts,
                   iterations: int | None = None, stages=(1.0,), prior=None, basin_tol: float = 1e-2) -> FieldEstimate:
    """Returns the lowest-cost 4D-Var end point over `starts`, with its Laplace spread.

    sigma of the misfit as `var` takes it (variational.noise_sigma: given, else the starts run at the estimated or
    floored one and the best end point is refitted at the sigma its evidence gives, variational.fit_noise).

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.
    starts
        `(start, 2K)` real x = (Re c, Im c)
    iterations
        Gauss-Newton iterations per start and stage (default the config's `iterations`)
    stages
        window fractions per start.
    prior
        (mean, var) `(2K,)` each replacing N(0, D) in the cost, or None.
    basin_tol
        end points within this prior-whitened RMS distance of the best are in its basin.

    Returns
    -------
    FieldEstimate
        FieldEstimate of config.members samples of N(x_best, Laplace covariance), or where the end points lie in
        several basins of their Laplace mixture (the best refitted at the final sigma, the others' lowest end points
        as they ended); info (JSON types): costs (per start, at the starting sigma), distances (whitened, to the
        best), chosen, n_starts, n_in_best_basin, cost_best (at the final sigma), basin_tol, sigma (and sigma_90, its
        90% interval, and noise_determined, when estimated), noise_source,
        sigmas_tried, seconds, and for a mixture modes, mode_weights, mode_costs, mode_starts.
    """
    start_time = time.perf_counter()
    starts = np.atleast_2d(np.asarray(starts, np.float64))
    if starts.shape[1] != 2 * model.n_modes:
        raise ValueError(f"starts must be (start, {2 * model.n_modes}), got {starts.shape}")
    iterations = iterations or config.iterations
    obs = arrange(positions, times, release, model.dt)
    sigma, source = noise_sigma(positions, times, config)
    ends, costs = run_starts(obs, model, config, starts, iterations, sigma, stages, prior)
    if not np.any(np.isfinite(costs)):
        raise ValueError("no start reached a finite 4D-Var cost")
    best = int(np.argmin(costs))
    var = model.prior_var if prior is None else np.asarray(prior[1], np.float64)
    dist = whitened_distance(ends, ends[best][None, :], var)
    x, cost_best, noise = ends[best], float(costs[best]), {"noise_source": source, "sigmas_tried": [float(sigma)]}
    if source != "given":  # the best end point's evidence sets sigma (variational.fit_noise)
        x, sigma, noise = fit_noise(x, obs, model, config, iterations, sigma, prior)
        cost_best = cost(x, observation_problem(obs, model, sigma, prior=prior))
    info = {"costs": [float(c) for c in costs], "distances": [float(d) for d in dist], "chosen": best,
            "n_starts": int(len(starts)), "n_in_best_basin": int(np.sum(dist < basin_tol)),
            "cost_best": cost_best, "basin_tol": float(basin_tol), "iterations": int(iterations),
            "stages": [float(f) for f in stages], "sigma": float(sigma), **noise}
    others = basin_representatives(ends, costs, var, basin_tol)[1:]  # the other basins' lowest end points
    if not others:
        cov = laplace_covariance(x, obs, model, sigma, prior)
        return gaussian_estimate(key, x, cov, config.members, {**info, "seconds": time.perf_counter() - start_time})
    full = observation_problem(obs, model, sigma, prior=prior)
    means = np.stack([x] + [ends[b] for b in others])
    roots = [laplace_root(m, obs, model, sigma, prior) for m in means]
    mode_costs = np.array([cost_best] + [cost(ends[b], full) for b in others])
    log_weights = -mode_costs + np.array([np.linalg.slogdet(r)[1] for r in roots])  # log exp(-J) det(S)
    covs = np.stack([root_covariance(r) for r in roots])
    weights = np.exp(log_weights - log_weights.max())
    info |= {"modes": len(means), "mode_weights": [float(w) for w in weights / weights.sum()],
             "mode_costs": [float(c) for c in mode_costs], "mode_starts": [best] + [int(b) for b in others],
             "seconds": time.perf_counter() - start_time}
    return mixture_estimate(key, means, covs, log_weights, config.members, info)


def basin_representatives(ends, costs, var, basin_tol: float) -> list[int]:
    """Returns the indices of one end point per basin, lowest cost first: the finite-cost end points `(start, 2K)`
    in order of cost, each kept when its prior-whitened distance to every kept one is at least `basin_tol`."""
    kept = []
    for i in np.argsort(costs):
        if np.isfinite(costs[i]) and all(whitened_distance(ends[i], ends[j], var) >= basin_tol for j in kept):
            kept.append(int(i))
    return kept


def truth_map(positions, times, release, model: FlowModel, config: VarConfig, key, truth, noise_std: float,
              iterations: int | None = None) -> FieldEstimate:
    """Returns the oracle `truth-map`: Gauss-Newton 4D-Var started from the true x `(2K,)`.

    The exact prior N(0, D) and the true position noise std (0 for exact tracks: the misfit
    uses config.sigma_floor) make it the MAP in the truth's basin: a reference no method
    can use, bounding what one that finds the right basin reaches with the same iterations.
    On exact sparse tracks the MAP lies along a narrow curved valley of J and is not reached in
    a few iterations: info["cost_at_truth"] against info["cost_best"] shows how far it moved.
    """
    config = dataclasses.replace(config, noise_std=float(noise_std) if noise_std > 0 else config.sigma_floor)
    truth = np.asarray(truth, np.float64)
    est = multistart_map(positions, times, release, model, config, key, truth[None, :],
                         iterations or config.iterations)
    cost_truth = posterior_cost(truth, positions, times, release, model, config)
    return dataclasses.replace(est, info={**est.info, "oracle": "truth-map", "cost_at_truth": cost_truth})
