"""A lone eddy in a quiet current: `lagda assimilate` and `lagda map` with every default, scored by distance from
the drifters.

Eight drifters are released within 100 km of a Gaussian eddy (radius 50 km, peak speed 0.3 m/s) that drifts with
a uniform current of (0.1, 0.05) m/s, on the plane through 40 W, 35 N (x = R cos(35 N) dlon, y = R dlat), and
followed for 40 days by RK4 steps of 10 minutes: hourly fixes with 50 m position noise, an `id,time,lon,lat` CSV
without lagda attributes. Away from the eddy the truth is the current alone, which no basis of global Fourier
modes holds exactly: the fit of the eddy rings across the box. Each result is scored against the truth on its own
cells and times, in bands of distance from the nearest fix within 12 hours of the time: the relative L2 error,
its RMS in m/s, the fraction of cells whose u and v both lie inside mean +- 1.96 std (the total predictive std:
`u_total_std` of an assimilation, `u_std` of a map), the median std and the fastest speed of the result.

    python -m experiments.drifters.lone_eddy                    # seeds 1-4, results/lone_eddy.csv and its page's table
    python -m experiments.drifters.lone_eddy --seeds 2 --csv OUT.csv --work DIR
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import subprocess
import sys

import numpy as np

from experiments.common.page_tables import write_page
from experiments.common.paths import ROOT
from lagda.io.physical import EARTH_RADIUS_M

CSV = ROOT / "results" / "lone_eddy.csv"
PAGE = ROOT / "docs" / "results" / "away-from-drifters.md"
CENTRE = (-40.0, 35.0)
START = np.datetime64("2025-03-01T00:00:00")
RADIUS, PEAK, CURRENT = 50e3, 0.3, (0.1, 0.05)
BANDS_KM = (0.0, 25.0, 75.0, 150.0, np.inf)
COLUMNS = ("seed", "command", "band_km", "cells", "error", "rms_error_m_s", "coverage", "median_std_m_s",
           "max_speed_m_s", "truth_max_speed_m_s")


def velocity(x, y, t):
    """Returns (u, v) m/s of the flow at plane points x, y (m, any shape) at t seconds after START."""
    dx, dy = x - CURRENT[0] * t, y - CURRENT[1] * t
    g = PEAK / RADIUS * np.exp(0.5 - (dx**2 + dy**2) / (2 * RADIUS**2))
    return CURRENT[0] + g * dy, CURRENT[1] - g * dx


def write_tracks(path: pathlib.Path, n: int = 8, days: int = 40, seed: int = 2, noise_m: float = 50.0,
                 oscillation=None) -> tuple[np.ndarray, np.ndarray]:
    """Writes the drifters' `id,time,lon,lat` CSV at `path` and returns their fixes x, y `(hour, drifter)` metres on
    the plane (with the noise). `oscillation(t)`: (u, v) m/s added to the flow everywhere at t seconds (what the
    drifters also feel, not the truth a result is scored against)."""
    def f(z, t):
        u, v = velocity(z[0], z[1], t)
        du, dv = (0.0, 0.0) if oscillation is None else oscillation(t)
        return np.stack([u + du, v + dv])

    rng = np.random.default_rng(seed)
    angle, r = rng.uniform(0, 2 * np.pi, n), rng.uniform(0.2, 1.0, n) * 100e3
    z, step, fixes = np.stack([r * np.cos(angle), r * np.sin(angle)]), 600.0, []
    for k in range(days * 24 * 6 + 1):  # RK4 steps of 10 minutes, a fix every hour
        if k % 6 == 0:
            fixes.append(z + rng.normal(0.0, noise_m, z.shape))
        t = k * step
        k1 = f(z, t)
        k2 = f(z + step / 2 * k1, t + step / 2)
        k3 = f(z + step / 2 * k2, t + step / 2)
        z = z + step / 6 * (k1 + 2 * k2 + 2 * k3 + f(z + step * k3, t + step))
    x, y = np.stack(fixes)[:, 0], np.stack(fixes)[:, 1]
    lon, lat = to_lonlat(x, y)
    stamps = [str(START + np.timedelta64(h, "h")) + "Z" for h in range(len(x))]
    lines = ["id,time,lon,lat"] + [f"d{d},{stamps[h]},{lon[h, d]:.5f},{lat[h, d]:.5f}"
                                   for d in range(n) for h in range(len(x))]
    path.write_text("\n".join(lines) + "\n")
    return x, y


def to_lonlat(x, y):
    """Returns (lon, lat) degrees of plane points x, y metres."""
    return (CENTRE[0] + np.rad2deg(x / (EARTH_RADIUS_M * np.cos(np.deg2rad(CENTRE[1])))),
            CENTRE[1] + np.rad2deg(y / EARTH_RADIUS_M))


def to_plane(lon, lat):
    """Returns (x, y) metres on the plane of lon, lat degrees."""
    return (np.deg2rad(lon - CENTRE[0]) * EARTH_RADIUS_M * np.cos(np.deg2rad(CENTRE[1])),
            np.deg2rad(lat - CENTRE[1]) * EARTH_RADIUS_M)


def score(result: pathlib.Path, fix_x, fix_y) -> list[dict]:
    """Returns one row per distance band of a result (`lagda assimilate` or `lagda map`) against the truth: see the
    module docstring. Bands without cells are left out."""
    import xarray as xr

    with xr.open_dataset(result) as ds:
        std = "u_total_std" if "u_total_std" in ds else "u_std"
        lon, lat = np.meshgrid(ds.lon.values, ds.lat.values)
        x, y = to_plane(lon, lat)
        hours = (ds.time.values - START) / np.timedelta64(1, "h")
        parts = []
        for k, hour in enumerate(hours):
            near = slice(max(int(np.floor(hour)) - 12, 0), max(int(np.ceil(hour)) + 13, 0))
            if not fix_x[near].size:
                continue
            distance = np.hypot(x[..., None] - fix_x[near].ravel(), y[..., None] - fix_y[near].ravel()).min(axis=-1)
            u, v = velocity(x, y, 3600.0 * hour)
            parts.append(np.stack([distance, u, v, ds.u.values[k], ds.v.values[k], ds[std].values[k],
                                   ds[std.replace("u", "v", 1)].values[k]], axis=-1).reshape(-1, 7))
    d, ut, vt, u, v, su, sv = np.concatenate(parts).T
    rows = []
    for lo, hi in zip(BANDS_KM[:-1], BANDS_KM[1:]):
        keep = (d >= lo * 1e3) & (d < hi * 1e3) & np.isfinite(u)
        if not keep.any():
            continue
        e2 = (u - ut) ** 2 + (v - vt) ** 2
        inside = (np.abs(u - ut) <= 1.96 * su) & (np.abs(v - vt) <= 1.96 * sv)
        rows.append({"band_km": f"{lo:g}-{hi:g}", "cells": int(keep.sum()),
                     "error": float(np.sqrt(e2[keep].sum() / (ut[keep] ** 2 + vt[keep] ** 2).sum())),
                     "rms_error_m_s": float(np.sqrt(e2[keep].mean() / 2)), "coverage": float(inside[keep].mean()),
                     "median_std_m_s": float(np.median(su[keep])),
                     "max_speed_m_s": float(np.hypot(u, v)[keep].max()),
                     "truth_max_speed_m_s": float(np.hypot(ut, vt)[keep].max())})
    return rows


def run(command: str, tracks: pathlib.Path, out: pathlib.Path, *options: str) -> None:
    """Runs `lagda COMMAND --tracks TRACKS --out OUT` (every default, but `options`) in a fresh process.

    Raises
    ------
    RuntimeError
        if it exits non-zero (its last output line in the message).
    """
    done = subprocess.run([sys.executable, "-m", "lagda", command, "--tracks", str(tracks), "--out", str(out),
                           "--overwrite", *options], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"lagda {command} exited {done.returncode}: {done.stderr.strip().splitlines()[-1]}")


def run_and_score(command: str, tracks: pathlib.Path, out: pathlib.Path, fixes, labels: dict, *options: str):
    """Returns the `score` rows of `lagda COMMAND` on `tracks` (`run`, with `options`), each after `labels`, and
    prints each (`said`). fixes: (fix_x, fix_y) of `write_tracks`."""
    run(command, tracks, out, *options)
    rows = [{**labels, **row} for row in score(out, *fixes)]
    for row in rows:
        print(said(row), flush=True)
    return rows


def said(row: dict) -> str:
    """Returns one progress line of a CSV row."""
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())


def write_rows(rows: list[dict], path: pathlib.Path, columns) -> None:
    """Writes `rows` as the CSV at `path` (its `columns`, floats to 5 decimals) and says so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    print(f"wrote {path}")


