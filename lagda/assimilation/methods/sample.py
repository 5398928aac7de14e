"""`sample`: the posterior of the coefficients given the tracks, by adaptive tempered SMC with HMC moves.

The target is the posterior of x = (Re c, Im c) `(2K,)` that `var` maximises,
    pi(x) ∝ p0(x) L(x),  p0 = N(m0, D),  log L(x) = -|z(x) - y|^2 / (2 sigma^2) - n log(2 pi sigma^2) / 2,
z(x) the RK4 positions at the observations (variational.residuals without its prior rows), so
exp(-J(x)) with J the 4D-Var cost is pi up to a constant, for lagda's Fourier model and a chosen
basis alike (tests/test_sample_basis.py checks the chosen basis's time-basis path against the closed-form
posterior of a uniform current). In a chosen basis this is var's strong-constraint model: the flow in
the basis, white position noise, no error for the velocity the basis leaves out (`linear` models that
one), so on flows not in the basis (a QG ocean) it is not the truth's posterior (docs/results/ocean.md
measures the difference).

Where the tracks do not determine the field (one sparse track) pi has many modes, and its mean, the
estimate of least expected error, is not the MAP of any one of them. Tracks observed
every fused.FUSED_MIN_STRIDE or more steps take log L and its gradient from the fused operator
(`fused_log_likelihood`: the gradient -J^T r by forward sensitivity instead of reverse mode through the RK4
steps; docs/results/assimilation-speed.md times the two).

Sampler (blackjax.adaptive_tempered_smc): N particles from an initial Gaussian q move along the
bridge of densities pi_l ∝ q^(1-l) (p0 L)^l, l = 0 -> 1. Each stage resamples (systematic), moves
every particle by `mcmc_steps` HMC transitions that leave pi_l invariant, and reweights by
(p0 L / q)^(l' - l), l' chosen by bisection so that the effective sample size of those weights is
`target_ess` N; a last stage at l = 1 resamples and moves once more, so the returned particles have
equal weights. Why this algorithm and not parallel tempering or NUTS:
- SMC is a population method: one batched (vmap) log-density gradient serves every particle, the
  same compiled stage serves every stage (the schedule is data, not shape), it estimates the
  evidence, and the particles' own covariance tunes the moves. Parallel tempering needs long
  serial chains per temperature and a hand-set ladder, and batches only over temperatures.
- HMC with a fixed number of leapfrog steps per stage costs the same for every particle, so the
  vmap over particles does no wasted work; under vmap NUTS runs every particle as long as the
  longest tree of the batch.
Tuning (per stage, from the particles): the moves run in coordinates whitened by the particles'
weighted mean and covariance (dense Cholesky, or diagonal), so the mass matrix is the identity
there and the step size is in units of the current spread; that keeps one step size usable from
the prior (spread ~1) to a posterior a million times narrower. The step size is multiplied by
exp(acceptance - target_acceptance) after each stage; the leapfrog count is
ceil(trajectory_length / step size), at most max_leapfrog_steps. A dense covariance of d
coordinates estimated from N particles is itself noisy (its whitened eigenvalues spread over
(1 +- sqrt(d / N))^2), which shrinks the usable step: keep N at several times d (the default 1024
is ~10 d for K = 49), or whiten by the diagonal. Tuning from the particles makes the moves depend
on the particles they move, which biases the evidence by O(1 / N) when the moves mix poorly (more
HMC transitions per stage reduce it); the posterior moments carry the usual O(1 / N) SMC bias.

The noise std sigma of the misfit is the given noise_std, else the one the evidence gives at var's MAP
(variational.map_fit): the posterior is then the one given that empirical-Bayes sigma, recorded in
the result ("noise_source": "var evidence").

Start from a proposal (SampleConfig.start = "var": var's Laplace Gaussian at its MAP, reached with the noise
estimated and, when the noise is given, refitted from there down (or up) to it in steps of at most 10x;
"learned": the learned
conditional of the tracks, below; "proposal": a q = N(m, S) given by the caller in Python, e.g. `linear`'s
Gaussian), with S times proposal_scale. The bridge q^(1-l) (p0 L)^l is a valid path for any q: its ends
are q and pi, and the incremental weights (p0 L / q)^(l' - l) make each stage an exact importance step,
so the product of the stages' mean weights estimates Z = ∫ p0 L dx, the evidence, as from the prior
(q = p0 gives the usual likelihood tempering). Importance sampling from q and stopping is the special
case the adaptive schedule picks by itself: if the weights p0 L / q already keep target_ess, the first
stage reaches l = 1. q must cover pi: a posterior mode that q misses is found only if the HMC moves
reach it, so inflate S (proposal_scale > 1) for a proposal that may be overconfident. The diagnostics
say how far the start was from where the sampler ended (`start_offsets`: q's mean from the posterior
mean in posterior stds, and q's std over the posterior's), the cheap measure of how good a proposal was.

Start "learned" (the posterior amortised by a trained encoder): q is the learned conditional of the field's
tracks, the Gaussian N(m_L, diag v_L) that `hybrid` takes as its prior in closed form (in a chosen basis, or
with --closed-form true; by default hybrid estimates the same conditional from a prior bank's moments): the
encoder's embedding of the tracks (learned.field_queries) through the closed form of its similarity
(learned.closed_form, eqs. 41a / 48a), capped at the prior and floored (hybrid.learned_prior);
`learned_proposal` builds it. The encoder is needed for this start only, so the `Sample` method
(lagda.assimilation.methods.registry) takes it as an optional Scorer, restored by `Sample.from_run(run)`
(`lagda assimilate --method sample --start learned --model RUN`), and the result records the run. Refused, one
line each: a similarity with no closed form (cosine, as the shipped encoder's, and kernel sets: their conditional
is a bank's reweighting, not a Gaussian), an encoder of other modes than the model's, and a chosen basis
(--basis; hybrid has its own basis rules). Tracks the encoder cannot read (a transformer encoder away
from its training times) follow hybrid's rule: the prior instead, said in the field's info ("learned_fallback"),
which here means the prior start. hybrid's learned_noise_limit is not applied: it guards an estimate that
multiplies the conditional in, while the bridge's weights correct a proposal exactly, so an untrusted q costs
stages, not accuracy. A q far outside the prior can cost very many, and can end with NaN particles (NaN rhat
and start_offsets in the field's info); widen q (proposal_scale > 1) for an encoder not known to be calibrated.

Start "hybrid" (the learned conditional after the data have weighed in): q is `hybrid`'s posterior of the field,
the learned conditional as the prior of the velocity inversion, refined by Gauss-Newton 4D-Var on sparse tracks,
as the Gaussian of its members (`Gaussian.of_members`: their mean and weighted deviations, HYBRID_MEMBERS_PER_DIM
x 2K members). Any encoder hybrid reads serves, the shipped cosine one too, so the command defaults to it as the
learned methods do. The learned start is the encoder's guess before the data, nearly as wide as the prior on
informative tracks, so the bridge still has all of the data's information to cross; this start is after the data,
near the posterior like var's Laplace start. docs/results/assimilation-amortised.md times both against the prior start.
The field's info keeps hybrid's decisions under "hybrid" (its noise estimate,
prior inflation, refinement) and its seconds.

Importance sampling first (SampleConfig.importance_draws > 0): a start near the posterior (hybrid's or var's
Gaussian) often needs no bridge at all. Each run then draws q in batches of `particles`, weights every draw by
p0 L / q (one forward run of the tracks, no gradient: far cheaper than a stage's HMC moves) until the weights' ESS
reaches target_ess x particles or importance_draws are drawn, and takes the weighted draws as its sample when
that ESS is reached and the weights' Pareto k (`pareto_k`, as PSIS estimates it) is below PARETO_K_MAX: the ESS
alone can look fine while the weights have a heavy tail (q narrower than pi somewhere), which k detects. A run
whose weights fail tempers from q as without this setting; the run's record says which ("importance": draws,
ESS, Pareto k, accepted) and the result counts the runs served (importance_runs). Weighted draws keep every
diagnostic below: each draw is its own lineage, so the lineage standard error is importance sampling's.

Diagnostics (JSON types, per run and across `runs` independent runs, each from its own key): the
schedule, ESS, acceptance, step size and leapfrog count per stage, the log evidence, the
particles' lineages, R-hat per coordinate across runs (Gelman-Rubin with runs as chains), the
Monte Carlo standard error of the mean within each run (Chan & Lai's estimator: the particles
grouped by their initial ancestor) and between runs, and whether the runs agree within it; and the largest
fraction of divergent HMC transitions in any stage (`divergent_max`; blackjax calls a transition divergent when its
energy error exceeds 1000). R-hat and agreement compare runs that start from the same q, so they cannot see a
region that every run misses; divergences can: they mark where the moves could not follow the posterior's
curvature, and the particles then do not reach those regions. Above config.DIVERGENT_WARN the field's decision line
says so (lagda.assimilation.posterior): the sample's spread may be too narrow.

The defaults (target_acceptance 0.9, at most 48 leapfrog steps, 4 stages at l = 1) are for posteriors with a
curved valley, as on K = 49 sparse tracks of several drifters: small steps on trajectories as long
(ceil(trajectory_length / step) leapfrog steps, so more of them) and several moves at l = 1 follow the valley,
for more HMC gradients per particle. docs/results/assimilation-sampler.md ("The kernel's settings") measures
them; on the linear-Gaussian twin the mean, covariance and evidence stay within their Monte Carlo error
(tests/test_sample_twin.py).
"""

