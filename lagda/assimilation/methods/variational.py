"""`var`: strong-constraint 4D-Var over the coefficients through the differentiable simulator.

MAP estimate of x = (Re c, Im c) minimising
    J(x) = sum_{d,j} |z_dj(x) - y_dj|^2 / (2 sigma^2) + sum_i x_i^2 / (2 D_i)
where z_dj(x) is the RK4 position (simulate.integrate, the reference physics) of drifter d at
observation j, started from its release (or its first valid observation), y the observed
unwrapped positions and D the prior variances. Positions are unwrapped, so the misfit compares
them directly (no torus wrap-around). sigma is noise_std when given; else the fit starts at the
position noise estimated from the third differences of the tracks (linear.choose_lag; on sparse or
exact tracks there is none, and it starts at sigma_floor) and then takes the sigma the evidence gives
at the MAP (`fit_noise`: the tracks linearised there, the posterior median of sigma under a uniform
prior, `evidence_sigma`), refitting until it settles,
never below sigma_floor: with sigma far below the true noise the prior term would be negligible and
the fit would chase the noise, far out into the prior's tails.

Optimisers: Levenberg-Marquardt Gauss-Newton on the residual vector (default; the Jacobian
of 2K columns comes from one run of the sensitivity equations, simulate_observed_tangent, and
is needed for the Laplace covariance anyway), optax.lbfgs or optax.adam. All three are
monotone on the whole cost, prior term included: a step that raises it is rejected (LM raises
the damping; lbfgs and adam restart from the last accepted iterate, adam with half the
learning rate). Convergence is judged by the Gauss-Newton decrement, the decrease a full
Gauss-Newton step predicts, against `tol` times max(1, cost).

From the prior mean c = 0 (no motion) a long chaotic track is a very non-convex target, so
the window is lengthened by continuation: fit the first 5% of the observations, then 10%, ...
100% (OptimiserConfig.continuation). Each stage starts from the better (on that stage's cost) of
the previous stage's result and the initial point, so the final cost never exceeds the cost
of the initial point. The posterior spread is the Laplace / Gauss-Newton approximation
cov = (J_r^T J_r)^-1 = (H^T H / sigma^2 + D^-1)^-1 at the optimum.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagda.assimilation.methods.config import HybridConfig, OptimiserConfig, VarConfig
from lagda.assimilation.methods.fused import (
    FusedOperator,
    fused_operator,
    fused_residuals,
    fused_residuals_jacobian,
)
from lagda.assimilation.methods.linear_gaussian import (
    gaussian_estimate,
    noise_quantiles,
)
from lagda.assimilation.methods.observations import (
    Observations,
    arrange,
    simulate_observed,
    simulate_observed_tangent,
    window_mask,
)
from lagda.assimilation.methods.track_data import choose_lag
from lagda.assimilation.model import FlowModel
from lagda.assimilation.posterior import FieldEstimate

MAX_DAMPING = 1e8  # Levenberg-Marquardt gives up (stop "max_damping") above this damping
CONVERGENCE_TOL = 1e-8  # converged: Gauss-Newton decrement <= tol * max(1, cost)


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def residuals(x, mask, target, z0, t0, index, k1, k2, omega, time, dt, sigma, prior_std, prior_mean, n_sim: int,
              stride: int):
    """Returns the whitened residual vector r(x) with J(x) = |r|^2 / 2: `(drifter*obs*2 + 2K,)`."""
    sim = simulate_observed(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride, time)
    misfit = (sim - target) * (jnp.sqrt(mask)[:, :, None] / sigma)
    return jnp.concatenate([misfit.reshape(-1), (x - prior_mean) / prior_std])


@functools.partial(jax.jit, static_argnames=("n_sim", "stride"))
def jacobian(x, mask, target, z0, t0, index, k1, k2, omega, time, dt, sigma, prior_std, prior_mean, n_sim: int,
             stride: int):
    """Returns dr/dx `(drifter*obs*2 + 2K, 2K)` of `residuals`, from one sensitivity run (simulate_observed_tangent)."""
    _, sens = simulate_observed_tangent(x, z0, t0, index, k1, k2, omega, dt, n_sim, stride, time)
    misfit = sens * (jnp.sqrt(mask)[:, :, None, None] / sigma)
    return jnp.concatenate([misfit.reshape(-1, x.shape[0]), jnp.diag(1.0 / prior_std)])


def _cost(x, arrays, static):
    """Returns J(x) = |r(x)|^2 / 2 for a problem split into traced `arrays` and static (n_sim, stride)."""
    r = residuals(x, *arrays, *static)
    return 0.5 * jnp.sum(r**2)


def misfit(x, obs: Observations, model: FlowModel, sigma: float, mask=None):
    """Returns the 4D-Var cost J(x) = |r(x)|^2 / 2 (a scalar), differentiable in x `(2K,)`."""
    problem = observation_problem(obs, model, sigma, mask)
    return _cost(x, problem[:-2], problem[-2:])


def cost(x, problem) -> float:
    """Returns J(x) = |r(x)|^2 / 2 for x `(2K,)` and an `observation_problem` (inf where not finite)."""
    r = residual_vector(x, problem)
    value = 0.5 * float(r @ r)
    return value if np.isfinite(value) else float("inf")


class Problem(tuple):
    """The argument tuple of `residuals` after x, and the fused operator that serves it (`operator`, or None)."""

    operator: FusedOperator | None = None

    def fused_arguments(self) -> tuple:
        """Returns the arguments of fused.fused_residuals after x (mask, ..., n_sim, op)."""
        mask, target, z0, t0, index, _, _, omega, _, _, sigma, prior_std, prior_mean, n_sim, _ = self
        return mask, target, z0, t0, index, omega, sigma, prior_std, prior_mean, n_sim, self.operator


def residual_vector(x, problem) -> np.ndarray:
    """Returns r(x) of `residuals` as numpy, through the problem's fused operator where it has one."""
    x = jnp.asarray(x, jnp.float64)
    if getattr(problem, "operator", None) is not None:
        return np.asarray(fused_residuals(x, *problem.fused_arguments()))
    return np.asarray(residuals(x, *problem))


