"""Benchmark of the 4D-Var Jacobian: one sensitivity run against jax.jacfwd of the residuals.

The shipped model's 49 modes, 1000 RK4 steps of dt 1e-4 observed every step, 1 and 4
drifters, float64; warm timings (best of --repeats after a compiling call), the ratio against
jacfwd measured in the same run, and the largest difference relative to the largest entry.

    python3 benchmarks/bench_jacobian.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from lagda.assimilation.methods.observations import arrange  # noqa: E402
from lagda.assimilation.methods.variational import (  # noqa: E402
    jacobian,
    observation_problem,
    residuals,
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
    args = p.parse_args(argv)
    model = model_settings(None, ROOT / "lagda" / "shipped" / "model")
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
        slow = best_seconds(lambda: reference(x, *problem), args.repeats)
        fast = best_seconds(lambda: jacobian(x, *problem), args.repeats)
        ours, ref = np.asarray(jacobian(x, *problem)), np.asarray(reference(x, *problem))
        diff = np.max(np.abs(ours - ref)) / np.max(np.abs(ref))
        print(f"| {n_drifter} | {slow:.3f} | {fast:.4f} | {slow / fast:.1f} | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