def page_table(csv_path: pathlib.Path) -> str:
    """Returns the page's Markdown table of the CSV: per command and band, the rows of every seed."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines = ["| command | distance from a fix (km) | seed | cells | error | RMS error m/s | coverage (95%) | "
             "median std m/s | fastest m/s (truth) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["command"], float(r["band_km"].split("-")[0]), int(r["seed"]))):
        lines.append(f"| {r['command']} | {r['band_km']} | {r['seed']} | {r['cells']} | {float(r['error']):.3g} | "
                     f"{float(r['rms_error_m_s']):.3f} | {float(r['coverage']):.3f} | "
                     f"{float(r['median_std_m_s']):.3f} | {float(r['max_speed_m_s']):.2f} "
                     f"({float(r['truth_max_speed_m_s']):.2f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "lone_eddy")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV, help="the rows (default results/lone_eddy.csv)")
    parser.add_argument("--page", action="store_true", help="write the table into the results page too")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in args.seeds:
        tracks = args.work / f"lone_{seed}.csv"
        fixes = write_tracks(tracks, seed=seed)
        for command in ("assimilate", "map"):
            rows += run_and_score(command, tracks, args.work / f"{command}_{seed}.nc", fixes,
                                  {"seed": seed, "command": f"lagda {command}"})
    write_rows(rows, args.csv, COLUMNS)
    if args.page:
        print(f"wrote {write_page(args.csv, PAGE, page_table, marker='lone-eddy table')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