def residuals_and_jacobian(x, problem) -> tuple[np.ndarray, np.ndarray]:
    """Returns (r(x), dr/dx) of `residuals` / `jacobian` as numpy, from one fused run where the problem has one."""
    x = jnp.asarray(x, jnp.float64)
    if getattr(problem, "operator", None) is not None:
        r, jac = fused_residuals_jacobian(x, *problem.fused_arguments())
        return np.asarray(r), np.asarray(jac)
    return np.asarray(residuals(x, *problem)), np.asarray(jacobian(x, *problem))


def observation_problem(obs: Observations, model: FlowModel, sigma: float, mask=None, n_sim=None,
                        prior=None) -> Problem:
    """Returns the argument tuple of `residuals` after x, restricted to the first n_sim states.

    prior: (mean `(2K,)`, var `(2K,)`) of a Gaussian prior replacing N(0, D) (hybrid), or None.
    The problem's `operator` is the fused one (lagda.assimilation.methods.fused: the same values to rounding,
    faster) where it applies, a model without a time basis observed every fused.FUSED_MIN_STRIDE or more
    steps; `cost` and `residuals_and_jacobian` then use it, else `residuals` / `jacobian`.
    """
    mean, var = (np.zeros(2 * model.n_modes), model.prior_var) if prior is None else prior
    mask = obs.mask if mask is None else mask
    n_sim = obs.n_sim if n_sim is None else n_sim
    index = np.minimum(obs.index, n_sim - 1)
    problem = Problem((jnp.asarray(mask), jnp.asarray(obs.target), jnp.asarray(obs.z0), jnp.asarray(obs.t0),
                       jnp.asarray(index), jnp.asarray(model.k1), jnp.asarray(model.k2), jnp.asarray(model.omega),
                       model.time, model.dt, sigma, jnp.asarray(np.sqrt(var)), jnp.asarray(mean), n_sim, obs.stride))
    problem.operator = fused_operator(model.k1, model.k2, model.dt, obs.stride, model.time)
    return problem


