"""Kill `lagda simulate` with SIGKILL at random instants, resume it, and compare with an uninterrupted run.

    python -m experiments.learning.kill_probe --trials 30 [--hog] [--seed 0] [--workdir DIR]

Each trial starts the command, kills it after a random delay drawn uniformly over the length of
an uninterrupted run (so every stage is hit: start-up, chunks, the final write, the clean-up), reruns
it with --resume (run to the end), and checks that
the resumed file's data variables are byte-identical to the uninterrupted file's and that nothing
but the output is left in the folder. `--hog` runs a busy-looping process beside every trial.
Prints one line per trial and "K of N recovered".
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simulate import schema

FLAGS = ["--preset", "small", "--seed", "11"]
SIZES = ["--n-samples", "2000", "--chunk-size", "256"]


def simulate(out: Path, *extra: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lagda", "simulate", *FLAGS, *SIZES, "--out", str(out), *extra],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def same_data(a: Path, b: Path) -> bool:
    """Whether every data variable and coordinate of the two files is byte-identical."""
    with schema.open_dataset(a) as x, schema.open_dataset(b) as y:
        names = set(x.variables) | set(y.variables)
        return all(name in x and name in y and x[name].dtype == y[name].dtype
                   and np.array_equal(x[name].values, y[name].values) for name in names)


def hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--hog", action="store_true", help="a CPU-bound process beside every trial")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill instants")
    parser.add_argument("--workdir", help="folder for the files (default: a new temporary folder)")
    parser.add_argument("--n-samples", type=int, default=2000, help="fields of the simulated file")
    parser.add_argument("--chunk-size", type=int, default=256, help="fields per chunk")
    args = parser.parse_args(argv)
    SIZES[:] = ["--n-samples", str(args.n_samples), "--chunk-size", str(args.chunk_size)]
    rng = random.Random(args.seed)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kill_probe-"))
    env = {**os.environ, "LAGDA_COMPILE_CACHE": str(work / "jax-cache")}
    hogs = [hog()] if args.hog else []
    try:
        reference = work / "whole" / "r.nc"
        reference.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        run = simulate(reference, env=env)
        if run.wait() != 0:
            print(run.stderr.read(), file=sys.stderr)
            return 1
        length = time.perf_counter() - start
        print(f"uninterrupted run: {length:.1f} s; {' '.join(FLAGS + SIZES)}{' (beside a CPU hog)' if hogs else ''}")
        recovered = 0
        for trial in range(args.trials):
            folder = work / f"trial{trial:03d}"
            folder.mkdir()
            out = folder / "r.nc"
            delay = rng.uniform(0, length)
            run = simulate(out, env=env)
            try:
                run.wait(timeout=delay)
                killed = False
            except subprocess.TimeoutExpired:
                run.send_signal(signal.SIGKILL)
                run.wait()
                killed = True
            left = sorted(p.name for p in folder.iterdir())
            resumed = simulate(out, "--resume", env=env)
            _, err = resumed.communicate()
            code = resumed.returncode
            after = sorted(p.name for p in folder.iterdir())
            ok = code == 0 and after == ["r.nc"] and same_data(out, reference)
            recovered += ok
            note = err.strip().splitlines()
            notes = "; ".join(line for line in note if "field/s" not in line and "%|" not in line)[:160]
            print(f"trial {trial + 1}: {'killed' if killed else 'finished'} at {delay:.2f} s, left {left}; "
                  f"--resume exit {code} -> {'recovered' if ok else 'NOT RECOVERED'} {notes}", flush=True)
        print(f"{recovered} of {args.trials} recovered")
        return 0 if recovered == args.trials else 1
    finally:
        for process in hogs:
            process.kill()
            process.wait()


if __name__ == "__main__":
    raise SystemExit(main())