from __future__ import annotations

import functools
import math
import time
from contextlib import contextmanager
from typing import Callable, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.smc.resampling import systematic
from blackjax.smc.tempered import TemperedSMCState
from scipy import stats
from scipy.special import logsumexp

from lagda.assimilation.methods.config import STEP_SIZE_RANGE, SampleConfig, VarConfig
from lagda.assimilation.methods.fused import FusedOperator, fused_residuals, fused_residuals_jacobian
from lagda.assimilation.methods.observations import arrange
from lagda.assimilation.methods.variational import cost, map_fit, observation_problem, residuals
from lagda.assimilation.model import FlowModel, to_complex, to_real
from lagda.assimilation.posterior import FieldEstimate

HYBRID_MEMBERS_PER_DIM = 40  # start "hybrid": members per coordinate of q (its spread within ~sqrt(1/40) = 16%)
RIDGE = 1e-9  # dense whitening: covariance + RIDGE diag(covariance), positive definite in float64
INITIAL_DRAW = 2**31 - 1  # fold_in index of a run's initial draw; stage s uses fold_in(run key, s)
IMPORTANCE_DRAW = 2**31 - 2  # fold_in index of a run's importance draws (batch b: fold_in of that key, b)
PARETO_K_MAX = 0.7  # importance weights are trusted below this Pareto k (PSIS; Vehtari et al. 2024)
STAGE_RECORD = ("tempering", "ess", "acceptance", "divergent", "step_size", "leapfrog_steps")  # per stage, per run
PROPOSAL_RIDGES = (0.0, 1e-12, 1e-9, 1e-6)  # relative ridges tried on a given covariance (gaussian_root)


