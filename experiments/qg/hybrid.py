"""The learned half on the ocean: a set encoder trained on QG turbulence windows, used as the prior of the basis
inversion (`hybrid --basis`), measured against the climatology's prior (`linear --basis --climatology`).

1. Training pairs: successive 60-day windows of spun-up QG turbulence flows (`lagda simulate --flow qg
   --qg-windows W`), each window's truth fitted in the basis of the defaults (circular k_max 12, Legendre degree 3,
   the uniform current first) against its drifters' tracks (lagda.assimilation.methods.basis.write_basis_pairs).
   The last `--validation` windows are held out for the retrieval metrics of training.
2. A set encoder (the `learned` preset: ridge head on the basis features, here with their Legendre factors, started
   from the design of the velocity in the features, set_init "basis": least squares at the start) trained
   contrastively with the l2 similarity (its conditional is Gaussian in closed form, learned.closed_form) on daily
   fixes in a mixture of observation regimes: 1..64 drifters, strides of 1..2 days, gaps, position noise up to 20 m.
3. On held-out flows (the first L drifters, hourly fixes, 10 m noise; experiments/qg/benchmark.py's defaults
   files), each with the climatology: `linear` (the climatology's prior), `hybrid` (the learned conditional, widened
   or replaced by the climatology's prior where the evidence says so), and the learned conditional's mean alone.

    lagda simulate --flow qg --n-samples 4 --qg-windows 64 --n-drifters 64 --obs-interval 21600 \\
        --truth-interval 432000 --seed 500 --out runs/qg_hybrid/windows.nc
    python -m experiments.qg.hybrid --windows runs/qg_hybrid/windows.nc --data runs/qg_benchmark
(--data holds turbulence_test.nc and turbulence_climatology.nc, as for experiments.qg.benchmark --sections defaults.)
Writes results/qg_hybrid.csv and .md.
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import time

import numpy as np

from experiments.common.paths import ROOT
from experiments.qg.benchmark import (
    DEFAULT_DEGREE,
    DEFAULT_K_MAX,
    default_run,
    defaults_scores,
    defaults_truth,
    oracle_model,
)


def training_pairs(windows, work: pathlib.Path, validation: int, every: int) -> tuple[pathlib.Path, pathlib.Path]:
    """Returns (train, validation) pair files of the windows file (every `every`-th fix), written once."""
    import xarray as xr

    from lagda.assimilation.methods.basis import write_basis_pairs

    train, held = work / "pairs_train.nc", work / "pairs_validation.nc"
    if train.exists() and held.exists():
        return train, held
    whole = work / "pairs_all.nc"
    if not whole.exists():
        write_basis_pairs(windows, whole, "circular", DEFAULT_K_MAX, DEFAULT_DEGREE, every=every)
    with xr.open_dataset(whole) as ds:
        n = ds.sizes["sample"]
        for part, path in ((slice(0, n - validation), train), (slice(n - validation, n), held)):
            sub = ds.isel(sample=part).load()
            sub.attrs["n_samples"] = sub.sizes["sample"]
            sub.to_netcdf(path)
    return train, held


def train_encoder(train, held, run: pathlib.Path, epochs: int, batch: int, weights: str = "uniform") -> float:
    """Trains (or resumes) the set encoder on the pairs; returns the seconds spent.

    `weights` is the similarity's (TrainConfig.similarity_weights): "uniform" (the run in results/qg_hybrid.md), or
    "prior" (whitened coefficients: each mode over its prior std, so the closed-form conditional shrinks every mode
    alike). The temperature starts at the mean squared distance between two training coefficient vectors so weighted
    (logits of order one) and is learned.
    """
    from lagda.learning.config import learned
    from lagda.learning.data import load_paired
    from lagda.learning.encoders import similarity_mask
    from lagda.learning.train import train as train_run

    data = load_paired(train)
    weight = similarity_mask(data.k1, data.k2, False, data.prior_scale if weights == "prior" else None)
    x = np.concatenate([data.coef.real, data.coef.imag], axis=1).astype(np.float64) * weight
    tau = float(2 * np.mean(np.sum((x - x.mean(0)) ** 2, axis=1)))  # E|x_i - x_j|^2, weighted

    config = learned(set_head="ridge", epochs=epochs, regime="mixture", regime_max_drifters=64,
                     regime_stride_max=2,
                     regime_gap_max=0.3, regime_noise_max=2e-5, regime_dense_prob=0.0, similarity="l2",
                     learn_tau=True, tau=tau, mask_mean_mode=False, set_init="basis", similarity_weights=weights,
                     batch_size=batch,
                     eval_library=16, eval_batch=16, lr=1e-2, warmup=20)
    start = time.perf_counter()
    train_run(config, str(train), str(held), run, resume=(run / "checkpoints").exists(), progress=True)
    return time.perf_counter() - start


def learned_alone(test, climatology, tracks_path, run, f: int) -> tuple[dict, dict]:
    """Returns (`defaults_scores` of the learned conditional's mean alone, hybrid's diagnostics) for one file."""
    import jax

    from lagda.assimilation.methods.hybrid import learned_prior
    from lagda.assimilation.methods.learned import closed_form, field_queries, scorer_from_run
    from lagda.assimilation.methods.registry import Hybrid
    from lagda.io.formats import read_tracks

    _, model = oracle_model(test, climatology, f)  # the same basis and climatology prior as the file's run
    scorer, _ = scorer_from_run(run)
    tracks = read_tracks(tracks_path)
    start = time.perf_counter()
    query = field_queries(tracks, scorer)[0][0]
    mean, _ = learned_prior(*closed_form(query, model, scorer), model)
    seconds = time.perf_counter() - start
    coef = mean[: model.n_modes] + 1j * mean[model.n_modes :]
    with jax.enable_x64(True):
        info = Hybrid(scorer, members=2)(tracks, model, jax.random.key(0)).diagnostics()[0]
    return defaults_scores(coef, defaults_truth(test, f), seconds), info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=pathlib.Path, required=True, help="QG windows file (lagda simulate --flow qg "
                        "--qg-windows W)")
    parser.add_argument("--data", type=pathlib.Path, default=ROOT / "runs" / "qg_benchmark",
                        help="turbulence_test.nc and turbulence_climatology.nc")
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "qg_hybrid")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--validation", type=int, default=16, help="windows held out of training")
    parser.add_argument("--every", type=int, default=4, help="keep every n-th fix of the windows file (daily of "
                        "6-hourly: the encoder's cost grows with the fixes; it reads held-out tracks at this cadence)")
    parser.add_argument("--similarity-weights", choices=("uniform", "prior"), default="uniform",
                        help="the similarity's weights (prior: whitened coefficients; not yet measured here)")
    parser.add_argument("--drifters", default="16,64")
    parser.add_argument("--flows", type=int, default=2)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "results" / "qg_hybrid.csv")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    run = args.work / "run"
    train, held = training_pairs(args.windows, args.work, args.validation, args.every)
    seconds = train_encoder(train, held, run, args.epochs, args.batch_size, args.similarity_weights)
    print(f"trained {run} in {seconds:.0f} s", flush=True)
    test, clim = args.data / "turbulence_test.nc", args.data / "turbulence_climatology.nc"
    rows = []
    for n_drifter in (int(n) for n in args.drifters.split(",")):
        for f in range(args.flows):
            linear = default_run(test, clim, args.data, f, n_drifter)
            hybrid = default_run(test, clim, args.data, f, n_drifter, method="hybrid", run_dir=run)
            alone, info = learned_alone(test, clim, args.data / f"defaults_flow{f}_L{n_drifter}.nc", run, f)
            for method, scores in (("linear, climatology prior", linear), ("hybrid, learned prior", hybrid),
                                   ("learned conditional mean alone", alone)):
                row = {"flow": f, "drifters": n_drifter, "method": method, **scores,
                       "prior_inflation": info["prior_inflation"] if method.startswith("hybrid") else ""}
                rows.append(row)
                print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| L | method | error per flow | mean error | hybrid's prior (inflation of the learned; inf: "
             "the climatology's) |", "|---|---|---|---|---|"]
    for n_drifter in sorted({r["drifters"] for r in rows}):
        for method in dict.fromkeys(r["method"] for r in rows):
            rs = [r for r in rows if r["drifters"] == n_drifter and r["method"] == method]
            errors = " / ".join(f"{r['error']:.3f}" for r in rs)
            lines.append(f"| {n_drifter} | {method} | {errors} | "
                         f"{np.mean([r['error'] for r in rs]):.3f} | "
                         f"{' / '.join(str(r['prior_inflation']) for r in rs)} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
