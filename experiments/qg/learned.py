"""The learned methods on QG flows: a set encoder trained on Rossby-wave flows of pyqg-jax.

In the `rossby` regime lagda's own model is right (the file's modes with the dispersion-relation
frequencies; the file's `true_coef` are the coefficients at t = 0), so a QG Rossby file is a
training set of pairs (coefficients, drifter tracks) in lagda's conventions. This script:
1. converts QG Rossby files (`lagda simulate --flow qg --regime rossby`) to lagda datasets (the
   tracks in model units, the true coefficients, the modes and frequencies; the prior scale the
   training coefficients' RMS per mode);
2. trains the `learned` preset (set encoder, mixture of observation regimes up to the file's
   drifters) on them (`lagda train`'s library function, resumable);
3. assimilates held-out Rossby flows with L drifters, 6-hourly (`--every`, as trained), noise 0 or 10 m: `linear` (the
   physics), `embed` (the learned conditional) and `hybrid` (it as the prior of the linear
   inversion), all with the same prior, scored like experiments/qg/benchmark.py (relative L2
   velocity error against the gridded truth, and the projection limit of lagda's model).

    lagda simulate --flow qg --regime rossby --n-samples 4096 --n-drifters 8 --seed 21 --out runs/qg_learned/train.nc
    lagda simulate --flow qg --regime rossby --n-samples 16 --n-drifters 16 --seed 22 --out runs/qg_learned/test.nc
    python -m experiments.qg.learned --train runs/qg_learned/train.nc --test runs/qg_learned/test.nc
Writes results/qg_learned.csv and .md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import pathlib
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from experiments.common.paths import ROOT  # noqa: E402
from lagda.io.formats import read_tracks  # noqa: E402


def to_lagda_dataset(qg_path, out, prior_scale=None, every: int = 1, drifters: int | None = None) -> np.ndarray:
    """Writes the QG Rossby file `qg_path` as a lagda dataset `out`; returns its prior scale `(mode,)`.

    Keeps every `every`-th fix of the first `drifters` drifters of each flow. Prior scale:
    `prior_scale`, else the RMS over flows of each mode's true coefficient.

    Raises
    ------
    ValueError
        for a QG file without true coefficients (the turbulence regime).
    """
    import xarray as xr

    from simulate.config import SimConfig
    from simulate.generate import write_netcdf
    from simulate.schema import to_dataset

    tracks = read_tracks(qg_path)
    if tracks.true_coef is None:
        raise ValueError(f"{qg_path} has no true coefficients: only the rossby regime is lagda's own model")
    with xr.open_dataset(qg_path) as ds:
        k1, k2, omega = ds.k1.values, ds.k2.values, ds.omega.values
        n_flow = ds.sizes["flow"]
    n_obs = tracks.times.shape[1]
    positions = tracks.positions.reshape(n_flow, -1, n_obs, 2)[:, :drifters, every - 1 :: every]
    release = tracks.release.reshape(n_flow, -1, 2)[:, :drifters]
    n_obs = positions.shape[2]
    coef = tracks.true_coef
    scale = np.sqrt(np.mean(np.abs(coef) ** 2, axis=0)) if prior_scale is None else prior_scale
    spacing = float(tracks.times[0, every - 1])
    config = SimConfig(n_samples=n_flow, n_drifters=positions.shape[1], dt=spacing, t_final=spacing * n_obs, stride=1,
                       release="random", precision="float32")
    write_netcdf(to_dataset(config, k1=k1, k2=k2, omega=omega, prior_scale=scale, coef=coef, release=release,
                             positions=positions, history=f"converted from the QG Rossby file {qg_path}"),
                  pathlib.Path(out))
    return scale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", type=pathlib.Path, required=True)
    parser.add_argument("--test", type=pathlib.Path, required=True)
    parser.add_argument("--run", type=pathlib.Path, default=ROOT / "runs" / "qg_learned" / "run")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--drifters", default="2,4", help="drifters per test flow, L,...")
    parser.add_argument("--train-drifters", type=int, default=4, help="drifters per training flow kept")
    parser.add_argument("--every", type=int, default=6, help="keep every N-th hourly fix (training and test)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "results" / "qg_learned.csv")
    args = parser.parse_args(argv)
    from experiments.qg.benchmark import GPS_M, RossbyCase, observe, relative
    from lagda.assimilation.methods.learned import scorer_from_run
    from lagda.assimilation.methods.registry import METHODS
    from lagda.assimilation.model import flow_model
    from lagda.learning.config import learned
    from lagda.learning.train import train

    work = args.run.parent
    work.mkdir(parents=True, exist_ok=True)
    train_nc, test_nc = work / "train_lagda.nc", work / "test_lagda.nc"
    if not train_nc.exists():
        scale = to_lagda_dataset(args.train, train_nc, every=args.every, drifters=args.train_drifters)
        to_lagda_dataset(args.test, test_nc, scale, every=args.every, drifters=args.train_drifters)
    n_train_drifters = args.train_drifters
    config = learned(set_head="ridge", epochs=args.epochs, regime="mixture",
                     regime_max_drifters=n_train_drifters,
                     batch_size=args.batch_size, eval_library=min(4096, args.batch_size * 32))
    start = time.perf_counter()
    train(config, str(train_nc), str(test_nc), args.run, resume=(args.run / "checkpoints").exists(), progress=False)
    print(f"trained {args.run} in {time.perf_counter() - start:.0f} s", flush=True)
    scorer, _ = scorer_from_run(args.run)
    case = RossbyCase(args.test, args.train)  # truth, fit and the spectrum-shaped prior of the training flows
    import xarray as xr

    with xr.open_dataset(train_nc) as ds:
        scale = ds.prior_scale.values  # the dataset's prior: every method uses it
    tracks = case.tracks
    model = flow_model(case.k1, case.k2, case.omega, scale, float(tracks.times[0, args.every - 1]))
    rows = []
    for f in range(tracks.n_field):
        sub = tracks.for_field(f)
        for n_drifter in (int(n) for n in args.drifters.split(",")):
            for noise_m in (0.0, GPS_M):
                pos, times, release = observe(sub, n_drifter, args.every, noise_m, case.length_m,
                                              seed=1000 * f + n_drifter)
                part = dataclasses.replace(sub, positions=pos, times=times, release=release,
                                           field=np.zeros(n_drifter, int),
                                           trajectory_id=sub.trajectory_id[:n_drifter], true_coef=None)
                for method in ("linear", "embed", "hybrid"):
                    options = {"members": 2, "noise_std": noise_m / case.length_m if noise_m else None}
                    cls = METHODS[method]
                    t0 = time.perf_counter()
                    method_obj = cls(scorer, **options, bank_size=20_000) if cls.learned else cls(**options)
                    post = method_obj(part, model, jax.random.key(f))
                    u, v = case.fields(post.mean[0])
                    row = {"flow": f, "drifters": n_drifter, "noise_m": noise_m, "method": method,
                           "error": relative(u, v, case.u[f], case.v[f]),
                           "limit": relative(case.u_fit[f], case.v_fit[f], case.u[f], case.v[f]),
                           "seconds": time.perf_counter() - t0}
                    rows.append(row)
                    print(row, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| drifters | noise (m) | method | flows | median error | mean error | median error / limit |",
             "|" + "---|" * 7]
    for n_drifter in sorted({r["drifters"] for r in rows}):
        for noise_m in (0.0, GPS_M):
            for method in ("linear", "embed", "hybrid"):
                rs = [r for r in rows
                      if r["drifters"] == n_drifter and r["noise_m"] == noise_m and r["method"] == method]
                ratio = np.median([r["error"] / r["limit"] for r in rs])
                lines.append(f"| {n_drifter} | {noise_m:g} | {method} | {len(rs)} | "
                             f"{np.median([r['error'] for r in rs]):.4f} | {np.mean([r['error'] for r in rs]):.4f} | "
                             f"{ratio:.2f} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