def stage_problem(obs: Observations, model: FlowModel, sigma: float, fraction: float, prior=None) -> Problem:
    """Returns `observation_problem` for the first `fraction` of the window, simulating only that far."""
    mask = window_mask(obs, fraction)
    n_sim = int(np.max(np.where(mask > 0, obs.index, 0))) + 1
    return observation_problem(obs, model, sigma, mask, n_sim, prior)


def noise_sigma(positions, times, config: OptimiserConfig) -> tuple[float, str]:
    """Returns (sigma, source) of the misfit: source "given", "estimated" or "floored".

    Given noise_std wins, at least config.sigma_floor (a given 0 says the tracks are exact: the floor,
    and the evidence is not asked, which cannot tell noise from signal on sparse exact tracks); else the
    position noise std estimated from the third differences (linear.choose_lag, which finds none on
    tracks smooth at lag 1: exact or truncation dominated); "floored" when that would be below the floor.
    """
    if config.noise_std is not None:
        return max(float(config.noise_std), float(config.sigma_floor)), "given"
    sigma = choose_lag(positions, times)[1].get("noise_std_est", 0.0)
    if not sigma >= config.sigma_floor:
        return float(config.sigma_floor), "floored"
    return sigma, "estimated"


@dataclasses.dataclass
class StageReport:
    """How one optimiser run went: costs of the accepted iterates and why it stopped."""

    costs: list  # J at the start and after each accepted step
    iterations: int  # optimiser iterations (steps tried, rejected ones included, for lbfgs / adam)
    rejected: int  # steps rejected because they raised J (or made it non-finite)
    stop: str  # "converged", "max_iterations" or "max_damping"
    decrement: float  # Gauss-Newton decrement at the returned point

    @property
    def converged(self) -> bool:
        return self.stop == "converged"

    def summary(self) -> dict:
        """Returns the JSON-serialisable record of the run (no per-iteration trace)."""
        return {"cost_start": self.costs[0], "cost": self.costs[-1], "iterations": self.iterations,
                "rejected": self.rejected, "stop": self.stop, "converged": self.converged,
                "decrement": self.decrement}


def _whitened_normal_equations(x, problem):
    """Returns (H `(2K, 2K)`, g `(2K,)`, s `(2K,)`): J^T J and J^T r at x in the prior-whitened u = x / s.

    H = A^T A + I (A the data rows of J times diag(s)) has every eigenvalue >= 1, so solving with
    it loses far less than with the raw J^T J, and costs much less than a QR of the tall J.
    """
    prior_std = np.asarray(problem[-4])  # the argument tuple ends (..., prior_std, prior_mean, n_sim, stride)
    r, jac = residuals_and_jacobian(x, problem)
    jac = jac * prior_std[None, :]
    return jac.T @ jac, jac.T @ r, prior_std


def _newton_decrement(hess, grad) -> float:
    """Returns g^T H^-1 g / 2: the decrease of J a full Gauss-Newton step predicts."""
    return 0.5 * float(grad @ np.linalg.solve(hess, grad))


def gn_decrement(x, problem) -> float:
    """Returns the Gauss-Newton decrement g^T (J^T J)^-1 g / 2 of J at x."""
    return _newton_decrement(*_whitened_normal_equations(x, problem)[:2])


def _is_converged(decrement: float, value: float, tol: float) -> bool:
    return decrement <= tol * max(1.0, value)


def gauss_newton(x, problem, iterations: int, tol: float = CONVERGENCE_TOL):
    """Returns (x, StageReport) after at most `iterations` Levenberg-Marquardt steps on J = |r(x)|^2 / 2.

    Steps solve (H + damping diag(H)) u = -g in the prior-whitened variables (Marquardt
    scaling); a step is accepted only if it lowers J, else the damping grows tenfold, up to
    MAX_DAMPING (stop "max_damping", not converged).
    """
    x = np.asarray(x, np.float64)
    costs, damping, rejected, stop = [cost(x, problem)], 1e-3, 0, "max_iterations"
    for used in range(iterations + 1):
        hess, grad, prior_std = _whitened_normal_equations(x, problem)
        decrement = _newton_decrement(hess, grad)
        if _is_converged(decrement, costs[-1], tol):
            stop = "converged"
            break
        if used == iterations:
            break
        while True:
            step = prior_std * np.linalg.solve(hess + damping * np.diag(np.diag(hess)), -grad)
            value = cost(x + step, problem)
            if value < costs[-1]:
                damping = max(damping / 3.0, 1e-9)
                break
            rejected += 1
            damping *= 10.0
            if damping > MAX_DAMPING:
                stop = "max_damping"
                break
        if stop == "max_damping":
            break
        x = x + step
        costs.append(value)
    return x, StageReport(costs, used, rejected, stop, decrement)