class Gaussian(NamedTuple):
    """N(mean, cov) over R^d: mean `(d,)`, cov `(d,)` (variances) or `(d, d)`, or given by a square root.

    root `(d, d)`, any S with cov = S S^T (e.g. a Laplace factor), replaces cov when given: factorised by QR,
    never squared, so posteriors whose variances span more than float64's 1e16 keep their narrow directions.
    """

    mean: np.ndarray
    cov: np.ndarray | None = None
    root: np.ndarray | None = None

    @classmethod
    def of_members(cls, samples, weights) -> "Gaussian":
        """Returns the Gaussian of weighted members (another method's posterior): their mean, and as root `(d, member)`
        their weighted deviations, so the covariance is never squared. samples: complex `(member, mode)` or real
        `(member, d)`; weights `(member,)`, summing to 1. Needs at least d members of nonsingular spread."""
        x = to_real(samples) if np.iscomplexobj(samples) else np.asarray(samples, np.float64)
        w = np.asarray(weights, np.float64)
        mean = w @ x
        return cls(mean, root=((x - mean[None, :]) * np.sqrt(w)[:, None]).T)


def gaussian_root(gaussian: Gaussian, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Returns (mean `(d,)`, lower Cholesky factor `(d, d)` of scale * cov), float64.

    A covariance positive definite only up to rounding (a posterior over well and barely determined
    directions at once) gets the smallest ridge r diag(cov), r in PROPOSAL_RIDGES, that factorises.

    Raises
    ------
    ValueError
        if cov is neither `(d,)` nor `(d, d)`, or its diagonal is not positive, or no ridge helps.
    """
    mean, d = np.asarray(gaussian.mean, np.float64), np.shape(gaussian.mean)[0]
    if gaussian.root is not None:
        return mean, _lower_root(np.asarray(gaussian.root, np.float64) * np.sqrt(scale), d)
    cov = np.asarray(gaussian.cov, np.float64) * scale
    if mean.ndim != 1 or cov.shape not in ((d,), (d, d)):
        raise ValueError(f"a Gaussian needs mean (d,) and cov (d,) or (d, d), got {mean.shape} and {cov.shape}")
    if cov.ndim == 1:
        if not np.all(cov > 0):
            raise ValueError("a Gaussian's variances must be > 0")
        return mean, np.diag(np.sqrt(cov))
    cov, var = (cov + cov.T) / 2.0, np.diag(cov)
    if not np.all(var > 0):
        raise ValueError("a Gaussian's variances must be > 0")
    for ridge in PROPOSAL_RIDGES:
        try:
            return mean, np.linalg.cholesky(cov + np.diag(ridge * var))
        except np.linalg.LinAlgError:
            continue
    raise ValueError(f"a Gaussian's covariance must be positive definite (tried ridges {PROPOSAL_RIDGES} x diag)")


def _lower_root(root, d: int) -> np.ndarray:
    """Returns the lower triangular L `(d, d)` with L L^T = root root^T (QR of root^T: root = R^T Q^T) for root
    `(d, n)`, n >= d."""
    if root.ndim != 2 or root.shape[0] != d or root.shape[1] < d:
        raise ValueError(f"a Gaussian's root must be ({d}, n) with n >= {d}, got {root.shape}")
    lower = np.linalg.qr(root.T, mode="r").T
    lower = lower * np.where(np.diag(lower) < 0, -1.0, 1.0)[None, :]  # column signs: a positive diagonal
    if not np.all(np.diag(lower) > 0):
        raise ValueError("a Gaussian's root must be nonsingular")
    return lower


def log_gaussian(x, mean, root):
    """Returns log N(x; mean, root root^T) for x `(d,)`, root the lower Cholesky factor `(d, d)`."""
    z = jax.scipy.linalg.solve_triangular(root, x - mean, lower=True)
    return -0.5 * z @ z - jnp.sum(jnp.log(jnp.diag(root))) - 0.5 * x.shape[0] * jnp.log(2.0 * jnp.pi)


def log_initial_white(v, initial):
    """Returns log q(x) at x = m_q + R_q v for v `(d,)`: log N(v; 0, I) - log det R_q (initial = (m_q, R_q))."""
    return -0.5 * v @ v - jnp.sum(jnp.log(jnp.diag(initial[1]))) - 0.5 * v.shape[0] * jnp.log(2.0 * jnp.pi)


def from_white(v, initial) -> np.ndarray:
    """Returns x = m_q + R_q v `(n, d)` for standard coordinates v `(n, d)` under q (initial = (m_q, R_q))."""
    mean, root = (np.asarray(a) for a in initial)
    return mean[None, :] + np.asarray(v) @ root.T


def _whitening(particles, weights, dense: bool):
    """Returns (mean `(d,)`, lower factor `(d, d)`) of the particles' weighted covariance (or its diagonal)."""
    mean = weights @ particles
    centred = particles - mean[None, :]
    cov = (centred * weights[:, None]).T @ centred
    var = jnp.maximum(jnp.diag(cov), jnp.finfo(cov.dtype).tiny)
    if dense:
        return mean, jnp.linalg.cholesky(cov + jnp.diag(RIDGE * var))
    return mean, jnp.diag(jnp.sqrt(var))


class StageStats(NamedTuple):
    """One stage, as the jitted stage function returns it (scalars are 0-d arrays)."""

    tempering: jax.Array  # l after the stage
    ess: jax.Array  # ESS of the new weights / N
    acceptance: jax.Array  # mean HMC acceptance probability over particles and transitions
    divergent: jax.Array  # fraction of divergent transitions
    leapfrog_steps: jax.Array  # leapfrog steps per transition
    log_increment: jax.Array  # log of the stage's mean incremental weight (its factor of the evidence)
    ancestors: jax.Array  # int (particle,): the particle each one was resampled from


@functools.lru_cache(maxsize=16)
def stage_function(log_likelihood: Callable, mcmc_steps: int, target_ess: float, dense: bool,
                   trajectory_length: float, max_leapfrog_steps: int, particle_batch: int = 0) -> Callable:
    """Returns the jitted SMC stage (key, stage, particles, weights, l, step_size, data, initial, prior) ->
    (particles, weights, StageStats), its randomness fold_in(key, stage); cached, so one compilation serves
    every stage, run and call with the same log likelihood and settings (and array shapes).

    log_likelihood(x `(d,)`, data) -> scalar. initial (q), prior (p0): (mean `(d,)`, lower factor `(d, d)`).
    Particles are v `(particle, d)`, x = m_q + R_q v: standard normal under q, so their covariance stays
    well conditioned while q is a fair approximation, however narrow its directions are in x. The stage
    whitens v by the incoming particles' weighted covariance, resamples, moves each particle by
    `mcmc_steps` HMC transitions invariant for pi_l ∝ q^(1-l) (p0 L)^l and reweights by (p0 L / q)^(l' - l),
    l' from blackjax's ESS bisection (l' = l = 1: moves only). From the prior (q = p0) p0 / q is 1 to rounding.
    """

    def stage(key, index, particles, weights, tempering, step_size, data, initial, prior):
        mean, root = _whitening(particles, weights, dense)  # v = mean + root u, u the whitened coordinates
        shift, factor = initial[0] + initial[1] @ mean, initial[1] @ root  # x = shift + factor u

        def log_initial(u):  # log q(x), x = m_q + R_q v
            return log_initial_white(mean + root @ u, initial)

        def log_ratio(u):  # log p0(x) + log L(x) - log q(x)
            return log_gaussian(shift + factor @ u, *prior) + log_likelihood(shift + factor @ u, data) - log_initial(u)

        kernel = blackjax.smc.adaptive_tempered.build_kernel(
            log_initial, log_ratio, blackjax.mcmc.hmc.build_kernel(), blackjax.mcmc.hmc.init, systematic, target_ess,
            batch_size=particle_batch)
        leapfrog = jnp.clip(jnp.ceil(trajectory_length / step_size), 1, max_leapfrog_steps).astype(jnp.int32)
        params = {"step_size": jnp.reshape(step_size, (1,)),
                  "inverse_mass_matrix": jnp.ones((1, particles.shape[1]), particles.dtype),
                  "num_integration_steps": jnp.reshape(leapfrog, (1,))}
        white = jax.scipy.linalg.solve_triangular(root, (particles - mean[None, :]).T, lower=True).T
        state, info = kernel(jax.random.fold_in(key, index), TemperedSMCState(white, weights, tempering), mcmc_steps,
                             params)
        moves = info.update_info
        stats_ = StageStats(state.tempering_param, 1.0 / jnp.sum(state.weights**2) / weights.shape[0],
                            jnp.mean(moves.acceptance_rate), jnp.mean(moves.is_divergent), leapfrog,
                            info.log_likelihood_increment, info.ancestors)
        return mean[None, :] + state.particles @ root.T, state.weights, stats_

    return jax.jit(stage)


def pareto_k(log_weights) -> float:
    """Returns the Pareto shape k of the importance weights' upper tail, as Pareto smoothed importance sampling
    (PSIS) estimates it: the largest M = min(n / 5, 3 sqrt(n)) weights' excess over the next one, fitted by a
    generalised Pareto (scipy, maximum likelihood, location 0). The weights have a finite variance for k < 0.5;
    up to PARETO_K_MAX importance sampling is still reliable in practice, above it the ESS itself is not to be
    trusted (Vehtari et al. 2024). -inf when the tail is flat (the weights equal within 1e-4); inf for fewer than
    25 weights (too few to see a tail: not trusted). log_weights `(n,)`."""
    lw = np.sort(np.asarray(log_weights, np.float64))
    if lw.size < 25:
        return math.inf
    m = int(min(lw.size / 5, 3 * math.sqrt(lw.size)))
    w = np.exp(lw - lw[-1])
    excess = w[-m:] - w[-m - 1]
    if not np.any(excess > 1e-4):  # equal to rounding (q the posterior): no tail to fit
        return -math.inf
    return float(stats.genpareto.fit(excess, floc=0.0)[0])


def importance_weights(log_weights) -> tuple[np.ndarray, float]:
    """Returns (normalised weights `(n,)`, their ESS) of importance log weights `(n,)`; -inf is a weight of 0. A NaN
    or +inf, or no finite weight, makes the draws unusable: weights 0 and ESS 0."""
    lw = np.asarray(log_weights, np.float64)
    if np.any(np.isnan(lw) | (lw == np.inf)) or not np.any(np.isfinite(lw)):
        return np.zeros_like(lw), 0.0
    w = np.exp(lw - np.max(lw))
    return w / np.sum(w), float(np.sum(w) ** 2 / np.sum(w**2))


def importance_served(ess: float, k: float, config: SampleConfig) -> bool:
    """Whether importance draws are a run's sample: ESS at least target_ess x particles and Pareto k below
    PARETO_K_MAX (else the run tempers)."""
    return ess >= config.target_ess * config.particles and k < PARETO_K_MAX


@functools.lru_cache(maxsize=16)
def importance_function(log_likelihood: Callable) -> Callable:
    """Returns the jitted (v `(n, d)`, data, initial, prior) -> log weights `(n,)`: log p0(x) + log L(x) - log q(x) at
    x = m_q + R_q v (q = initial, p0 = prior: (mean, lower factor)); no gradient, so one forward run per draw."""

    def log_weight(v, data, initial, prior):
        x = initial[0] + initial[1] @ v
        return log_gaussian(x, *prior) + log_likelihood(x, data) - log_initial_white(v, initial)

    return jax.jit(jax.vmap(log_weight, in_axes=(0, None, None, None)))


def _importance_run(log_likelihood: Callable, key, config: SampleConfig, data, initial, prior) -> dict:
    """Returns one run by importance sampling from q alone: batches of `particles` draws until their ESS reaches
    target_ess x particles or importance_draws are drawn; "importance" says whether they are the run's sample
    (that ESS and a Pareto k below PARETO_K_MAX), else the caller tempers."""
    weigh, d = importance_function(log_likelihood), initial[0].shape[0]
    draws, log_weights, ess = [], [], 0.0
    while sum(len(v) for v in draws) < config.importance_draws and ess < config.target_ess * config.particles:
        v = jax.random.normal(jax.random.fold_in(jax.random.fold_in(key, IMPORTANCE_DRAW), len(draws)),
                              (config.particles, d), initial[0].dtype)
        draws.append(np.asarray(v))
        log_weights.append(np.asarray(weigh(v, data, initial, prior)))
        lw = np.concatenate(log_weights)
        w, ess = importance_weights(lw)
    k = pareto_k(lw) if ess > 0 else math.inf
    accepted = importance_served(ess, k, config)
    return {"particles": from_white(np.concatenate(draws), initial), "weights": w,
            "eves": np.arange(lw.size), "log_evidence": float(logsumexp(lw) - math.log(lw.size)),
            "tempering_complete": accepted, **{name: [] for name in STAGE_RECORD},
            "importance": {"draws": int(lw.size), "ess": ess, "pareto_k": k, "accepted": bool(accepted)}}


def _run(stage: Callable, key, config: SampleConfig, data, initial, prior, progress) -> dict:
    """Returns one run's final particles x `(particle, d)`, weights, initial ancestors and per-stage record."""
    particles = jax.random.normal(jax.random.fold_in(key, INITIAL_DRAW), (config.particles, initial[0].shape[0]),
                                  initial[0].dtype)  # v ~ N(0, I): x ~ q
    weights = np.full(config.particles, 1.0 / config.particles)
    tempering, step_size, eves = 0.0, config.step_size, np.arange(config.particles)
    record = {k: [] for k in STAGE_RECORD}
    log_evidence, finals, stage_index = 0.0, 0, 0
    while finals < config.final_moves:
        finals += tempering >= 1.0  # a stage at l = 1 resamples and moves only
        particles, weights, s = stage(key, stage_index, particles, weights, tempering, step_size, data, initial, prior)
        tempering, acceptance = float(s.tempering), float(s.acceptance)
        eves = eves[np.asarray(s.ancestors)]
        log_evidence += float(s.log_increment)
        for name, value in (("tempering", tempering), ("ess", float(s.ess)), ("acceptance", acceptance),
                            ("divergent", float(s.divergent)), ("step_size", step_size),
                            ("leapfrog_steps", int(s.leapfrog_steps))):
            record[name].append(value)
        step_size = float(np.clip(step_size * math.exp(acceptance - config.target_acceptance),
                                  *STEP_SIZE_RANGE))
        stage_index += 1
        if progress is not None:
            progress(stage_index, tempering)
        if tempering < 1.0 and stage_index >= config.max_stages:
            break
    return {"particles": from_white(particles, initial), "weights": np.asarray(weights), "eves": eves,
            "log_evidence": log_evidence, "tempering_complete": tempering >= 1.0, **record}


def lineage_standard_error(particles, weights, eves) -> np.ndarray:
    """Returns the Monte Carlo standard error `(d,)` of the weighted mean of one SMC run.

    Chan & Lai's estimator: se^2 = sum_e (sum_{i: E_i = e} w_i (x_i - xbar))^2 over the particles'
    initial ancestors e (their "Eve" indices). It degrades as the lineages coalesce (few distinct e).
    """
    centred = weights[:, None] * (particles - weights @ particles)
    sums = np.zeros((particles.shape[0], particles.shape[1]))
    np.add.at(sums, eves, centred)
    return np.sqrt(np.sum(sums**2, axis=0))


def gelman_rubin(means, variances, n: int) -> np.ndarray:
    """Returns R-hat `(d,)` of chains (or runs) of n draws each from their means and variances `(chain, d)`:
    sqrt(((n - 1) / n W + B) / W), W the mean within-chain variance, B the variance of the chain means."""
    within, between = np.mean(variances, axis=0), np.var(means, axis=0, ddof=1)
    return np.sqrt(((n - 1) / n * within + between) / within)


def run_diagnostics(runs: list[dict]) -> dict:
    """Returns the across-run diagnostics (JSON types): R-hat, MC standard errors, agreement of the runs.

    R-hat per coordinate (`gelman_rubin`, each run a chain of n particles). The runs agree within their
    own errors when chi2 = sum_r (mean_r - mean)^2 / se_r^2 (se_r the lineage standard error, mean the
    inverse-variance weighted one) follows chi2 with runs - 1 degrees of freedom.
    """
    means = np.stack([r["weights"] @ r["particles"] for r in runs])
    variances = np.stack([r["weights"] @ (r["particles"] - m) ** 2 for r, m in zip(runs, means)])
    se = np.stack([lineage_standard_error(r["particles"], r["weights"], r["eves"]) for r in runs])
    std = np.sqrt(np.mean(variances, axis=0))
    out = {"mean_se_lineage_over_std_median": float(np.median(np.sqrt(np.mean(se**2, 0) / len(runs)) / std)),
           "mean_se_lineage_over_std_max": float(np.max(np.sqrt(np.mean(se**2, 0) / len(runs)) / std)),
           "lineages_min": int(min(len(np.unique(r["eves"])) for r in runs))}
    if len(runs) < 2:
        return out
    between = np.var(means, axis=0, ddof=1)
    rhat = gelman_rubin(means, variances, runs[0]["particles"].shape[0])
    precision = 1.0 / np.maximum(se, np.finfo(np.float64).tiny) ** 2
    pooled = np.sum(precision * means, axis=0) / np.sum(precision, axis=0)
    chi2 = np.sum(precision * (means - pooled) ** 2, axis=0)
    dof = len(runs) - 1
    return {**out, "rhat_max": float(np.max(rhat)), "rhat_median": float(np.median(rhat)),
            "mean_se_between_over_std_median": float(np.median(np.sqrt(between / len(runs)) / std)),
            "mean_se_between_over_std_max": float(np.max(np.sqrt(between / len(runs)) / std)),
            "agreement_chi2_median_ratio": float(np.median(chi2) / stats.chi2.median(dof)),
            "agreement_fraction_beyond_p99": float(np.mean(chi2 > stats.chi2.ppf(0.99, dof)))}


def start_offsets(initial, samples, weights) -> dict:
    """Returns how far the start q = N(mean, root root^T) (`initial`, the scaled factor) was from the posterior of the
    weighted samples `(n, d)`, in posterior stds per coordinate: the RMS and largest |q mean - posterior mean| / std,
    and the median q std / posterior std (above 1: q was wider)."""
    q_mean, q_root = (np.asarray(a, np.float64) for a in initial)
    mean = weights @ samples
    std = np.maximum(np.sqrt(weights @ (samples - mean) ** 2), np.finfo(np.float64).tiny)
    offset = (q_mean - mean) / std
    return {"start_offset_rms": float(np.sqrt(np.mean(offset**2))), "start_offset_max": float(np.max(np.abs(offset))),
            "start_spread_median": float(np.median(np.sqrt(np.sum(q_root**2, axis=1)) / std))}


def check_particles(config: SampleConfig, d: int) -> None:
    """Raises ValueError (one line) where the dense mass matrix's covariance of d coordinates cannot be estimated
    from config.particles (it needs more than 2 d)."""
    if config.mass_matrix == "dense" and config.particles <= 2 * d:
        raise ValueError(f"mass_matrix 'dense' needs particles > 2 d = {2 * d}, got {config.particles}")


def smc_sample(log_likelihood: Callable, prior: Gaussian, key, config: SampleConfig, data=(),
               proposal: Gaussian | None = None, progress: Callable | None = None):
    """Returns (samples `(run * particle, d)`, weights `(run * particle,)` summing to 1, diagnostics dict)
    of the posterior pi(x) ∝ N(x; prior) exp(log_likelihood(x, data)) on R^d by adaptive tempered SMC.

    Parameters
    ----------
    log_likelihood
        (x `(d,)`, data) -> scalar, traceable; pass the same function object to reuse
        the compiled stage (data is traced, so new data does not recompile).
    prior
        the Gaussian prior p0.
    key
        JAX PRNG key; run r uses fold_in(key, r).
    config
        SampleConfig (validated here); start "proposal" needs `proposal`, the Gaussian q; importance_draws
        > 0 tries importance sampling from q before tempering, per run (module docstring).
    progress
        called as progress(stage, l) after every stage (stages count on across runs).

    Returns
    -------
    samples : numpy.ndarray
        `(run * particle, d)`: the runs' final particles pooled; run r's particles are the r-th block of rows (N rows
        each, or an importance-sampled run's draws).
    weights : numpy.ndarray
        `(run * particle,)`: each run's weights divided by the number of runs.
    diagnostics : dict
        per run the schedule ("tempering"), ESS / N, acceptance, divergent fraction, step size
        and leapfrog steps per stage, stages, log_evidence, tempering_complete (and "importance" with
        importance_draws); across runs run_diagnostics, the log of the runs' mean evidence estimate,
        stages_max, start_offsets (q against the pooled posterior), with importance_draws importance_runs,
        importance_ess_min and importance_pareto_k_max; divergent_max (the largest divergent fraction of any
        stage of any run, 0 where no run tempered); seconds.

    Raises
    ------
    ValueError
        for a bad config, a proposal missing or not asked for, or mismatched shapes.
    """
    config.validate()
    if (config.start != "prior") != (proposal is not None):
        raise ValueError(f"start {config.start!r} {'needs' if proposal is None else 'takes no'} proposal")
    start_time = time.perf_counter()
    prior_root = tuple(jnp.asarray(a) for a in gaussian_root(prior))
    initial = prior_root if proposal is None else tuple(jnp.asarray(a) for a in
                                                        gaussian_root(proposal, config.proposal_scale))
    d = prior_root[0].shape[0]
    if initial[0].shape != (d,):
        raise ValueError(f"proposal mean {initial[0].shape} does not match prior mean {(d,)}")
    check_particles(config, d)
    stage = stage_function(log_likelihood, config.mcmc_steps, float(config.target_ess), config.mass_matrix == "dense",
                           float(config.trajectory_length), config.max_leapfrog_steps, config.particle_batch)
    done = [0]

    def counted(stage_index, tempering):
        if progress is not None:
            progress(done[0] + stage_index, tempering)

    runs = []
    for r in range(config.runs):
        run_key, importance = jax.random.fold_in(key, r), None
        if config.importance_draws:
            run = _importance_run(log_likelihood, run_key, config, data, initial, prior_root)
            importance = run["importance"]
            if importance["accepted"]:
                counted(0, 1.0)
        if importance is None or not importance["accepted"]:  # the bridge from q, as without importance sampling
            run = _run(stage, run_key, config, data, initial, prior_root, counted)
        runs.append(run if importance is None else {**run, "importance": importance})
        done[0] += len(runs[-1]["tempering"])
    samples = np.concatenate([r["particles"] for r in runs])
    weights = np.concatenate([r["weights"] for r in runs]) / config.runs
    per_run = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()
                if k not in ("particles", "weights", "eves")} | {"stages": len(r["tempering"])} for r in runs]
    if config.importance_draws:
        per_run_importance = [r["importance"] for r in runs]
        importance = {"importance_runs": sum(i["accepted"] for i in per_run_importance),
                      "importance_ess_min": min(i["ess"] for i in per_run_importance),
                      "importance_pareto_k_max": max(i["pareto_k"] for i in per_run_importance)}
    else:
        importance = {}
    diagnostics = {"runs": per_run, **run_diagnostics(runs), **importance, "particles": config.particles,
                   "n_runs": config.runs,
                   "stages_max": max(p["stages"] for p in per_run),
                   "tempering_complete": all(p["tempering_complete"] for p in per_run),
                   "divergent_max": max((max(p["divergent"], default=0.0) for p in per_run), default=0.0),
                   "log_evidence": float(logsumexp([p["log_evidence"] for p in per_run]) - math.log(config.runs)),
                   **start_offsets(initial, samples, weights / weights.sum()),
                   "seconds": time.perf_counter() - start_time}
    return samples, weights / weights.sum(), diagnostics


