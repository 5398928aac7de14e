"""Fixes a few kilometres off their track, under the cleaning's speed rule, in the shipped GDP-like file.

A fraction of the interior fixes of `lagda/shipped/gdp_like.nc` (never the first or last two of a drifter) is
displaced by 3-8 km in a random direction: in hourly data, apparent hops of about 1-2 m/s, which lagda.io.clean's
spike rule (faster than max(3 m/s, 4x the track's median speed)) keeps. Each file is assimilated as a user would
(`lagda assimilate --tracks FILE`, no method flags: the ocean path) and compared with the clean file's answer: the
relative L2 difference of the mean velocity over the grid cells inside the tracks' lon/lat extent, that difference
in the clean answer's posterior stds (RMS), the CV ratio, the zero guard and the velocities left out as outliers.
With `--truth QG.nc` (the truth `python -m experiments.drifters.gdp_like` writes to runs/gdp/qg_gdp.nc) the error
against the truth as experiments.drifters.gdp_like scores it.

    python -m experiments.drifters.gdp_spikes --truth runs/gdp/qg_gdp.nc  # results/gdp_spikes.csv (this setting's rows)
    python -m experiments.drifters.gdp_spikes --fractions 0.01 --no-low-pass --csv OUT.csv --work DIR

The rows of the other `low_pass` setting already in the CSV are kept.
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib

import numpy as np
import xarray as xr

from experiments.common.paths import ROOT

SHIPPED = ROOT / "lagda" / "shipped" / "gdp_like.nc"
CSV = ROOT / "results" / "gdp_spikes.csv"
COLUMNS = ("low_pass", "fixes_displaced", "planted", "cleaning_spikes_dropped", "cleaning_off_track_dropped",
           "velocity_outliers_dropped", "zero_guard", "cv_ratio", "diff_to_clean", "diff_in_clean_stds",
           "error_vs_truth", "method_seconds")
EARTH_RADIUS_M = 6371e3


def plant(source, out, fraction: float, seed: int) -> int:
    """Writes `source` with round(fraction x fixes) interior fixes displaced 3-8 km to `out`; returns their count."""
    ds = xr.load_dataset(source)
    rng = np.random.default_rng(seed)
    rows = ds["rowsize"].values
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    n = int(round(fraction * rows.sum()))
    interior = np.concatenate([np.arange(s + 2, s + r - 2) for s, r in zip(starts, rows)])
    pick = rng.choice(interior, n, replace=False)
    dist, angle = rng.uniform(3e3, 8e3, n), rng.uniform(0, 2 * np.pi, n)
    lat, lon = ds["lat"].values.copy(), ds["lon"].values.copy()
    lat[pick] += np.degrees(dist * np.sin(angle) / EARTH_RADIUS_M)
    lon[pick] += np.degrees(dist * np.cos(angle) / (EARTH_RADIUS_M * np.cos(np.radians(lat[pick]))))
    ds.assign_coords(lat=("obs", lat), lon=("obs", lon)).to_netcdf(out)
    return n


def inside_extent(path):
    """Returns (u, v, u_std, v_std) `(time, cells)` of a result on its grid cells inside the tracks' extent, and its
    diagnostics of field 0 and its cleaning's counts of spikes and fixes off their track."""
    from lagda.io.results import mean_velocity

    with xr.open_dataset(path) as res:
        lon, lat = np.meshgrid(res["lon"].values, res["lat"].values)
        tl, tt = res["track_lon"].values, res["track_lat"].values
        inside = ((lon >= np.nanmin(tl)) & (lon <= np.nanmax(tl)) & (lat >= np.nanmin(tt)) & (lat <= np.nanmax(tt)))
        fields = [np.asarray(a)[:, inside] for a in (mean_velocity(res, "u"), mean_velocity(res, "v"),
                                                       res["u_std"].values, res["v_std"].values)]
        cleaned = [int(res.attrs.get(f"clean_{rule}_dropped", 0)) for rule in ("spikes", "off_track")]
        return fields, json.loads(res.attrs["diagnostics"])[0], cleaned


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.003, 0.01, 0.03])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "gdp_spikes")
    parser.add_argument("--truth", type=pathlib.Path,
                        help="the QG truth of experiments.drifters.gdp_like (scored when given)")
    parser.add_argument("--no-low-pass", dest="low_pass", action="store_false",
                        help="assimilate the positions as they are (`lagda assimilate --no-low-pass`)")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV, help="the rows (default results/gdp_spikes.csv)")
    args = parser.parse_args(argv)
    from experiments.drifters.lone_eddy import write_rows
    from lagda.assimilation import AssimilateSettings, assimilate_file

    args.work.mkdir(parents=True, exist_ok=True)
    runs = [("clean", SHIPPED, 0)]
    for fraction in args.fractions:
        path = args.work / f"spiked_{fraction:g}.nc"
        runs.append((f"{fraction:g}", path, plant(SHIPPED, path, fraction, args.seed)))
    reference, rows = None, []
    for label, path, planted in runs:
        out = args.work / f"result_{label}.nc"
        summary = assimilate_file(path, out, AssimilateSettings(low_pass=args.low_pass), overwrite=True)
        (u, v, u_std, v_std), info, (spikes, off_track) = inside_extent(out)
        if reference is None:
            reference = (u, v, u_std, v_std)
        u0, v0, us0, vs0 = reference
        row = {"low_pass": int(args.low_pass), "fixes_displaced": label, "planted": planted,
               "cleaning_spikes_dropped": spikes, "cleaning_off_track_dropped": off_track,
               "velocity_outliers_dropped": info.get("velocity_outliers_dropped"), "zero_guard": info["zero_guard"],
               "cv_ratio": round(float(info["cv_ratio"]), 3),
               "diff_to_clean": round(float(np.sqrt(np.sum((u - u0) ** 2 + (v - v0) ** 2) / np.sum(u0**2 + v0**2))),
                                      3),
               "diff_in_clean_stds": round(float(np.sqrt(np.mean(((u - u0) / us0) ** 2 + ((v - v0) / vs0) ** 2) / 2)),
                                           3),
               "method_seconds": round(summary.seconds, 1)}
        if args.truth is not None:
            from experiments.drifters.gdp_like import error_in_extent

            with xr.open_dataset(args.truth) as truth:
                row["error_vs_truth"] = round(error_in_extent(out, truth, path)[0], 3)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.csv.exists():  # the other setting's rows stay
        with open(args.csv, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["low_pass"]) != int(args.low_pass)] + rows
    write_rows(rows, args.csv, COLUMNS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
