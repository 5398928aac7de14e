"""How a benchmark regime's field error moves with the position noise sigma the fit is given.

For each held-out flow of a regime of experiments/assimilation/benchmark.py (K = 49 without --quick, K = 9 with
it), `var` fits the MAP at each sigma of --sigmas (variational.map_fit from the prior mean, noise given) and once
with the noise estimated as a user runs it; each fit's Laplace log evidence is
    log p(y | sigma) ~ -J(x_sigma) + log |det S_sigma| - n log sigma   (S S^T the Laplace covariance, n data),
and the sigma-marginal estimate is the mean of the MAPs weighted by that evidence under a uniform prior on sigma
(the prior of linear_gaussian.noise_quantiles). Prints one line per flow and the medians over the flows, each
against the benchmark's posterior-mean row given the true noise (--yardstick, a per-field CSV):

    python -m experiments.assimilation.noise_scan --quick --regime sparse100
    python -m experiments.assimilation.noise_scan --quick --regime sparse100-noisy-4 \
        --sigmas 1e-5,3e-5,1e-4,3e-4,1e-3,3e-3
    python -m experiments.assimilation.noise_scan --regime sparse100-noisy-4 --flows 5,11 \
        --yardstick results/k49/pm_s*.fields.csv

Results: docs/results/assimilation-noise.md ("The same information as hybrid").
"""

from __future__ import annotations

import argparse
import csv
import sys

import numpy as np

from experiments.assimilation import benchmark as bench
from lagda.assimilation.methods.config import VarConfig
from lagda.assimilation.methods.observations import arrange
from lagda.assimilation.methods.variational import map_fit
from lagda.assimilation.model import to_complex
from lagda.assimilation.scores import velocity_field_error, window_times


def field_error(x, tracks, model) -> float:
    """Returns the grid-velocity relative error of the field x `(2K,)` against the one-field tracks' truth (the
    benchmark's velocity_rel_l2: scores.velocity_field_error over scores.window_times)."""
    error = velocity_field_error(tracks.true_coef, to_complex(x)[None, :], model.k1, model.k2, model.omega,
                                 window_times(tracks))
    return float(error[0])


def sigma_fits(tracks, model, sigmas) -> tuple[list, np.ndarray]:
    """Returns (var's MapFit at each sigma, their Laplace log evidences `(sigma,)` up to one constant) of one flow."""
    n_data = int(2 * np.sum(arrange(tracks.positions, tracks.times, tracks.release, model.dt).mask > 0))
    fits = [map_fit(tracks.positions, tracks.times, tracks.release, model, VarConfig(noise_std=float(s), iterations=10))
            for s in sigmas]
    log_evidence = np.array([-f.info["cost"] + np.linalg.slogdet(f.root)[1] - n_data * np.log(f.sigma) for f in fits])
    return fits, log_evidence


def scan_flow(tracks, model, sigmas) -> dict:
    """Returns {name: field error} of one flow's MAPs at each sigma, at the estimated one ("estimated") and of
    the sigma-marginal mean ("marginal"), with the estimate's sigma and 90% interval."""
    fits, log_evidence = sigma_fits(tracks, model, sigmas)
    log_weight = log_evidence + np.log(sigmas)  # a uniform prior on sigma over a log grid
    weight = np.exp(log_weight - log_weight.max())
    marginal = (weight / weight.sum()) @ np.stack([f.x for f in fits])
    estimated = map_fit(tracks.positions, tracks.times, tracks.release, model, VarConfig(iterations=10))
    errors = {f"sigma={s:g}": field_error(f.x, tracks, model) for s, f in zip(sigmas, fits)}
    return errors | {"estimated": field_error(estimated.x, tracks, model),
                     "marginal": field_error(marginal, tracks, model),
                     "sigma_estimated": estimated.sigma, "sigma_90": estimated.info.get("sigma_90")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="K = 9, T = 0.02 (the benchmark's --quick)")
    p.add_argument("--regime", default="sparse100", choices=sorted(bench.REGIMES))
    p.add_argument("--fields", type=int, default=16, help="held-out flows drawn (the benchmark's --fields)")
    p.add_argument("--flows", default=None, help="comma list of the flows to scan (default: every one)")
    p.add_argument("--sigmas", default="1e-6,3e-6,1e-5,3e-5,1e-4,3e-4,1e-3,3e-3", help="comma list of noise stds")
    p.add_argument("--yardstick", nargs="+", default=["results/assimilation_benchmark_posterior16_quick.fields.csv"],
                   help="per-field CSVs with the posterior-mean:var row of the scanned flows")
    args = p.parse_args(argv)
    sigmas = np.array([float(s) for s in args.sigmas.split(",")])
    model = bench.default_model(args.quick)
    n_steps = int(round((0.02 if args.quick else 0.1) / model.dt))
    flows = [int(f) for f in args.flows.split(",")] if args.flows else list(range(args.fields))
    tracks = bench.regime_tracks(model, bench.REGIMES[args.regime], n_steps, args.fields, flows)
    yardstick = {}
    for path in args.yardstick:
        with open(path, newline="") as fh:
            yardstick |= {int(r["field"]): float(r["velocity_rel_l2"]) for r in csv.DictReader(fh)
                          if r["regime"] == args.regime and r["method"] == "posterior-mean:var"}
    missing = sorted(set(flows) - set(yardstick))
    if missing:
        p.error(f"no posterior-mean:var row of {args.regime} flow(s) {missing} in {', '.join(args.yardstick)}")
    rows = []
    for i, f in enumerate(flows):
        row = scan_flow(tracks.for_field(i), model, sigmas)
        rows.append(row)
        errors = " ".join(f"{k} {v:.4g}" for k, v in row.items() if not k.startswith("sigma_"))
        print(f"flow {f}: posterior mean {yardstick[f]:.4g} | {errors} | sigma estimated {row['sigma_estimated']:.2g} "
              f"(90% {row['sigma_90']})", flush=True)
    reference = np.median([yardstick[f] for f in flows])
    for name in [k for k in rows[0] if not k.startswith("sigma_")]:
        errors = np.array([r[name] for r in rows])
        ratios = errors / np.array([yardstick[f] for f in flows])
        median = np.median(errors)
        print(f"{name}: median error {median:.4g} = {median / reference:.3f}x the posterior mean's ({reference:.4g}); "
              f"per flow {np.min(ratios):.3f}-{np.max(ratios):.3f}x, median {np.median(ratios):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
