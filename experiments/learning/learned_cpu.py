"""The `learned` preset on a CPU: test R@k against training time, and the least-squares design as a baseline.

Simulates the `small` preset's pairs with lagda's own commands (or reuses them in `--work`),

    lagda simulate --preset small --n-samples 16384 --seed 1 --out small_train.nc
    lagda simulate --preset small --n-samples 4096 --seed 2 --out small_test4096.nc

trains `lagda train --preset learned` on them (the misfit head from a random design, lagda/learning/config.py
`learned`; evaluated after every epoch against the 4,096-field test library) and writes one CSV row per epoch:
the cumulative training seconds (the steps, from metrics.jsonl), the wall seconds since the start of
`lagda train` at the end of that epoch's evaluation, and test R@1 / R@5 / R@10 both directions.

The baseline: the same misfit score with its design W `(2K, 2, 2K)` fitted without learning, by least squares of
the tracks' finite-difference velocities on phi W x over every training pair in one pass (the normal equations
sum_i Phi_i (x) x_i x_i^T of the pooled statistics of lagda/learning/set_encoder.py, solved in float64), scored
by `lagda.learning.evaluate.retrieval_scores` as the trained run is; its row gives its wall seconds (statistics,
normal equations, solve) and the retrieval. It is given the same things as the learned head (the basis features,
the form of the score, the pairs) and no more.

    python -m experiments.learning.learned_cpu --work WORK                            # ~15 min on 2 cores
    python -m experiments.learning.learned_cpu --work WORK --negatives 0 --skip-baseline --run-dir WORK/no_negatives \
        --out results/learned_cpu_no_negatives.csv                           # in-batch negatives only
    python -m experiments.learning.learned_cpu --work WORK --epochs 2 --quick         # 256 / 256 pairs, a smoke test

Other files and libraries: `--train` and `--test` instead of the simulated pair, `--library 0` for the whole
test file, `--skip-training` for the baseline's row alone (the paper's data against its whole test set:
`--train paper_1.nc --test paper_2.nc --library 0 --skip-training`).

Results: results/learned_cpu.csv; docs/results/training-learned.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.common.paths import ROOT

DIRECTIONS = ("coef_to_traj", "traj_to_coef")
KS = (1, 5, 10)
COLUMNS = ("method", "epoch", "train_seconds", "wall_seconds") + tuple(f"{d}/R@{k}" for d in DIRECTIONS for k in KS)


def lagda(*args: str, watch: pathlib.Path | None = None) -> list[float]:
    """Runs `python -m lagda ARGS` (this checkout's lagda); returns the seconds from its start at which file `watch`
    gained each of its lines (polled every 0.2 s; [] without `watch`). Raises on a non-zero exit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start, seen = time.time(), []
    child = subprocess.Popen([sys.executable, "-m", "lagda", *args], env=env)
    while child.poll() is None or watch is not None and watch.exists() and _lines(watch) > len(seen):
        if watch is not None and watch.exists():
            seen += [time.time() - start] * (_lines(watch) - len(seen))
        time.sleep(0.2)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    return seen


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines())


def simulate(work: pathlib.Path, quick: bool) -> tuple[pathlib.Path, pathlib.Path]:
    """Returns (train, test) dataset paths in `work`, simulating the ones missing."""
    sizes = (256, 256) if quick else (16384, 4096)
    names = ("quick_train.nc", "quick_test.nc") if quick else ("small_train.nc", "small_test4096.nc")
    paths = tuple(work / name for name in names)
    for path, n, seed in zip(paths, sizes, (1, 2)):
        if not path.exists():
            lagda("simulate", "--preset", "small", "--n-samples", str(n), "--seed", str(seed), "--out", str(path))
    return paths


def train_rows(train_path, test_path, run_dir: pathlib.Path, epochs: int, library: int,
               negatives: int | None = None) -> list[dict]:
    """Trains the learned preset (a new run) and returns one row per epoch of metrics.jsonl.

    `negatives`: the preset's coefficient negatives per step unless given (method "learned, negatives N" then).
    """
    if run_dir.exists():
        raise SystemExit(f"{run_dir} exists: pass a new --run-dir")
    start = time.time()
    extra = () if negatives is None else ("--negatives", str(negatives))
    ends = lagda("train", "--preset", "learned", "--train", str(train_path), "--test", str(test_path), "--run-dir",
                 str(run_dir), "--epochs", str(epochs), "--eval-library", str(library), "--no-progress", *extra,
                 watch=run_dir / "metrics.jsonl")  # a line per epoch, written after its evaluation
    method = "learned" if negatives is None else f"learned, negatives {negatives}"
    wall = time.time() - start
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows, seconds = [], 0.0
    for record, end in zip(records, ends, strict=True):
        seconds += record["epoch_seconds"]
        rows.append({"method": method, "epoch": record["epoch"], "train_seconds": round(seconds, 1),
                     "wall_seconds": round(end, 1),
                     **{f"{d}/R@{k}": record.get(f"test/{d}/R@{k}") for d in DIRECTIONS for k in KS}})
    print(f"learned: {epochs} epochs in {wall:.0f} s wall", file=sys.stderr)
    return rows


