"""Where does the K = 49 sampler lose its spread? Probes of one benchmark flow's posterior.

Each probe rebuilds the assimilation benchmark's model (K = 49 without --run; --quick: K = 9), flow F of a regime,
and var's Laplace Gaussian N(m, L L^T) at the regime's true noise (sample.var_laplace, the sampler's "var" start);
the posterior is pi(x) ∝ N(x; 0, D) L(x), as `lagda assimilate --method sample` targets it given the true noise.

    python -m experiments.assimilation.posterior_geometry hessian --flow 5  # eigenvalues of L^T H L,
                                                                            # H the full Hessian at m
    python -m experiments.assimilation.posterior_geometry rays --flow 5     # -log pi along random whitened rays,
                                                                            # vs r^2 / 2
    python -m experiments.assimilation.posterior_geometry chains --flow 5 --chains 4 --transitions 800 --step 0.04 \
        --leapfrog 32
    python -m experiments.assimilation.posterior_geometry sampler --flow 5 --particles 512 --set mass_matrix=diagonal
    python -m experiments.assimilation.posterior_geometry sampler --flow 5 --continue-chains 128 --transitions 150
    python -m experiments.assimilation.posterior_geometry sampler --flow 5 --set runs=1 --set members=512 \
        --final-checkpoints 1,4,16
    python -m experiments.assimilation.posterior_geometry targets --target quartic --c 0.2 --set mass_matrix=diagonal

- hessian: the full Hessian of -log pi (jax.hessian through the RK4 steps) in the Laplace-whitened coordinates;
  all eigenvalues 1 where the Laplace Gaussian is the local posterior.
- rays: -log pi(m + r L e) - (-log pi(m)) for 8 random unit e, against a Gaussian's r^2 / 2.
- chains: blackjax HMC chains in the Laplace-whitened coordinates (unit mass), started at m + L (s z), z ~ N(0, I);
  the last 3/4 of each chain kept. Prints the per-coordinate std against the Laplace Gaussian's, the whitened
  stds, R-hat across chains, each chain's mean -log pi above its value at m (a Gaussian's: d / 2), and each
  chain's and the pooled draws' field error and 95% coverage (scores), and the pooled draws' grid-velocity std
  against the truth-started MAP's Laplace Gaussian, as the sampler probe gives it.
- sampler: `sample` started from var (the benchmark's posterior-mean:var) with any SampleConfig setting
  (--set NAME=VALUE), its scores, per-stage records, its grid-velocity std against the truth-started
  MAP's Laplace Gaussian (the benchmark's truth-map row, true noise) and its mean -log pi above var's mode
  (a Gaussian's: d / 2). With --continue-chains N: N of its members continued by the chains' HMC (--step,
  --leapfrog) for --transitions, their spread and -log pi before and after (does the sample lack travel?).
  With --final-checkpoints C1,C2,...: final_moves the largest, and run 0's spread, -log pi and scores after C1, C2, ...
  stages at l = 1 (do the sampler's own moves give it the travel?).
- targets: the same SMC (smc_sample) on targets whose moments are known: a Gaussian with the flow's Laplace
  covariance, started 1.2x wider; or 98 independent light-tailed coordinates exp(-z^2 / 2 - c z^4) mixed by a
  linear map of condition 1e5, started from their Laplace Gaussian. Prints the sample's std over the exact one.
Every probe prints one JSON line (the sampler also one per run's stage record).
Results: docs/results/assimilation-sampler.md ("Where the spread is lost"); the minutes there are the 2-core CPU's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import blackjax  # noqa: E402

from experiments.assimilation import benchmark as bench  # noqa: E402
from lagda.assimilation.fields import grid_posterior  # noqa: E402
from lagda.assimilation.methods import sample as sm  # noqa: E402
from lagda.assimilation.methods.config import HybridConfig, SampleConfig  # noqa: E402
from lagda.assimilation.methods.observations import arrange  # noqa: E402
from lagda.assimilation.methods.registry import METHODS  # noqa: E402
from lagda.assimilation.methods.variational import observation_problem  # noqa: E402
from lagda.assimilation.model import FlowModel, to_complex, to_real  # noqa: E402
from lagda.assimilation.posterior import Posterior  # noqa: E402
from lagda.assimilation.scores import score_posterior, window_times  # noqa: E402
from lagda.io.tracks import Tracks  # noqa: E402

BLOCK = 50  # HMC transitions per compiled block of the chains
DIRECTIONS = 8  # random rays
RADII = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)  # whitened distances along a ray
KEPT_DRAWS = 4096  # pooled chain draws kept for the scores (thinned evenly)


class Flow(NamedTuple):
    """One benchmark flow's posterior: log pi(x `(2K,)`) up to a constant, and var's Laplace Gaussian N(m, L L^T)."""

    model: FlowModel
    tracks: Tracks  # the one flow
    noise: float
    log_density: Callable  # x -> log N(x; 0, D) + log L(x)
    mean: np.ndarray  # m `(2K,)`
    root: np.ndarray  # L `(2K, 2K)`, lower


def flow_posterior(regime: str, flow: int, quick: bool = False) -> Flow:
    """Returns the posterior of the benchmark's flow `flow` of `regime` given its true noise, with var's Laplace."""
    model = bench.default_model(quick)
    n_steps = int(round((0.02 if quick else 0.1) / model.dt))
    reg = bench.REGIMES[regime]
    tracks = bench.regime_tracks(model, reg, n_steps, 2 if quick else 16, [flow])
    noise = max(reg.noise, SampleConfig.sigma_floor)
    fit, _ = sm.var_laplace(tracks.positions, tracks.times, tracks.release, model, noise, SampleConfig.sigma_floor)
    mean, root = sm.gaussian_root(sm.Gaussian(fit.x, root=fit.root))
    problem = observation_problem(arrange(tracks.positions, tracks.times, tracks.release, model.dt), model, noise)
    log_likelihood, data = sm.problem_likelihood(problem, 0.0)
    prior = tuple(jnp.asarray(a) for a in sm.gaussian_root(sm.Gaussian(np.zeros(2 * model.n_modes), model.prior_var)))

    def log_density(x):
        return sm.log_gaussian(x, *prior) + log_likelihood(x, data)

    return Flow(model, tracks, noise, log_density, mean, root)


def whitened_hessian(log_density: Callable, mean, root) -> np.ndarray:
    """Returns the eigenvalues `(d,)` of L^T H L, H the Hessian of -log_density at mean, L = root `(d, d)`."""
    white = jax.hessian(lambda u: -log_density(jnp.asarray(mean) + jnp.asarray(root) @ u))
    return np.linalg.eigvalsh(np.asarray(white(jnp.zeros(len(mean)))))


@functools.cache
def batched_energy(log_density: Callable) -> Callable:
    """Returns the jitted x `(n, d)` -> -log_density(x) `(n,)`, compiled once per log_density and shape."""
    return jax.jit(jax.vmap(lambda x: -log_density(x)))


def energy_rise(log_density: Callable, mean, points) -> np.ndarray:
    """Returns -log_density(x) + log_density(mean) `(n,)` at the points x `(n, d)` (one batched evaluation)."""
    return np.asarray(batched_energy(log_density)(jnp.asarray(points))) + float(log_density(jnp.asarray(mean)))


def ray_energies(log_density: Callable, mean, root, directions, radii) -> np.ndarray:
    """Returns -log_density(mean + r root e) + log_density(mean) `(direction, radius)` for unit rows e of directions."""
    points = mean[None, None, :] + np.asarray(radii)[None, :, None] * (directions @ root.T)[:, None, :]
    return energy_rise(log_density, mean, points.reshape(-1, len(mean))).reshape(len(directions), len(radii))


def hmc_chains(log_density: Callable, mean, root, start, transitions: int, step: float, leapfrog: int,
               key) -> tuple[np.ndarray, float]:
    """Returns (whitened draws `(transition, chain, d)`, mean acceptance) of HMC chains on log_density in the
    coordinates u of x = mean + root u (unit mass), started at the whitened points start `(chain, d)`;
    transitions in blocks of BLOCK (rounded down)."""
    mean_, root_ = jnp.asarray(mean), jnp.asarray(root)
    hmc = blackjax.hmc(lambda u: log_density(mean_ + root_ @ u), step, jnp.ones(len(mean)), leapfrog)
    chains = len(start)
    state = jax.vmap(hmc.init)(jnp.asarray(start))

    @jax.jit
    def block(state, key):
        def one(state, k):
            new, info = jax.vmap(hmc.step)(jax.random.split(k, chains), state)
            return new, (new.position, info.acceptance_rate)
        return jax.lax.scan(one, state, jax.random.split(key, BLOCK))

    draws, acceptance = [], []
    for b in range(transitions // BLOCK):
        state, (u, a) = block(state, jax.random.fold_in(key, b))
        draws.append(np.asarray(u))
        acceptance.append(np.asarray(a))
    return np.concatenate(draws), float(np.mean(np.concatenate(acceptance)))


def chain_rhat(draws) -> np.ndarray:
    """Returns Gelman-Rubin's R-hat `(d,)` of draws `(transition, chain, d)`, each chain one sequence
    (sample.gelman_rubin)."""
    draws = np.asarray(draws)
    return sm.gelman_rubin(draws.mean(0), draws.var(0), draws.shape[0])


def scores(samples, tracks: Tracks, model: FlowModel) -> dict:
    """Returns the field error and 95% coverage (bands, central interval) of equally weighted samples `(n, 2K)`."""
    s = score_posterior(draws_posterior(samples), tracks, model.k1, model.k2, model.omega, model.dt)["per_field"]
    return {"err": float(s["velocity_rel_l2"][0]), "cover": float(s["velocity_calibration"][0]),
            "cover_quantile": float(s["velocity_quantile_calibration"][0])}


def spread_vs_truth_map(flow: Flow) -> Callable[[Posterior], np.ndarray]:
    """Returns post -> the grid-velocity std of post over that of the truth-started MAP's Laplace Gaussian (the
    benchmark's truth-map row, true noise), u and v on the scores' 32 x 32 grid at 4 window times, flattened; the
    truth-map fit and its grid once per flow."""
    truth_map = bench.direct_posterior(
        "truth-map", flow.tracks, flow.model, HybridConfig(members=1024, noise_std=flow.noise), jax.random.key(0),
        flow.noise, argparse.Namespace(truth_iterations=None, search_iterations=HybridConfig.iterations))
    times = window_times(flow.tracks, 4)

    def grid_std(post):
        grid = grid_posterior(post, flow.model.k1, flow.model.k2, flow.model.omega, times, 32)
        return np.concatenate([grid[f"{n}_std"].ravel() for n in "uv"])
    reference = grid_std(truth_map)
    return lambda post: grid_std(post) / reference


def draws_posterior(samples) -> Posterior:
    """Equally weighted samples `(n, 2K)` as a one-field Posterior."""
    return Posterior(to_complex(samples)[None], np.full((1, len(samples)), 1.0 / len(samples)), "draws")


def quantiles(values, name: str) -> dict:
    return {f"{name}_median": float(np.median(values)), f"{name}_q10": float(np.quantile(values, 0.1)),
            f"{name}_q90": float(np.quantile(values, 0.9))}


def probe_hessian(args, flow: Flow) -> dict:
    eigs = whitened_hessian(flow.log_density, flow.mean, flow.root)
    return {"eig_min": float(eigs.min()), "eig_max": float(eigs.max()), **quantiles(eigs, "eig"),
            "negative": int(np.sum(eigs < 0))}


def probe_rays(args, flow: Flow) -> dict:
    directions = np.random.default_rng(0).normal(size=(DIRECTIONS, len(flow.mean)))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    rise = ray_energies(flow.log_density, flow.mean, flow.root, directions, RADII)
    return {"radii": list(RADII), "gaussian": [r**2 / 2 for r in RADII],
            "rise_min": rise.min(0).round(4).tolist(), "rise_max": rise.max(0).round(4).tolist()}


def probe_chains(args, flow: Flow) -> dict:
    init_key, key = jax.random.split(jax.random.key(args.seed))
    start = args.init_scale * jax.random.normal(init_key, (args.chains, len(flow.mean)))
    u, acceptance = hmc_chains(flow.log_density, flow.mean, flow.root, start, args.transitions, args.step,
                               args.leapfrog, key)
    u = u[u.shape[0] // 4:]  # burn-in
    x = flow.mean + u @ flow.root.T  # (transition, chain, d)
    laplace_std = np.sqrt(np.sum(flow.root**2, axis=1))
    white_std = u.reshape(-1, u.shape[-1]).std(0)
    rhat = chain_rhat(x)

    def thinned(a):
        flat = a.reshape(-1, a.shape[-1])
        return flat[:: max(1, flat.shape[0] // KEPT_DRAWS)]

    rise = [float(np.mean(energy_rise(flow.log_density, flow.mean, thinned(x[:, c])))) for c in range(x.shape[1])]
    return {"acceptance": acceptance, **quantiles(x.reshape(-1, x.shape[-1]).std(0) / laplace_std, "std_vs_laplace"),
            "energy_rise": rise, "gaussian_energy_rise": len(flow.mean) / 2,
            "white_std_min": float(white_std.min()), "white_std_max": float(white_std.max()),
            "rhat_max": float(rhat.max()), "rhat_above_1.1": int(np.sum(rhat > 1.1)),
            "chain_err": [scores(thinned(x[:, c]), flow.tracks, flow.model)["err"] for c in range(x.shape[1])],
            "pooled": scores(thinned(x), flow.tracks, flow.model),
            **quantiles(spread_vs_truth_map(flow)(draws_posterior(thinned(x))), "std_vs_truth_map")}


@contextlib.contextmanager
def final_stage_particles():
    """Yields a list that collects, for every SMC stage run at l = 1 inside the block, its output particles x
    `(particle, d)` (equal weights: a stage at l = 1 resamples and moves only); wraps sample.stage_function."""
    collected, original = [], sm.stage_function

    def recording(*settings):
        stage = original(*settings)

        def recorded(key, index, particles, weights, tempering, step_size, data, initial, prior):
            out = stage(key, index, particles, weights, tempering, step_size, data, initial, prior)
            if float(tempering) >= 1.0:
                collected.append(sm.from_white(out[0], initial))
            return out
        return recorded

    sm.stage_function = recording
    try:
        yield collected
    finally:
        sm.stage_function = original


def probe_sampler(args, flow: Flow) -> dict:
    settings = {"particles": args.particles, "runs": 2, "members": 2 * args.particles,
                **bench.sample_settings(args.set, "--set")}
    checkpoints = sorted({int(c) for c in args.final_checkpoints.split(",")}) if args.final_checkpoints else []
    if checkpoints:
        settings["final_moves"] = checkpoints[-1]
    with final_stage_particles() if checkpoints else contextlib.nullcontext([]) as finals:
        post = METHODS["sample"](noise_std=flow.noise, start="var", **settings)(flow.tracks, flow.model,
                                                                                jax.random.key(0))
    spread = spread_vs_truth_map(flow)
    ratio = spread(post)
    s = score_posterior(post, flow.tracks, flow.model.k1, flow.model.k2, flow.model.omega, flow.model.dt)["per_field"]
    info = post.info[0]
    for r, run in enumerate(info["runs"]):
        print(json.dumps({"run": r, **{k: run[k] for k in sm.STAGE_RECORD}}, default=float), flush=True)
    x, w = to_real(post.samples[0]), post.weights[0]
    out = {**settings, "err": float(s["velocity_rel_l2"][0]), "cover": float(s["velocity_calibration"][0]),
           "cover_quantile": float(s["velocity_quantile_calibration"][0]),
           **quantiles(ratio, "std_vs_truth_map"),
           "energy_rise": float(w @ energy_rise(flow.log_density, flow.mean, x)),
           "gaussian_energy_rise": len(flow.mean) / 2,
           **{k: v for k, v in info.items() if np.ndim(v) == 0 and not isinstance(v, dict)}}
    if args.continue_chains:
        out["continued"] = continue_sample(args, flow, x, w, spread)
    if checkpoints:  # run 0's particles after each checkpoint's number of stages at l = 1
        steps = settings.get("mcmc_steps", SampleConfig.mcmc_steps)
        out["final_checkpoints"] = [{"stages_at_1": c, "transitions_at_1": c * steps,
                                     **points_summary(flow, finals[c - 1], spread),
                                     **scores(finals[c - 1], flow.tracks, flow.model)} for c in checkpoints]
    return out


def continue_sample(args, flow: Flow, x, w, spread: Callable) -> dict:
    """The chains' HMC (--step, --leapfrog) continued from --continue-chains of the sample's members x `(n, d)`
    (drawn by their weights w) for --transitions: the members' grid-velocity spread and -log pi above var's mode,
    at the start and after the transitions, from the same number of points (the chains' last states); spread:
    spread_vs_truth_map(flow)."""
    pick = np.random.default_rng(args.seed).choice(len(x), args.continue_chains, p=w)
    start = np.linalg.solve(flow.root, (x[pick] - flow.mean).T).T
    u, acceptance = hmc_chains(flow.log_density, flow.mean, flow.root, start, args.transitions, args.step,
                               args.leapfrog, jax.random.key(args.seed))
    out = {"chains": args.continue_chains, "transitions": u.shape[0], "acceptance": acceptance}
    for name, points in (("start", x[pick]), ("end", flow.mean + u[-1] @ flow.root.T)):
        out[name] = points_summary(flow, points, spread)
    return out


def points_summary(flow: Flow, points, spread: Callable) -> dict:
    """Returns the mean -log pi above var's mode and the grid-velocity spread quantiles of equally weighted points
    `(n, d)`; spread: spread_vs_truth_map(flow)."""
    return {"energy_rise": float(np.mean(energy_rise(flow.log_density, flow.mean, points))),
            **quantiles(spread(draws_posterior(points)), "std_vs_truth_map")}


def probe_targets(args) -> dict:
    settings = bench.sample_settings(args.set, "--set")
    if args.target == "gaussian":  # N(m, L L^T) of the flow, q = N(m, (1.2 L)(1.2 L)^T)
        flow = flow_posterior(args.regime, args.flow, args.quick)
        mean, root = flow.mean, flow.root
        prior = sm.Gaussian(np.zeros(len(mean)), flow.model.prior_var)
        q = sm.Gaussian(mean, root=1.2 * root)
        exact_std, to_exact = np.sqrt(np.sum(root**2, axis=1)), np.eye(len(mean))
        target = (jnp.asarray(mean), jnp.asarray(root))

        def log_target(x, data):
            return sm.log_gaussian(x, *data)
    else:  # x = A z, z_i iid ∝ exp(-z^2 / 2 - c z^4); q = N(0, A A^T), its Laplace Gaussian at the mode
        d = 98
        rotation, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(d, d)))
        a = rotation * np.logspace(0, -5, d)[None, :]
        grid = np.linspace(-8, 8, 200001)
        density = np.exp(-grid**2 / 2 - args.c * grid**4)
        exact_std = np.full(d, np.sqrt(np.sum(grid**2 * density) / np.sum(density)))
        to_exact = np.linalg.inv(a)  # z = A^-1 x
        prior, q, target = sm.Gaussian(np.zeros(d), 100.0 * a @ a.T), sm.Gaussian(np.zeros(d), a @ a.T), jnp.asarray(
            to_exact)

        def log_target(x, data):
            z = data @ x
            return -jnp.sum(z**2 / 2 + args.c * z**4)
    prior_root = tuple(jnp.asarray(r) for r in sm.gaussian_root(prior))

    def log_likelihood(x, data):  # the SMC's target is prior x likelihood: the likelihood divides the prior out
        return log_target(x, data) - sm.log_gaussian(x, *prior_root)

    config = SampleConfig(particles=args.particles, start="proposal", **settings)
    x, w, info = sm.smc_sample(log_likelihood, prior, jax.random.key(1), config, target, q)
    z = x @ to_exact.T
    std = np.sqrt(w @ (z - w @ z) ** 2)
    return {"target": args.target, "c": args.c if args.target == "quartic" else None, **settings,
            **quantiles(std / exact_std, "std_vs_exact"), "stages": info["stages_max"],
            "divergent_max": info["divergent_max"]}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("probe", choices=("hessian", "rays", "chains", "sampler", "targets"))
    parser.add_argument("--regime", default="sparse100-noisy-4", choices=sorted(bench.REGIMES))
    parser.add_argument("--flow", type=int, default=5, help="held-out flow of the regime (0-15; --quick: 0-1)")
    parser.add_argument("--quick", action="store_true", help="the benchmark's --quick model (K = 9, T = 0.02)")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--transitions", type=int, default=800, help="HMC transitions per chain (blocks of 50)")
    parser.add_argument("--step", type=float, default=0.04, help="leapfrog step, whitened coordinates")
    parser.add_argument("--leapfrog", type=int, default=32, help="leapfrog steps per transition")
    parser.add_argument("--init-scale", type=float, default=1.0, help="chains start at m + L (s N(0, I))")
    parser.add_argument("--seed", type=int, default=3, help="the chains' key")
    parser.add_argument("--particles", type=int, default=512, help="sampler / targets: particles per run")
    parser.add_argument("--continue-chains", type=int, default=0,
                        help="sampler: continue this many of its members by the chains' HMC for --transitions")
    parser.add_argument("--final-checkpoints", default="", metavar="C1,C2,...",
                        help="sampler: final_moves = the largest; run 0's spread after each count of stages at l = 1")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="sampler / targets: a SampleConfig setting, e.g. mass_matrix=diagonal (repeatable)")
    parser.add_argument("--target", choices=("gaussian", "quartic"), default="gaussian")
    parser.add_argument("--c", type=float, default=0.05, help="quartic target: the z^4 weight")
    args = parser.parse_args(argv)
    try:
        bench.sample_settings(args.set, "--set")
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    if args.probe == "targets":
        out = probe_targets(args)
    else:
        flow = flow_posterior(args.regime, args.flow, args.quick)
        out = {"regime": args.regime, "flow": args.flow, "quick": args.quick, "d": len(flow.mean)}
        out |= {"hessian": probe_hessian, "rays": probe_rays, "chains": probe_chains,
                "sampler": probe_sampler}[args.probe](args, flow)
    print(json.dumps({"probe": args.probe, **out, "seconds": time.perf_counter() - start}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