_LBFGS = optax.lbfgs()
_ADAM = optax.inject_hyperparams(optax.adam)(learning_rate=1.0)  # the rate lives in the state


@functools.partial(jax.jit, static_argnames=("static",))
def _lbfgs_step(x, state, arrays, static):
    """Returns (x, state) after one optax.lbfgs step (zoom line search) on J."""
    value_fn = functools.partial(_cost, arrays=arrays, static=static)
    value, grad = optax.value_and_grad_from_state(value_fn)(x, state=state)
    updates, state = _LBFGS.update(grad, state, x, value=value, grad=grad, value_fn=value_fn)
    return optax.apply_updates(x, updates), state


@functools.partial(jax.jit, static_argnames=("static",))
def _adam_step(x, state, arrays, static):
    """Returns (x, state) after one optax.adam step on J."""
    grad = jax.grad(_cost)(x, arrays, static)
    updates, state = _ADAM.update(grad, state, x)
    return optax.apply_updates(x, updates), state


def _first_order_init(optimizer: str, x, lr: float):
    if optimizer == "lbfgs":
        return _LBFGS.init(x)
    state = _ADAM.init(x)
    state.hyperparams["learning_rate"] = jnp.asarray(lr, x.dtype)
    return state


def first_order(x, problem, iterations: int, optimizer: str, lr: float, tol: float = CONVERGENCE_TOL):
    """Returns (x, StageReport) after `iterations` optax lbfgs or adam iterations on J = |r(x)|^2 / 2.

    A step that raises J (or makes it non-finite) is rejected: the optimiser restarts from the
    last accepted iterate with a fresh state (lbfgs: empty memory; adam: half the learning rate).
    """
    arrays, static = problem[:-2], problem[-2:]
    step_fn = _lbfgs_step if optimizer == "lbfgs" else _adam_step
    x = jnp.asarray(x, jnp.float64)
    state, costs, rejected = _first_order_init(optimizer, x, lr), [cost(x, problem)], 0
    for _ in range(iterations):
        x_new, state_new = step_fn(x, state, arrays, static)
        value = cost(x_new, problem)
        if value <= costs[-1]:
            x, state = x_new, state_new
            costs.append(value)
        else:
            rejected += 1
            lr = lr / 2.0
            state = _first_order_init(optimizer, x, lr)
    decrement = gn_decrement(x, problem)
    stop = "converged" if _is_converged(decrement, costs[-1], tol) else "max_iterations"
    return np.asarray(x), StageReport(costs, iterations, rejected, stop, decrement)


def optimise(x, problem, config: OptimiserConfig, iterations: int):
    """Returns (x, StageReport) of config.optimizer from x on one problem."""
    if config.optimizer == "gauss_newton":
        return gauss_newton(x, problem, iterations)
    return first_order(x, problem, iterations, config.optimizer, config.lr)


def fit(x0, obs: Observations, model: FlowModel, config: OptimiserConfig, stages, iterations: int, sigma: float,
        prior=None):
    """Returns (x_map, per-stage summaries) minimising the 4D-Var cost through the continuation stages.

    Each stage starts from the better, on its own cost, of the previous result and x0.
    """
    x0 = np.asarray(x0, np.float64)
    x, history = x0, []
    for fraction in stages:
        problem = stage_problem(obs, model, sigma, fraction, prior)
        restart = x is not x0 and cost(x0, problem) < cost(x, problem)
        x, report = optimise(x0 if restart else x, problem, config, iterations)
        history.append({"fraction": float(fraction), "start": "initial" if restart else "previous", **report.summary()})
    return x, history


