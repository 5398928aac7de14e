"""Benchmark of the QG basis inversion: `linear` (OU error, circular k_max 12, P 3) on a 64-drifter, 60-day QG file.

The baseline is measured in the same run: the float64 matmul rate of this machine, and the time the inversion's
final normal equations would take at that rate (the whitened Gram by syrk, rows x p^2 flops, and its Cholesky,
p^3 / 3). Two paths: with `--climatology` (the prior and OU error from other flows: one Gram and one solve, on
pairs thinned to a quarter of the OU time scale), and without (the default: the prior's spectrum by the evidence
and the OU error model by cross-validation over held-out drifters, several Grams and many Choleskys).

    python -m benchmarks.bench_qg_inversion                       # generates runs/bench_qg/*.nc first (~1 min)
    python -m benchmarks.bench_qg_inversion --tracks qg.nc --climatology clim.nc
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def qg_file(path: pathlib.Path, seed: int) -> pathlib.Path:
    """Returns path, writing the default turbulence flow (64 drifters, hourly, 60 days) there if missing."""
    if not path.exists():
        from simulate.qg import PRESETS, write_qg_dataset

        path.parent.mkdir(parents=True, exist_ok=True)
        write_qg_dataset(PRESETS["qg"]["turbulence"](n_flows=1, n_drifters=64, seed=seed), path)
    return path


def matmul_rate(n: int = 2048, repeats: int = 3) -> float:
    """Returns the float64 matmul rate measured now, GFLOP/s (best of `repeats`, 2 n^3 flops each)."""
    a = np.random.default_rng(0).standard_normal((n, n))
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tracks", type=pathlib.Path, help="a QG file (lagda simulate --flow qg); default generated")
    p.add_argument("--climatology", type=pathlib.Path, help="another QG file of the same model; default generated")
    args = p.parse_args(argv)
    from lagda.assimilation.methods.basis import basis_model
    from lagda.assimilation.methods.registry import make_method
    from lagda.io.formats import read_tracks

    tracks_path = args.tracks or qg_file(ROOT / "runs" / "bench_qg" / "qg.nc", seed=200)
    clim_path = args.climatology or qg_file(ROOT / "runs" / "bench_qg" / "climatology.nc", seed=100)
    tracks = read_tracks(tracks_path).for_field(0)
    rate = matmul_rate()
    print(f"{tracks_path}: {tracks.n_trajectory} drifters; float64 matmul rate measured now: {rate:.1f} GFLOP/s, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| path | unknowns p | pairs used | method s | final Gram + Cholesky GFLOP | at the matmul rate, s | "
          "ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, clim in (("--climatology", read_tracks(clim_path)), ("no climatology (default)", None)):
        model = basis_model(tracks, "circular", 12, 3, clim)
        method = make_method("linear", {"members": 2})
        start = time.perf_counter()
        posterior = method(tracks, model, jax.random.key(0))
        seconds = time.perf_counter() - start
        info = posterior.diagnostics()[0]
        pairs = info.get("pairs_used", info.get("search_pairs"))
        unknowns = 2 * model.n_modes
        flops = 2 * pairs * unknowns**2 + unknowns**3 / 3  # rows = 2 per pair (u, v)
        baseline = flops / (rate * 1e9)
        print(f"| {name} | {unknowns} | {pairs} | {seconds:.2f} | {flops / 1e9:.1f} | {baseline:.3f} | "
              f"{seconds / baseline:.0f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