@contextmanager
def progress_bar(desc: str = "sample"):
    """Yields a `progress(stage, l)` callback that draws l in [0, 1] as a tqdm bar; closes it on exit.

    The bar appears on the first stage, so an error before any (a setting the field's size rules out) prints no
    empty bar before its message.
    """
    from tqdm import tqdm

    bar = None

    def update(stage: int, tempering: float) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=1.0, desc=desc, bar_format="{desc}: {percentage:3.0f}% of l |{bar}| {postfix}",
                       dynamic_ncols=True)
        bar.n = min(tempering, 1.0)
        bar.set_postfix_str(f"stage {stage}, l = {tempering:.3g}")

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def _misfit_rows(rows, x):
    """Returns the misfit rows of variational.residuals (or of its Jacobian): those before the 2K prior rows."""
    return rows[: rows.shape[0] - x.shape[0]]


@functools.lru_cache(maxsize=16)
def track_log_likelihood(n_sim: int, stride: int) -> Callable:
    """Returns log L(x, data) = -|misfit|^2 / 2 + data[1] for the tracks of one field, the misfit the data
    rows of variational.residuals(x, *data[0], n_sim, stride) and data[1] its normalising constant;
    cached per (n_sim, stride), so fields of one regime share the compiled sampler."""

    def log_likelihood(x, data):
        problem, log_norm = data
        return -0.5 * jnp.sum(_misfit_rows(residuals(x, *problem, n_sim, stride), x) ** 2) + log_norm

    return log_likelihood


