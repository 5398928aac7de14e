"""The basin-year benchmark: `lagda map` on a year of GDP-like drifters in a QG ocean, scored against its truth.

Steps (each cached in the work folder, default runs/basin_year/; `--quick` uses runs/basin_year_quick/):

- `make`: the archive and the truth (experiments.basin.ocean, experiments.basin.archive): a pyqg-jax QG year on a
  4,500 km domain with its mean current, placed at 30 W, 30 N; 400 drifters released over the year, hourly fixes
  with GDP-like problems, written as `archive.nc` (GDP-hourly ragged, no lagda attributes) and `archive_stats.json`;
  the truth, daily u, v on the region's grid (lon -50..-10, lat 10..50 at 0.25 degree), as `truth.nc`.
- `baselines`: binned means (0.25, 0.5, 1 degree; daily and 11-day windows) and a Goncalves-style GP per tile
  (experiments.basin.methods), each scored; rows in the CSV.
- `score --store STORE`: a `lagda map` store against the truth (experiments.basin.methods.score_map).
- `run`: `lagda map` with 1 and 2 workers (wall time, tiles/s, peak memory of the process tree), scored; the
  one-box `lagda assimilate` comparison; the CSV and its table of every row (results/basin_year.md; the docs page
  docs/results/basin-year.md opens with the summary experiments.common.results_pages makes from the same CSV).
- `six-hourly`, `daily`: `lagda map` (the last of `--workers`) on the archive's fixes at the GDP's 6-hourly times
  (00, 06, 12, 18 UTC), or at 00 UTC only, scored.

    python -m experiments.basin.year make
    python -m experiments.basin.year baselines
    python -m experiments.basin.year run [--workers 1 2]
    python -m experiments.basin.year six-hourly    # lagda map on the archive's fixes at 00, 06, 12, 18 UTC only
    python -m experiments.basin.year daily         # ... at 00 UTC only
    python -m experiments.basin.year page          # regenerate results/basin_year.md's table from the CSV
    python -m experiments.basin.year all --quick    # a tiny configuration end to end (needs `lagda map`)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import pathlib
import sys
import time

import numpy as np
import xarray as xr

from experiments.basin.archive import START, make_archive, to_gdp_dataset
from experiments.basin.benchmark import Benchmark, full, quick
from experiments.basin.methods import (
    Tiling,
    binned_means,
    crop_to_truth,
    fd_velocities,
    gp_tiles,
    score_map,
    score_on_own_cells,
)
from experiments.basin.ocean import simulate_year, truth_on_grid
from experiments.basin.run import box_comparison, run_map, subset_archive
from experiments.common.csv_rows import merge_rows
from experiments.common.page_tables import write_page
from experiments.common.paths import ROOT
from lagda.mapping.store import open_map

CSV = ROOT / "results" / "basin_year.csv"
GP_SUBSAMPLE = 200  # velocities per tile and window for the GP baseline (its cost grows as the square)
PAGE = ROOT / "results" / "basin_year.md"  # every row of the CSV as a table, between "basin-year table" markers


def make(bench: Benchmark, work: pathlib.Path, log=print) -> tuple[pathlib.Path, pathlib.Path]:
    """Returns (archive.nc, truth.nc) in `work`, made unless both exist (with archive_stats.json; the QG year is
    cached as qg_year.npz).

    Raises
    ------
    ValueError
        for a bad setting
    ImportError
        without pyqg-jax.
    """
    archive, truth, stats_path = work / "archive.nc", work / "truth.nc", work / "archive_stats.json"
    if archive.exists() and truth.exists() and stats_path.exists():
        log(f"make: cached {archive} and {truth}")
        return archive, truth
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    raw = work / "qg_year.npz"  # the QG year itself, so a failure after it does not rerun it
    if raw.exists():
        with np.load(raw) as saved:
            year = dict(saved)
        log(f"make: cached {raw}")
    else:
        year = simulate_year(bench.ocean, log=log)
        np.savez(work / "qg_year.part.npz", **year)
        (work / "qg_year.part.npz").rename(raw)
    lon, lat = bench.grid()
    days = START.astype("datetime64[ns]") + np.arange(bench.ocean.days + 1) * np.timedelta64(1, "D")
    truth_ds = truth_on_grid(bench.ocean, year["u"], year["v"], lon, lat, days)
    rows, stats = make_archive(bench.ocean, bench.archive, year["positions"], bench.ocean.dt, START)
    in_region = _in_region(rows["lon"], rows["lat"], bench.region)
    stats.update(fixes_in_region=int(in_region.sum()), region=list(bench.region), period=list(bench.period),
                 seconds=round(time.perf_counter() - began, 1), ocean=_plain(dataclasses.asdict(bench.ocean)),
                 archive=_plain(dataclasses.asdict(bench.archive)),
                 truth_rms_speed=float(np.sqrt(np.mean(truth_ds["u"].values ** 2 + truth_ds["v"].values ** 2))))
    for path, ds in ((truth, truth_ds), (archive, to_gdp_dataset(rows))):
        part = path.with_suffix(".nc.part")
        ds.to_netcdf(part)
        part.rename(path)
    stats_path.write_text(json.dumps(stats, indent=1))
    log(f"make: {stats['trajectories']} trajectories from {stats['drifters']} drifters, {stats['fixes']} fixes "
        f"({stats['fixes_in_region']} in the region) in {stats['seconds']:.0f} s -> {archive}, {truth}")
    return archive, truth


def _in_region(lon, lat, region) -> np.ndarray:
    lon0, lon1, lat0, lat1 = region
    return (lon >= lon0) & (lon < lon1) & (lat >= lat0) & (lat < lat1)


def _plain(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}




def tiling_of(bench: Benchmark) -> Tiling:
    """Returns the benchmark's own tiling (used by the GP baseline when no map store says otherwise)."""
    return Tiling(bench.tile_size_deg, bench.halo_deg, bench.window_days, bench.window_step_days)