EVIDENCE_ROUNDS = 3  # at most this many re-estimates of sigma, each followed by a refit from the last MAP
EVIDENCE_TOL = 0.1  # stop when sigma changes by less than this fraction
# the noise is determined when the evidence's 5% quantile is at least this fraction of its median. With nu
# residual degrees of freedom the posterior of sigma is ~ sigma^-nu exp(-S / 2 sigma^2), whose ratio is 0.10
# at nu = 1 (as a posterior flat from 0 to a cut-off: data that fit any noise below it as well), 0.35 at
# nu = 2 and 0.74 at nu = 14 (0.76 seen on 4 sparse noisy drifters, 32 data for 18 coefficients)
DETERMINED_RATIO = 0.3


def evidence_sigma(x, obs: Observations, model: FlowModel, floor: float, prior=None) -> tuple[float, list]:
    """Returns (sigma, its 90% interval [low, high]): the position noise std the evidence gives for the tracks
    linearised at x `(2K,)` (sigma at least `floor`).

    Near x the positions are linear in the coefficients, z(x') = z(x) + A (x' - x) with A from one
    sensitivity run, so the tracks are linear data y - z(x) + A x = A x' + e under the prior, and sigma
    is the posterior median of the noise std on them under a uniform prior (linear_gaussian.noise_quantiles,
    with its 5% and 95% quantiles): the third differences cannot give it on sparse tracks (their
    truncation error dominates the noise), and the evidence's maximum can fall to the floor when the
    positions are few against the coefficients (the evidence is flat below the weakest signal direction),
    where the fit is worse than at the true noise.
    """
    mean, var = (np.zeros(2 * model.n_modes), model.prior_var) if prior is None else prior
    # at sigma 1 the data rows of r and dr/dx are z(x) - y and A where observed (mask 1)
    r, jac = residuals_and_jacobian(x, observation_problem(obs, model, 1.0, prior=prior))
    keep = np.concatenate([np.repeat(obs.mask.reshape(-1) > 0, 2), np.zeros(2 * model.n_modes, bool)])
    a = jac[keep]
    y = -r[keep] + a @ (np.asarray(x, np.float64) - mean)
    low, median, high = noise_quantiles(a, y, np.asarray(var, np.float64))
    return max(float(median), floor), [float(low), float(high)]


def fit_noise(x, obs: Observations, model: FlowModel, config: OptimiserConfig, iterations: int, sigma: float,
              prior=None) -> tuple[np.ndarray, float, dict]:
    """Returns (x_map, sigma, what was decided) refitting on the full window at the evidence sigma until it settles.

    From a MAP x at `sigma`, the noise std the evidence gives at x (`evidence_sigma`) is taken and the MAP
    refitted from x at it, at most EVIDENCE_ROUNDS times, until sigma changes by less than EVIDENCE_TOL.
    What was decided (info keys): noise_source ("evidence", or "floored" at config.sigma_floor), sigmas_tried,
    sigma_90, the last evidence's 90% interval, and noise_determined: False when that evidence is flat from 0
    up to about its 95% quantile (DETERMINED_RATIO), so the tracks fit any noise in that range as well and
    sigma is only the middle of it (e.g. one exact drifter with 4 fixes, 8 data for 18 coefficients).
    """
    tried = [float(sigma)]
    for _ in range(EVIDENCE_ROUNDS):
        new, interval = evidence_sigma(x, obs, model, config.sigma_floor, prior)
        if abs(new / sigma - 1.0) < EVIDENCE_TOL:
            break
        sigma = new
        tried.append(sigma)
        x, _ = fit(x, obs, model, config, (1.0,), iterations, sigma, prior)
    source = "floored" if sigma <= config.sigma_floor else "evidence"
    determined = source == "floored" or interval[0] >= DETERMINED_RATIO * sigma
    return x, sigma, {"noise_source": source, "sigmas_tried": tried, "sigma_90": interval,
                      "noise_determined": bool(determined)}


