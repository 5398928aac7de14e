"""Benchmark of the 4D-Var Jacobian: one sensitivity run against jax.jacfwd of the residuals.

The shipped model's 49 modes, 1000 RK4 steps of dt 1e-4 observed every step, 1 and 4
drifters, float64; warm timings (best of --repeats after a compiling call), the ratio against
jacfwd measured in the same run, and the largest difference relative to the largest entry.

The sparse part: the assimilation benchmark's sparse regimes (1000 steps observed every 10 or 100,
1 or 4 drifters), the fused operator (lagda.assimilation.methods.fused, which variational picks for
them) against the reference sensitivity run, per Jacobian (with the residuals) and per Gauss-Newton
iteration (normal equations, solve, one cost), the two timed alternately in one process.

The sampler part: in the same sparse regimes, the value and gradient of `sample`'s log likelihood for a batch of
particles (vmap, as its HMC moves take them), the fused one (gradient -J^T r from the forward sensitivity) against
reverse mode through the reference RK4 run, timed alternately.

    python -m benchmarks.bench_jacobian [--repeats 3] [--part dense|sparse|sampler|all] [--particles 64]
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from lagda.assimilation.methods.observations import arrange  # noqa: E402
from lagda.assimilation.methods.sample import problem_likelihood  # noqa: E402
from lagda.assimilation.methods.variational import (  # noqa: E402
    Problem,
    cost,
    jacobian,
    observation_problem,
    residuals,
    residuals_and_jacobian,
)
from lagda.assimilation.model import model_settings  # noqa: E402
from simulate import draw_coefficients, simulate_tracks  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def best_seconds(fn, repeats: int) -> float:
    """Returns the best wall time of `repeats` calls of fn after one compiling call."""
    np.asarray(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.asarray(fn())
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--part", choices=("dense", "sparse", "sampler", "all"), default="all")
    p.add_argument("--particles", type=int, default=64, help="the sampler part's batch")
    args = p.parse_args(argv)
    model = model_settings(None, ROOT / "lagda" / "shipped" / "model")
    if args.part in ("dense", "all"):
        dense(model, args.repeats)
    if args.part in ("sparse", "all"):
        sparse(model, args.repeats)
    if args.part in ("sampler", "all"):
        sampler(model, args.repeats, args.particles)
    return 0


def dense(model, repeats: int) -> None:
    """Prints the dense table: jacfwd against the sensitivity run."""
    k1, k2, omega, scale, dt = model.k1, model.k2, model.omega, model.scale, model.dt
    reference = jax.jit(jax.jacfwd(residuals), static_argnames=("n_sim", "stride"))
    print("| drifters | jacfwd s | sensitivity run s | speed-up | max rel diff |")
    print("|---|---|---|---|---|")
    for n_drifter in (1, 4):
        coef = np.asarray(draw_coefficients(jax.random.key(1), scale, 1, np.complex128))
        release = 0.75 + 0.2 * np.random.default_rng(0).random((n_drifter, 2))
        positions = np.asarray(simulate_tracks(coef, release[None], k1, k2, omega, dt, 1000, 1))[0]
        times = np.tile(np.arange(1, 1001) * dt, (n_drifter, 1))
        problem = observation_problem(arrange(positions, times, release, dt), model, 1e-3)
        x = 0.3 * np.random.default_rng(2).normal(size=2 * len(k1)) * np.sqrt(model.prior_var)
        slow = best_seconds(lambda: reference(x, *problem), repeats)
        fast = best_seconds(lambda: jacobian(x, *problem), repeats)
        ours, ref = np.asarray(jacobian(x, *problem)), np.asarray(reference(x, *problem))
        diff = np.max(np.abs(ours - ref)) / np.max(np.abs(ref))
        print(f"| {n_drifter} | {slow:.3f} | {fast:.4f} | {slow / fast:.1f} | {diff:.1e} |")


SPARSE = ((10, 1, "sparse10"), (100, 1, "sparse100"), (100, 4, "sparse100-4"))  # (stride, drifters, name)


def gauss_newton_iteration(x, problem):
    """One Gauss-Newton iteration's work: r and J, the whitened normal equations, a solve and one cost."""
    prior_std = np.asarray(problem[-4])
    r, jac = residuals_and_jacobian(x, problem)
    jac = jac * prior_std[None, :]
    hess, grad = jac.T @ jac, jac.T @ r
    step = prior_std * np.linalg.solve(hess + 1e-3 * np.diag(np.diag(hess)), -grad)
    return cost(x + step, problem)