@functools.lru_cache(maxsize=16)
def fused_log_likelihood(op: FusedOperator) -> Callable:
    """Returns log L(x, data) of `track_log_likelihood` through the fused operator `op` (tracks observed every
    fused.FUSED_MIN_STRIDE or more steps), data = (Problem.fused_arguments() without op, normalising constant).

    The value comes from fused_residuals; its gradient -J^T r from the one fused run of fused_residuals_jacobian,
    the sensitivity in forward mode, which costs ~1/8 of reverse mode through the RK4 steps (K = 49 on a CPU:
    benchmarks/bench_jacobian.py --part sampler). The same log L and gradient to rounding; cached per operator.
    """

    @jax.custom_vjp
    def log_likelihood(x, data):
        arguments, log_norm = data
        misfit = _misfit_rows(fused_residuals(x, *arguments, op), x)
        return -0.5 * jnp.sum(misfit**2) + log_norm

    def forward(x, data):
        arguments, log_norm = data
        r, jac = fused_residuals_jacobian(x, *arguments, op)
        misfit, jac = _misfit_rows(r, x), _misfit_rows(jac, x)
        return -0.5 * jnp.sum(misfit**2) + log_norm, -(jac.T @ misfit)

    def backward(gradient, cotangent):
        return cotangent * gradient, None  # the data are constants of the target

    log_likelihood.defvjp(forward, backward)
    return log_likelihood