def laplace_root(x, obs: Observations, model: FlowModel, sigma: float, prior=None) -> np.ndarray:
    """Returns S `(2K, 2K)` with S S^T the Gauss-Newton posterior covariance (J_r^T J_r)^-1 at x.

    With J_r = [A; diag(1 / s)] (s the prior stds) and the SVD A diag(s) = U diag(l) V^T,
    S = diag(s) V diag(1 / sqrt(1 + l^2)): no inverse of the badly conditioned J_r^T J_r.
    """
    prior_std = np.sqrt(model.prior_var if prior is None else np.asarray(prior[1], np.float64))
    _, jac = residuals_and_jacobian(x, observation_problem(obs, model, sigma, prior=prior))
    data = jac[: -len(prior_std)] * prior_std[None, :]
    data = np.concatenate([data, np.zeros((max(0, len(prior_std) - len(data)), len(prior_std)))])  # V square
    _, sv, vt = np.linalg.svd(data, full_matrices=False)
    return (vt.T / np.sqrt(1.0 + sv**2)[None, :]) * prior_std[:, None]


def root_covariance(root) -> np.ndarray:
    """Returns S S^T `(d, d)` for a root S `(d, d)`, exactly symmetric whatever the product's rounding."""
    cov = root @ root.T
    return (cov + cov.T) / 2.0


def laplace_covariance(x, obs: Observations, model: FlowModel, sigma: float, prior=None) -> np.ndarray:
    """Returns the Gauss-Newton posterior covariance at x `(2K, 2K)`, symmetric positive definite (laplace_root)."""
    return root_covariance(laplace_root(x, obs, model, sigma, prior))


@dataclasses.dataclass(frozen=True)
class MapFit:
    """var's fit of one field: the MAP x `(2K,)`, the misfit's noise std and a root `(2K, 2K)` of its Laplace
    covariance (laplace_root), with what was decided (info)."""

    x: np.ndarray
    sigma: float
    root: np.ndarray
    info: dict


def map_fit(positions, times, release, model: FlowModel, config: OptimiserConfig, x_init=None, stages=None,
            iterations=None, prior=None) -> MapFit:
    """Returns the 4D-Var MAP of one field with its Laplace root, the noise from the fit's evidence unless given.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.
    x_init
        `(2K,)` start (default the prior mean 0)
    stages
        window fractions (default config.continuation)
    iterations
        per stage (default config.iterations).
    prior
        (mean `(2K,)`, var `(2K,)`) Gaussian prior replacing N(0, D) (hybrid), or None.
    """
    start = time.perf_counter()
    obs = arrange(positions, times, release, model.dt)
    x0 = np.zeros(2 * model.n_modes) if x_init is None else np.asarray(x_init, np.float64)
    stages = config.continuation if stages is None else stages
    sigma, source = noise_sigma(positions, times, config)
    iterations = iterations or config.iterations
    x, history = fit(x0, obs, model, config, stages, iterations, sigma, prior)
    noise = {"noise_source": source, "sigmas_tried": [sigma]}
    if source != "given":  # the evidence of the fit says how noisy the tracks are
        x, sigma, noise = fit_noise(x, obs, model, config, iterations, sigma, prior)
    root = laplace_root(x, obs, model, sigma, prior)
    full = observation_problem(obs, model, sigma, prior=prior)
    info = {"optimizer": config.optimizer, "sigma": sigma, **noise, "cost_start": cost(x0, full), "cost": cost(x, full),
            "iterations": int(sum(h["iterations"] for h in history)), "converged": bool(history[-1]["converged"]),
            "stop": history[-1]["stop"], "stages": history, "fit_seconds": time.perf_counter() - start}
    return MapFit(x, sigma, root, info)


def assimilate_var(positions, times, release, model: FlowModel, config: VarConfig | HybridConfig, key,
                   x_init=None, stages=None, iterations=None, prior=None) -> FieldEstimate:
    """Returns the 4D-Var MAP with its Laplace spread for one field (map_fit; the same arguments)."""
    result = map_fit(positions, times, release, model, config, x_init, stages, iterations, prior)
    return gaussian_estimate(key, result.x, root_covariance(result.root), config.members, result.info)