def alternating_best(fns, repeats: int) -> list[float]:
    """Returns the best wall time of each of fns, called in turn `repeats` times after a compiling call each."""
    for fn in fns:
        fn()
    best = [np.inf] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def sparse_problem(model, stride: int, n_drifter: int):
    """Returns (x `(2K,)`, the fused observation problem) of one drawn field's tracks, 1000 steps observed every
    `stride`."""
    k1, k2, omega, scale, dt = model.k1, model.k2, model.omega, model.scale, model.dt
    n_obs = 1000 // stride
    coef = np.asarray(draw_coefficients(jax.random.key(1), scale, 1, np.complex128))
    release = np.random.default_rng(0).random((n_drifter, 2))
    positions = np.asarray(simulate_tracks(coef, release[None], k1, k2, omega, dt, n_obs, stride))[0]
    times = np.tile(np.arange(1, n_obs + 1) * stride * dt, (n_drifter, 1))
    fused = observation_problem(arrange(positions, times, release, dt), model, 1e-3)
    assert fused.operator is not None
    return 0.3 * np.random.default_rng(2).normal(size=2 * len(k1)) * np.sqrt(model.prior_var), fused


def sparse(model, repeats: int) -> None:
    """Prints the sparse table: the fused operator against the reference sensitivity run."""
    print("| regime | reference J s | fused J s | J speed-up | reference GN iter s | fused GN iter s | GN speed-up "
          "| max rel diff J |")
    print("|---|---|---|---|---|---|---|---|")
    for stride, n_drifter, name in SPARSE:
        x, fused = sparse_problem(model, stride, n_drifter)
        reference = Problem(fused)  # operator None: residuals / jacobian
        ref_j, new_j, ref_gn, new_gn = alternating_best(
            [lambda: residuals_and_jacobian(x, reference), lambda: residuals_and_jacobian(x, fused),
             lambda: gauss_newton_iteration(x, reference), lambda: gauss_newton_iteration(x, fused)], repeats)
        ours, ref = residuals_and_jacobian(x, fused)[1], residuals_and_jacobian(x, reference)[1]
        diff = np.max(np.abs(ours - ref)) / np.max(np.abs(ref))
        print(f"| {name} | {ref_j:.4f} | {new_j:.4f} | {ref_j / new_j:.1f} | {ref_gn:.4f} | {new_gn:.4f} | "
              f"{ref_gn / new_gn:.1f} | {diff:.1e} |", flush=True)


def sampler(model, repeats: int, particles: int) -> None:
    """Prints the sampler table: sample's fused log-likelihood gradient against reverse mode through the reference."""
    print(f"| regime | reference value+grad s | fused value+grad s | speed-up | max rel diff grad |  ({particles} "
          "particles)")
    print("|---|---|---|---|---|")
    for stride, n_drifter, name in SPARSE:
        x, fused = sparse_problem(model, stride, n_drifter)
        spread = 0.1 * np.random.default_rng(3).normal(size=(particles, x.size)) * np.sqrt(model.prior_var)
        points = jax.numpy.asarray(x[None, :] + spread)
        batched = []
        for log_likelihood, data in (problem_likelihood(Problem(fused), 0.0), problem_likelihood(fused, 0.0)):
            batched.append(jax.jit(jax.vmap(jax.value_and_grad(functools.partial(log_likelihood, data=data)))))
        ref_s, new_s = alternating_best([lambda f=f: jax.block_until_ready(f(points)) for f in batched], repeats)
        (_, ref), (_, ours) = (f(points) for f in batched)
        diff = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
        print(f"| {name} | {ref_s:.3f} | {new_s:.3f} | {ref_s / new_s:.1f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