def problem_likelihood(problem, log_norm: float) -> tuple[Callable, tuple]:
    """Returns (log_likelihood, data) of the tracks of an observation_problem: the fused one where the problem has
    a fused operator, else `track_log_likelihood`; log_norm is the misfit's normalising constant."""
    if problem.operator is not None:
        return fused_log_likelihood(problem.operator), (problem.fused_arguments()[:-1], log_norm)
    return track_log_likelihood(*problem[-2:]), (problem[:-2], log_norm)


def _kept(samples, weights, members: int, key):
    """Returns the samples and weights, systematically resampled to `members` equal weights when there are more."""
    if samples.shape[0] <= members:
        return samples, weights
    index = np.asarray(systematic(key, jnp.asarray(weights), members))
    return samples[index], np.full(members, 1.0 / members)


def var_laplace(positions, times, release, model: FlowModel, noise_std: float | None, sigma_floor: float,
                prior=None):
    """Returns (var's MapFit, its seconds): the MAP with the noise estimated, then (noise_std given) refitted from
    there at sigmas stepping at most 10x at a time to the given one (floored at sigma_floor). Its x and root are
    var's Laplace Gaussian N(x, root root^T), the "var" start; arguments as assimilate_sample's."""
    # a continuation in sigma, which a fit at a small given noise from the prior mean lacks (on an exact sparse
    # K = 49 track at the 1e-6 floor it ended at a cost of 1e10, against 11.7 and converged down the steps)
    fit = map_fit(positions, times, release, model, VarConfig(sigma_floor=sigma_floor), prior=prior)
    seconds = fit.info["fit_seconds"]
    if noise_std is not None:
        given = max(noise_std, sigma_floor)
        steps = max(1, math.ceil(abs(math.log10(fit.sigma / given))))
        for step in np.geomspace(fit.sigma, given, steps + 1)[1:]:
            fit = map_fit(positions, times, release, model, VarConfig(noise_std=float(step), sigma_floor=sigma_floor),
                          x_init=fit.x, stages=(1.0,), prior=prior)
            seconds += fit.info["fit_seconds"]
    return fit, seconds


