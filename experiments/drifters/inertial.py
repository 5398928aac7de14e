"""Inertial oscillations and tides on drifters in eddies: `lagda map` and `lagda assimilate` with every default
(each drifter's positions low-passed) and with `--no-low-pass`, scored against the flow without them.

The flow and drifters of experiments.drifters.lone_eddy (a Gaussian eddy drifting in a uniform current at 40 W, 35 N; 8
drifters, 40 days, hourly fixes with 50 m noise), the drifters also carried by a velocity uniform in space:
none; a clockwise inertial oscillation of 0.15 m/s at f(35 N) (period 20.9 h), in phase everywhere as wind makes
it; an M2 tidal ellipse (0.1 m/s along x, 0.05 along y); or both with a K1 ellipse (0.05, 0.025 m/s). A daily map
is of the flow varying over days, so each result is scored against the eddy and current alone, in bands of distance
from the nearest fix within 12 hours (experiments.drifters.lone_eddy.score: error relative to the truth's RMS speed,
coverage of the 95% band, median std).

    python -m experiments.drifters.inertial --page             # seeds 1-2, results/inertial.csv and its page's table
    python -m experiments.drifters.inertial --seeds 2 --csv OUT.csv --work DIR
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys

import numpy as np

from experiments.common.page_tables import write_page
from experiments.common.paths import ROOT
from experiments.drifters.lone_eddy import CENTRE, run_and_score, write_rows, write_tracks
from lagda.io.lowpass import M2_S, OMEGA

CSV = ROOT / "results" / "inertial.csv"
PAGE = ROOT / "docs" / "results" / "inertial-and-tides.md"
F0 = 2 * OMEGA * np.sin(np.deg2rad(CENTRE[1]))
K1_S = 23.9344696 * 3600.0


def ellipse(t, amplitude: float, period_s: float, clockwise: bool = True):
    """Returns (u, v) m/s of a velocity turning with `period_s`, `amplitude` along x and half that along y."""
    w = 2 * np.pi / period_s
    return amplitude * np.cos(w * t), (-1 if clockwise else 1) * 0.5 * amplitude * np.sin(w * t)


CASES = {
    "none": None,
    "inertial 0.15 m/s": lambda t: (0.15 * np.cos(F0 * t), -0.15 * np.sin(F0 * t)),
    "M2 tide 0.1 m/s": lambda t: ellipse(t, 0.1, M2_S),
    "inertial + M2 + K1": lambda t: tuple(a + b + c for a, b, c in zip(
        (0.15 * np.cos(F0 * t), -0.15 * np.sin(F0 * t)), ellipse(t, 0.1, M2_S), ellipse(t, 0.05, K1_S, False))),
}
COLUMNS = ("case", "seed", "command", "low_pass", "band_km", "cells", "error", "rms_error_m_s", "coverage",
           "median_std_m_s", "max_speed_m_s", "truth_max_speed_m_s")


def page_table(csv_path: pathlib.Path) -> str:
    """Returns the page's Markdown table of the CSV: per case, command and band, each seed's error (coverage) with
    the default low-pass and with --no-low-pass."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cell = {}
    for r in rows:
        cell.setdefault((r["case"], r["command"], r["band_km"], r["low_pass"]), []).append(
            f"{float(r['error']):.3f} ({float(r['coverage']):.2f})")
    lines = ["| drifters also feel | command | distance from a fix (km) | default: error (coverage), seed by seed | "
             "--no-low-pass |", "|---|---|---|---|---|"]
    for case, command, band, _ in dict.fromkeys(k for k in cell if k[3] == "True"):
        lines.append(f"| {case} | {command} | {band} | {' / '.join(cell[case, command, band, 'True'])} | "
                     f"{' / '.join(cell.get((case, command, band, 'False'), ['-']))} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "inertial")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV, help="the rows (default results/inertial.csv)")
    parser.add_argument("--page", action="store_true", help="write the table into the results page too")
    parser.add_argument("--page-only", action="store_true", help="only write the page's table from the CSV")
    args = parser.parse_args(argv)
    if args.page_only:
        print(f"wrote {write_page(args.csv, PAGE, page_table, marker='inertial table')}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in args.seeds:
        for k, case in enumerate(args.cases):
            tracks = args.work / f"tracks_{k}_{seed}.csv"
            fixes = write_tracks(tracks, seed=seed, oscillation=CASES[case])
            for command in ("map", "assimilate"):
                for low_pass in (True, False):
                    rows += run_and_score(command, tracks, args.work / f"{command}_{k}_{seed}_{int(low_pass)}.nc",
                                          fixes, {"case": case, "seed": seed, "command": f"lagda {command}",
                                                  "low_pass": low_pass}, *(() if low_pass else ("--no-low-pass",)))
    write_rows(rows, args.csv, COLUMNS)
    if args.page:
        print(f"wrote {write_page(args.csv, PAGE, page_table, marker='inertial table')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
