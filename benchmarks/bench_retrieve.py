"""Benchmark of `retrieve` for one track against a 10^6-draw prior bank.

Times the `retrieve` method object (lagda.assimilation.methods.registry.Retrieve) on one field of
lagda/shipped/example_tracks.nc with the shipped model (encoder included), first call (compiles) and warm (best of
the repeats), for the same bank two ways: streamed (drawn afresh in every call: the baseline,
bank_cache_mb=0) and kept in memory by the method object (the default, bank_cache_mb; the first call
draws it); the speed-up over the baseline is printed, and whether both give identical
candidates. Also reports the 8 example fields sharing one pass.

    python -m benchmarks.bench_retrieve [--bank-size 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import numpy as np

from lagda.assimilation.methods.learned import scorer_from_run
from lagda.assimilation.methods.registry import Retrieve
from lagda.assimilation.model import model_settings
from lagda.io.formats import read_tracks

ROOT = pathlib.Path(__file__).resolve().parents[1]
BANKS = {"iid streamed": {"bank_cache_mb": 0}, "iid cached": {}}


def timed(tracks, model, retrieve: Retrieve, repeats: int) -> tuple[float, float, object]:
    """Returns (first-call seconds, best warm seconds, posterior) of one retrieve object on `tracks`."""
    times, post = [], None
    for _ in range(repeats + 1):
        start = time.perf_counter()
        post = retrieve(tracks, model, jax.random.key(0))
        times.append(time.perf_counter() - start)
    return times[0], min(times[1:]), post


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bank-size", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3, help="warm calls timed after the first (best kept)")
    p.add_argument("--model", default=str(ROOT / "lagda" / "shipped" / "model"))
    p.add_argument("--tracks", default=str(ROOT / "lagda" / "shipped" / "example_tracks.nc"))
    args = p.parse_args(argv)
    tracks = read_tracks(args.tracks)
    model = model_settings(tracks, args.model)
    scorer, _ = scorer_from_run(args.model)
    one = tracks.for_field(0)
    print(f"bank {args.bank_size:,} prior draws, model {args.model}, CPU devices: {jax.device_count()}")
    print("| bank | tracks | first call s | warm s | warm s per track | x streamed |")
    print("|---|---|---|---|---|---|")
    for subset, label in ((one, "1"), (tracks, str(tracks.n_field))):
        rows = {}
        for name, options in BANKS.items():
            rows[name] = timed(subset, model, Retrieve(scorer, bank_size=args.bank_size, **options), args.repeats)
        for name, (first, warm, post) in rows.items():
            ratio = rows["iid streamed"][1] / warm
            print(f"| {name} | {label} | {first:.2f} | {warm:.3f} | {warm / subset.n_field:.3f} | {ratio:.1f} |")
        same = bool(np.array_equal(rows["iid streamed"][2].candidates, rows["iid cached"][2].candidates))
        print(f"(cached and streamed i.i.d. banks give identical candidates: {same})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