def assimilate_sample(positions, times, release, model: FlowModel, config: SampleConfig, key, proposal=None,
                      prior=None, progress=None) -> FieldEstimate:
    """Returns the tempered-SMC posterior of one field: the pooled particles of every run, weighted.

    The target is exp(-J(x)) with J var's 4D-Var cost at the misfit's noise std sigma: config.noise_std
    when given, else the noise the evidence gives at var's MAP (variational.map_fit), so the posterior is
    the one given that empirical-Bayes sigma (info says which). start "var" starts from var's Laplace
    Gaussian at its MAP (covariance times proposal_scale), "proposal" from the caller's, "learned" from the
    learned conditional the caller passes as `proposal` (`learned_proposal`), "hybrid" from hybrid's posterior the
    caller passes (`Gaussian.of_members`; the Sample method builds both).

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` unwrapped
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.
    config
        SampleConfig
    key
        JAX PRNG key.
    proposal
        Gaussian over x = (Re c, Im c) `(2K,)` to start from (config.start "proposal", "learned", "hybrid"),
        e.g. the mean and covariance of another method's estimate, or None.
    prior
        (mean `(2K,)`, var `(2K,)`) replacing N(0, D), or None.
    progress
        progress(stage, l) after every stage (progress_bar makes one).

    Returns
    -------
    FieldEstimate
        FieldEstimate of complex samples `(member, mode)`; info: sigma, noise_source, start, the sampler's
        diagnostics (smc_sample), var's MAP cost when it ran, cost_mean (J at the posterior mean), seconds.

    Raises
    ------
    ValueError
        for a bad config (too few particles for the dense mass matrix included, before var's fit),
        or a proposal missing for a start but prior and var (or given for those).
    """
    config.validate()
    check_particles(config, 2 * model.n_modes)  # before var's fit, which the noise estimate may run first
    if (config.start not in ("prior", "var")) != (proposal is not None):  # every other start is the caller's q
        raise ValueError(f"start {config.start!r} {'needs' if proposal is None else 'takes no'} proposal")
    with jax.enable_x64(True):  # sigma may be 1e-6 of positions ~1: float32 cannot hold the misfit
        start_time = time.perf_counter()
        info = {"start": config.start}
        if config.noise_std is None or config.start == "var":
            fit, var_seconds = var_laplace(positions, times, release, model, config.noise_std, config.sigma_floor,
                                           prior)
            sigma, source = fit.sigma, ("given" if config.noise_std is not None else "var " + fit.info["noise_source"])
            info |= {"var_cost": fit.info["cost"], "var_seconds": var_seconds,
                     **{k: fit.info[k] for k in ("sigma_90", "noise_determined") if k in fit.info}}
            if config.start == "var":
                proposal = Gaussian(fit.x, root=fit.root)
        else:
            sigma, source = float(config.noise_std), "given"
        obs = arrange(positions, times, release, model.dt)
        problem = observation_problem(obs, model, sigma, prior=prior)
        n_data = 2.0 * float(np.sum(obs.mask))
        log_likelihood, data = problem_likelihood(problem, -0.5 * n_data * math.log(2.0 * math.pi * sigma**2))
        mean, var = (np.zeros(2 * model.n_modes), model.prior_var) if prior is None else prior
        sample_key, keep_key = jax.random.split(key)
        samples, weights, diagnostics = smc_sample(log_likelihood, Gaussian(mean, var), sample_key, config, data,
                                                   proposal, progress)
        info |= {"sigma": sigma, "noise_source": source, **diagnostics,
                 "cost_mean": cost(weights @ samples, problem), "seconds": time.perf_counter() - start_time}
        samples, weights = _kept(samples, weights, config.members, keep_key)
    return FieldEstimate(to_complex(samples), weights, info=info)