def least_squares_design(model, data, batch: int = 256, ridge: float = 1e-10) -> np.ndarray:
    """Returns W `(2K, 2, 2K)` minimising sum_i sum_j dt_j |dz_j / dt_j - phi_j W x_i|^2 / T_i over the pairs.

    The normal equations of each velocity component c: sum_i (Phi_i (x) x_i x_i^T) w_c = sum_i P_i[:, c] (x) x_i,
    with the pooled P_i, Phi_i of the set encoder (`SetEncoder.statistics`), accumulated in float64 in batches of
    `batch` fields; `ridge` (relative to the mean diagonal) only guards the solve.
    """
    stats = jax.jit(lambda positions: model.encoder.statistics(positions)[:2])
    n_feature = 2 * len(data.k1)
    size = n_feature * n_feature
    gram = np.zeros((size, size))
    rhs = np.zeros((size, 2))
    for start in range(0, data.n_samples, batch):
        p, phi = (np.asarray(a, np.float64) for a in stats(jnp.asarray(data.positions[start:start + batch])))
        coef = np.asarray(data.coef[start:start + batch])
        x = np.concatenate([coef.real, coef.imag], axis=-1).astype(np.float64)  # (field, 2K)
        outer = (x[:, :, None] * x[:, None, :]).reshape(len(x), size)  # (field, a b)
        block = phi.reshape(len(x), size).T @ outer  # [(f g), (a b)]
        gram += block.reshape(n_feature, n_feature, n_feature, n_feature).transpose(0, 2, 1, 3).reshape(size, size)
        rhs += np.einsum("ifc,ia->fac", p, x).reshape(size, 2)
    gram[np.diag_indices(size)] += ridge * np.trace(gram) / size
    solution = np.linalg.solve(gram, rhs)  # [(f a), c]
    return solution.reshape(n_feature, n_feature, 2).transpose(0, 2, 1)


def baseline_row(train_path, test_path, library: int) -> dict:
    """Returns the least-squares design's row: its wall seconds (loading the pairs excluded) and test R@k."""
    from lagda.learning.config import learned
    from lagda.learning.data import load_paired
    from lagda.learning.evaluate import retrieval_scores
    from lagda.learning.model import build_model

    data, test = load_paired(train_path), load_paired(test_path)
    config = learned(eval_library=library)
    model = build_model(config, data.positions.shape[2], data.k1, data.k2, data.meta())
    start = time.time()
    model.encoder.design[...] = jnp.asarray(least_squares_design(model, data), jnp.float32)
    seconds = time.time() - start
    scores = retrieval_scores(model, test, config, library, "test")
    print(f"least squares: {seconds:.0f} s", file=sys.stderr)
    return {"method": "least_squares", "epoch": "", "train_seconds": round(seconds, 1),
            "wall_seconds": round(time.time() - start, 1),
            **{f"{d}/R@{k}": scores[f"test/{d}/R@{k}"] for d in DIRECTIONS for k in KS}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=pathlib.Path, help="folder of the datasets (simulated if missing) and the run")
    p.add_argument("--run-dir", type=pathlib.Path, help="the new training run (default WORK/learned_cpu)")
    p.add_argument("--epochs", type=int, default=10, help="the preset's own 10 by default")
    p.add_argument("--quick", action="store_true", help="256 training and 256 test pairs, library 256, 64 negatives")
    p.add_argument("--negatives", type=int, help="coefficient negatives per step (default: the preset's 2,048)")
    p.add_argument("--train", type=pathlib.Path, help="training pairs instead of the simulated ones (with --test)")
    p.add_argument("--test", type=pathlib.Path, help="the test pairs, the library's first fields (with --train)")
    p.add_argument("--library", type=int, help="test library size (default 4,096, 256 with --quick; 0: all)")
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--skip-training", action="store_true", help="the least-squares baseline's row only")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "results" / "learned_cpu.csv")
    args = p.parse_args(argv)
    if (args.train is None) != (args.test is None):
        p.error("--train and --test go together")
    if args.work is None and (args.train is None or not args.skip_training and args.run_dir is None):
        p.error("--work is needed for the simulated pairs or the run directory")
    if args.skip_baseline and args.skip_training:
        p.error("--skip-baseline with --skip-training leaves nothing to run")
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    library = args.library if args.library is not None else 256 if args.quick else 4096
    train_path, test_path = (args.train, args.test) if args.train else simulate(args.work, args.quick)
    rows = [] if args.skip_baseline else [baseline_row(train_path, test_path, library)]
    if not args.skip_training:
        negatives = 64 if args.quick and args.negatives is None else args.negatives
        rows += train_rows(train_path, test_path, args.run_dir or args.work / "learned_cpu", args.epochs, library,
                           negatives)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    load = os.getloadavg()
    print(f"wrote {args.out} ({len(rows)} rows; {os.cpu_count()} CPUs, load average now {load[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