def baselines(bench: Benchmark, work: pathlib.Path, store: xr.Dataset | None = None, log=print) -> list[dict]:
    """Returns one CSV row per baseline (binned means at 0.25, 0.5, 1 degree, daily and 11-day windows; the GP per
    tile in its own tiling, cached in work), each scored on its own cells (and the map's error there when `store` is
    given)."""
    archive, truth_path = make(bench, work, log)
    truth = xr.open_dataset(truth_path)
    began = time.perf_counter()
    with xr.open_dataset(archive) as ds:
        fixes, counts = fd_velocities(ds.load())
    log(f"finite differences: {json.dumps(counts)} in {time.perf_counter() - began:.0f} s")
    lon, lat = bench.grid()
    times = truth["time"].values
    rows = []
    for bin_deg in (0.25, 0.5, 1.0):
        if bin_deg < bench.resolution:
            continue
        for window in (1, 11):
            began = time.perf_counter()
            maps = binned_means(fixes, lon, lat, times, bin_deg, window)
            rows.append(_row(f"binned {bin_deg:g} deg", f"{window}-day window", maps, store, truth,
                             time.perf_counter() - began, "numpy bincount (clouddrift 0.44 has no binning)"))
    tiling = tiling_of(bench)  # the GP's own tiling (5-degree tiles, 30-day windows every 10 days), not the map's
    gp_path = work / "gp_{:g}_{:g}_{:g}_{:g}.nc".format(*dataclasses.astuple(tiling))
    seconds = None
    if gp_path.exists():
        gp = xr.open_dataset(gp_path)
        log(f"GP: cached {gp_path}")
    else:
        began = time.perf_counter()
        gp = gp_tiles(fixes, lon, lat, times, tiling, n_sub=GP_SUBSAMPLE, log=log)
        seconds = time.perf_counter() - began
        gp.attrs["seconds"] = seconds
        gp.to_netcdf(gp_path)
    seconds = seconds or float(gp.attrs.get("seconds", float("nan")))
    note = (f"{gp.attrs['tile_windows']} tile-windows, <= {GP_SUBSAMPLE} velocities each "
            f"({gp.attrs['velocities_used']} in all); "
            f"u: l {gp.attrs['gp_u_ell_km']:.0f} km, tau {gp.attrs['gp_u_tau_days']:.1f} d; "
            f"v: l {gp.attrs['gp_v_ell_km']:.0f} km, tau {gp.attrs['gp_v_tau_days']:.1f} d")
    row = _row("GP per tile", f"tile {tiling.tile_size_deg:g} deg, halo {tiling.halo_deg:g}, window "
               f"{tiling.window_days:g}/{tiling.window_step_days:g} d", gp, store, truth, seconds, note)
    informed = np.isfinite(gp["u"].values) & np.isfinite(gp["u_std"].values)
    tr = truth.sel(time=gp["time"].values)
    inside = [np.abs(gp[c].values - tr[c].values)[informed] <= 1.96 * gp[f"{c}_std"].values[informed] for c in "uv"]
    row["coverage"] = float(np.concatenate(inside).mean())
    rows.append(row)
    where = np.isfinite(binned_means(fixes, lon, lat, times, bench.resolution, 1)["u"].values)
    rows.append(_row("GP per tile", "cells with a fix that day", gp.where(where), store, truth, seconds,
                     "the GP's map on the cells holding a quality-controlled velocity within half a day"))
    for r in rows:
        log(f"{r['method']} ({r['config']}): error {r['error']:.3f} on {r['cells']} cell-days"
            + (f", map {r['map_error_same_cells']:.3f} there" if store is not None else ""))
    return rows