def learned_proposal(tracks, model: FlowModel, scorer) -> tuple[Gaussian | None, str | None]:
    """Returns (q, None) for start "learned": the learned conditional of one field's tracks, the Gaussian hybrid takes
    as its prior (learned.field_queries, learned.closed_form, hybrid.learned_prior); or (None, why) for tracks the
    encoder cannot read (hybrid's rule: the prior instead; the caller starts from it and says why).

    Parameters
    ----------
    tracks
        one field's lagda.io.tracks.Tracks
    model
        the FlowModel the encoder was trained in (its modes, their frequencies and prior: `lagda assimilate --model RUN`
        takes them from the run).
    scorer
        learned.Scorer of a trained run (learned.scorer_from_run).

    Raises
    ------
    ValueError
        (one line) for a chosen basis, a similarity with no closed-form conditional, or an encoder of
        other modes than the model's.
    """
    from lagda.assimilation.methods.hybrid import learned_prior
    from lagda.assimilation.methods.learned import closed_form, field_queries

    n_x = 2 * model.n_modes
    if model.time is not None:
        raise ValueError("sample --start learned works in lagda's own model, not in a chosen basis (--basis): start "
                         "from var or the prior there")
    if scorer.kind not in ("inner", "l2"):
        kind = scorer.kind if isinstance(scorer.kind, str) else type(scorer.kind).__name__
        raise ValueError(f"sample --start learned: the encoder's similarity {kind!r} has no closed-form conditional: "
                         "use a run trained with --similarity inner or l2")
    modes = scorer.modes or {}
    same = (scorer.mask is None or np.shape(scorer.mask) == (n_x,)) and (
        modes.get("k1") is None or (np.array_equal(modes["k1"], model.k1) and np.array_equal(modes["k2"], model.k2)))
    if not same:
        raise ValueError(f"sample --start learned: the encoder was trained on other modes than these tracks' model "
                         f"({model.n_modes} modes): assimilate in the run's model (--model RUN)")
    (query,), (problem,) = field_queries(tracks, scorer)
    if problem is not None:
        return None, problem
    if np.shape(query) != (n_x,):
        raise ValueError(f"sample --start learned: the encoder embeds into {np.shape(query)[0]} coordinates, these "
                         f"tracks' model has {n_x}: assimilate in the run's model (--model RUN)")
    return Gaussian(*learned_prior(*closed_form(query, model, scorer), model)), None