def _row(method, config, maps, store, truth, seconds, notes) -> dict:
    score = score_on_own_cells(maps, store, truth)
    return {"method": method, "config": config, "error": score["error"], "cells": score["cells"],
            "map_error_same_cells": score.get("map_error", float("nan")),
            "method_error_shared": score.get("method_error_shared", float("nan")), "wall_s": seconds, "notes": notes}


COLUMNS = ["method", "config", "workers", "error", "cells", "coverage", "coverage_all", "error_all", "seam_ratio",
           "box_ratio",
           "map_error_same_cells", "method_error_shared", "wall_s", "tiles", "tiles_per_s", "peak_rss_gb", "notes"]


def write_csv(rows: list[dict], path: pathlib.Path) -> pathlib.Path:
    """Returns `path` with `rows` merged in: a row replaces the one of the same (method, config)."""
    return merge_rows(path, rows, COLUMNS, lambda r: (r["method"], r["config"]))


def page_table(csv_path: pathlib.Path) -> str:
    """Returns every row of the CSV as a markdown table (the table of results/basin_year.md)."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    head = ("| method | configuration | error on its cells | cell-days | lagda map on the same cells | coverage (95%) "
            "| map on every cell: error, coverage | seam ratio | one box (map / assimilate) | wall s | tiles/s "
            "| peak GB |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        every = f"{r['error_all']}, {r['coverage_all']}" if r.get("error_all") else ""
        lines.append("| " + " | ".join([*(r.get(k, "") or "" for k in (
            "method", "config", "error", "cells", "map_error_same_cells", "coverage")), every, *(r.get(k, "") or ""
            for k in ("seam_ratio", "box_ratio", "wall_s", "tiles_per_s", "peak_rss_gb"))]) + " |")
    return "\n".join(lines)


def score_store(bench: Benchmark, store_path, truth: xr.Dataset, label: str) -> dict:
    """Returns the CSV row of a `lagda map` store scored against the truth (`score_map`), on the truth's cells and
    days when the store covers more (`crop_to_truth`; its tile edges are then not the truth grid's: no seam ratio)."""
    store, cropped = crop_to_truth(open_map(store_path), truth)
    score = score_map(store, truth)
    seams = ("seams not scored (the map's tiles start at its own corner)" if cropped else
             f"error within a halo of a tile edge {score['error_seam']:.3f}, elsewhere {score['error_interior']:.3f}")
    return {"method": "lagda map", "config": label, "error": score["error"], "cells": score["cells"],
            "coverage": score["coverage"], "coverage_all": score["coverage_all"], "error_all": score["error_all"],
            "seam_ratio": float("nan") if cropped else score["seam_ratio"],
            "notes": f"coverage u {score['coverage_u']:.3f}, v {score['coverage_v']:.3f}; on every cell with a value "
                     f"error {score['error_all']:.3f}, coverage {score['coverage_all']:.3f}; {seams}"
                     + (f"; {cropped}" if cropped else "")}


def run(bench: Benchmark, work: pathlib.Path, workers=(1, 2), map_args=(), assimilate_args=(), log=print) -> list:
    """Returns the CSV rows of `lagda map` with each number of workers (timed, scored), the one-box comparison on
    the first store, and the baselines scored beside the map."""
    archive, truth_path = make(bench, work, log)
    truth = xr.open_dataset(truth_path)
    rows, first = [], None
    for n in workers:
        store = work / f"map_w{n}.zarr"
        measured = run_map(bench, archive, store, n, map_args, log)
        row = score_store(bench, store, truth, f"{n} worker{'s' * (n > 1)}")
        row.update(workers=n, wall_s=measured["wall_s"], tiles=measured["tiles"],
                   tiles_per_s=measured["tiles_per_s"], peak_rss_gb=measured["peak_rss_gb"])
        row["notes"] += f"; tiles from {measured['tiles_from']}"
        log(f"lagda map, {n} workers: {measured['wall_s']:.0f} s, {measured['tiles']} tiles "
            f"({measured['tiles_from']}), peak {measured['peak_rss_gb']:.2f} GB; error {row['error']:.3f}, "
            f"coverage {row['coverage']:.3f}, seams {row['seam_ratio']:.3f}")
        rows.append(row)
        first = first or store
    if first is not None:
        box = box_comparison(bench, archive, open_map(first), truth, work, assimilate_args, log)
        rows[0]["box_ratio"] = box["ratio"]
        rows[0]["notes"] += (f"; one box {box['box']} days {box['start_day']:g}+30 ({box['fixes']} fixes): "
                             f"assimilate {box['box_error']:.3f}, map {box['map_error']:.3f}")
    return rows + baselines(bench, work, open_map(first) if first else None, log)


SPARSE = {"six-hourly": (6, "6-hourly fixes (those at 00, 06, 12, 18 UTC)", "the GDP's 6-hourly times"),
          "daily": (24, "daily fixes (those at 00 UTC)", "00 UTC")}  # step: (hours, row label, note)


def sparse_fixes(bench: Benchmark, work: pathlib.Path, step: str, workers: int = 2, map_args=(), log=print) -> dict:
    """Returns the CSV row of `lagda map` (timed, scored) on the archive's fixes every SPARSE[step] hours only,
    at whole multiples of them since 1970 (cached as archive_{hours}h.nc; the same drifters, noise and problems)."""
    hours, label, times = SPARSE[step]
    archive, truth_path = make(bench, work, log)
    sparse = work / f"archive_{hours}h.nc"
    if not sparse.exists():
        with xr.open_dataset(archive) as ds:
            seconds = (ds["time"].values - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "s")
            subset_archive(ds.load(), np.isclose(np.mod(seconds, 3600.0 * hours), 0.0)).to_netcdf(sparse)
    extra = " ".join(map_args)
    store = work / f"map_{hours}h_w{workers}{extra.replace(' ', '').replace('-', '_')}.zarr"
    measured = run_map(bench, sparse, store, workers, map_args, log)
    row = score_store(bench, store, xr.open_dataset(truth_path), f"{workers} workers, {label}"
                      f"{f', {extra}' if extra else ''}")
    with xr.open_dataset(sparse) as ds, xr.open_dataset(archive) as whole:
        row["notes"] += f"; the archive's fixes at {times} ({ds.sizes['obs']:,} of {whole.sizes['obs']:,})"
    row.update(workers=workers, wall_s=measured["wall_s"], tiles=measured["tiles"],
               tiles_per_s=measured["tiles_per_s"], peak_rss_gb=measured["peak_rss_gb"])
    log(f"lagda map on {label}: {measured['wall_s']:.0f} s; error {row['error']:.3f}, coverage "
        f"{row['coverage']:.3f}")
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["make", "baselines", "score", "run", *SPARSE, "page", "all"])
    parser.add_argument("--quick", action="store_true", help="the tiny configuration (quick())")
    parser.add_argument("--work", type=pathlib.Path, help="the cache folder (default runs/basin_year[_quick])")
    parser.add_argument("--csv", type=pathlib.Path, help="results/basin_year.csv (--quick: WORK/basin_year.csv)")
    parser.add_argument("--store", type=pathlib.Path, help="score: a lagda map store")
    parser.add_argument("--label", help="score: the row's configuration (default: the store's name)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--map-args", default="", help="extra arguments for lagda map, one string")
    parser.add_argument("--assimilate-args", default="", help="extra arguments for the one-box lagda assimilate")
    parser.add_argument("--also", nargs=2, action="append", default=[], metavar=("STORE", "LABEL"),
                        help="run: score another lagda map store of the archive too (a row labelled LABEL, untimed)")
    args = parser.parse_args(argv)
    bench = quick() if args.quick else full()
    work = args.work or ROOT / "runs" / ("basin_year_quick" if args.quick else "basin_year")
    table = args.csv or (work / "basin_year.csv" if args.quick else CSV)
    rows = []
    try:
        if args.step in ("make", "all"):
            make(bench, work)
        if args.step == "baselines":
            rows = baselines(bench, work, open_map(args.store) if args.store else None)
        if args.step == "score":
            if args.store is None:
                parser.error("score needs --store")
            rows = [score_store(bench, args.store, xr.open_dataset(make(bench, work)[1]),
                                 args.label or args.store.name)]
        if args.step in SPARSE:
            rows = [sparse_fixes(bench, work, args.step, args.workers[-1], args.map_args.split())]
        if args.step in ("run", "all"):
            rows = run(bench, work, args.workers, args.map_args.split(), args.assimilate_args.split())
            truth = xr.open_dataset(make(bench, work)[1])
            rows[len(args.workers):len(args.workers)] = [score_store(bench, store, truth, label)
                                                         for store, label in args.also]
    except (ValueError, RuntimeError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if rows:
        print(f"wrote {write_csv(rows, table)}")
    if table != CSV:
        print(f"{PAGE.name} shows {CSV.name} only: this run's table is {table}")
    elif args.step in ("page", "all") or rows:
        print(f"wrote {write_page(table, PAGE, page_table, 'basin-year table')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
