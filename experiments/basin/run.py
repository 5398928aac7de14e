"""Running and measuring `lagda map` and `lagda assimilate` for the basin-year benchmark (experiments.basin.year).

`run_map` runs one fresh `lagda map` as a child process and samples the resident memory of its whole process tree
(Dask's worker processes included) every 0.5 s; `count_tiles` finds how many tiles it mapped; `box_comparison` runs
`lagda assimilate` on the archive's fixes in one tile-size box over one 30-day window and scores both answers there.
"""

from __future__ import annotations

import math
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import xarray as xr

from experiments.basin.archive import START
from experiments.basin.benchmark import Benchmark
from experiments.basin.methods import Tiling, relative_l2
from lagda.mapping.store import open_map


def peak_tree_rss(process, interval: float = 0.5) -> tuple[float, float]:
    """Returns (wall seconds, peak resident bytes of the process and all its descendants), sampling every
    `interval` seconds until `process` (a subprocess.Popen) ends."""
    import psutil

    began, peak = time.perf_counter(), 0
    root = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        rss = 0
        for p in tree:
            try:
                rss += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        peak = max(peak, rss)
        time.sleep(interval)
    process.wait()
    return time.perf_counter() - began, float(peak)


def count_tiles(store: xr.Dataset, bench: Benchmark, last_line: str) -> tuple[int, str]:
    """Returns (tiles, how it was found): the store's `n_tiles` attribute, else "N tiles" in the command's last line,
    else space tiles x time windows from the store's tiling attributes."""
    if "n_tiles" in store.attrs:
        return int(store.attrs["n_tiles"]), "store attribute n_tiles"
    found = re.search(r"(\d+)\s+tiles", last_line)
    if found:
        return int(found.group(1)), "the command's last line"
    tiling = Tiling.from_attrs(store.attrs)
    lon0, lon1, lat0, lat1 = bench.region
    space = math.ceil((lon1 - lon0) / tiling.tile_size_deg - 1e-9) * math.ceil((lat1 - lat0) / tiling.tile_size_deg
                                                                               - 1e-9)
    windows = tiling.windows(float(bench.ocean.days)).size
    return space * windows, f"computed: {space} space tiles x {windows} time windows"


def run_map(bench: Benchmark, archive, store: pathlib.Path, workers: int, extra=(), log=print) -> dict:
    """Returns {wall_s, peak_rss_gb, tiles, tiles_per_s, tiles_from, last_line} of one fresh `lagda map` run.

    Raises
    ------
    RuntimeError
        if the command exits non-zero (its last output lines in the message).
    """
    import shutil

    if store.exists():
        shutil.rmtree(store) if store.is_dir() else store.unlink()
    cmd = [sys.executable, "-m", "lagda", "map", "--tracks", str(archive), "--region", *map(str, bench.region),
           "--period", *bench.period, "--resolution", str(bench.resolution), "--out", str(store),
           "--workers", str(workers), "--no-land-mask", *extra]  # the QG ocean has no land (basin_year)
    log("run: " + " ".join(cmd[1:]))
    out_path = store.with_suffix(".log")
    with open(out_path, "w") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        wall, peak = peak_tree_rss(process)
    lines = [line for line in out_path.read_text().splitlines() if line.strip()]
    if process.returncode != 0:
        raise RuntimeError(f"lagda map exited {process.returncode}: " + " | ".join(lines[-3:]))
    last = lines[-1] if lines else ""
    tiles, source = count_tiles(open_map(store), bench, last)
    return {"wall_s": wall, "peak_rss_gb": peak / 2**30, "tiles": tiles, "tiles_per_s": tiles / wall,
            "tiles_from": source, "last_line": last}


def busiest_box(bench: Benchmark, archive: xr.Dataset, tiling: Tiling) -> tuple[tuple, float]:
    """Returns ((west, east, south, north), start day) of the tile (an interior one when the region has any) and
    30-day window (starting on a window_step_days multiple) holding the most drogued fixes."""
    lon0, lon1, lat0, lat1 = bench.region
    size = tiling.tile_size_deg
    wests, souths = np.arange(lon0, lon1 - 1e-9, size), np.arange(lat0, lat1 - 1e-9, size)
    if wests.size > 2 and souths.size > 2:
        wests, souths = wests[1:-1], souths[1:-1]
    t = (archive["time"].values - START.astype("datetime64[ns]")) / np.timedelta64(1, "D")
    ok = archive["drogue_status"].values == 1 if "drogue_status" in archive else np.ones(t.size, bool)
    lon, lat = archive["lon"].values, archive["lat"].values
    best, pick = -1, None
    for west in wests:
        for south in souths:
            inside = ok & (lon >= west) & (lon < west + size) & (lat >= south) & (lat < south + size)
            for start in np.arange(0, max(bench.ocean.days - 30, 0) + 1e-9, tiling.window_step_days):
                n = int((inside & (t >= start) & (t < start + 30)).sum())
                if n > best:
                    best, pick = n, ((float(west), float(west + size), float(south), float(south + size)), start)
    return pick


def subset_archive(archive: xr.Dataset, keep: np.ndarray) -> xr.Dataset:
    """Returns the ragged archive's fixes where `keep` `(obs,)`, trajectories without any left out."""
    traj = np.repeat(np.arange(archive.sizes["traj"]), archive["rowsize"].values)
    rowsize = np.bincount(traj[keep], minlength=archive.sizes["traj"])
    sub = archive.isel(obs=np.flatnonzero(keep)).isel(traj=np.flatnonzero(rowsize > 0))
    sub["rowsize"] = ("traj", rowsize[rowsize > 0], archive["rowsize"].attrs)
    return sub


def result_velocity(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """Returns u, v `(time, lat, lon)` of a `lagda assimilate` result in either layout (lagda.io.results.mean_velocity),
    with the grid's time, lat and lon as coordinates (an older result's lon(x) wrapped to [-180, 180))."""
    from lagda.io.results import mean_velocity

    lon = ds["lon"].values
    if "u_mean" in ds:
        lon = (lon + 180) % 360 - 180
    coords = {"time": ds["time"].values, "lat": ds["lat"].values, "lon": lon}
    u, v = (xr.DataArray(mean_velocity(ds, c), dims=("time", "lat", "lon"), coords=coords) for c in ("u", "v"))
    return u, v


def box_comparison(bench: Benchmark, archive_path, store: xr.Dataset, truth: xr.Dataset, work: pathlib.Path,
                   extra=(), log=print) -> dict:
    """Returns the one-box comparison: `lagda assimilate` on the archive's fixes in the busiest interior tile and
    30-day window, its error and the map's on the same cells (the map's n_fixes > 0) and days, and their ratio.

    Raises
    ------
    RuntimeError
        if `lagda assimilate` exits non-zero.
    """
    tiling = Tiling.from_attrs(store.attrs)
    with xr.open_dataset(archive_path) as archive:
        archive = archive.load()
    (west, east, south, north), start = busiest_box(bench, archive, tiling)
    t = (archive["time"].values - START.astype("datetime64[ns]")) / np.timedelta64(1, "D")
    keep = (archive["lon"].values >= west) & (archive["lon"].values < east) & (archive["lat"].values >= south)
    keep &= (archive["lat"].values < north) & (t >= start) & (t < start + 30)
    sub_path, result_path = work / "box_tracks.nc", work / "box_result.nc"
    subset_archive(archive, keep).to_netcdf(sub_path)
    cmd = [sys.executable, "-m", "lagda", "assimilate", "--tracks", str(sub_path), "--out", str(result_path),
           "--overwrite", *extra]
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"lagda assimilate exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    seconds = time.perf_counter() - began
    days = START.astype("datetime64[ns]") + (np.arange(int(start), int(start) + 30)) * np.timedelta64(1, "D")
    cut = store.sel(lon=slice(west, east), lat=slice(south, north)).sel(time=days).load()
    tr = truth.sel(lon=cut["lon"], lat=cut["lat"], time=days)
    with xr.open_dataset(result_path) as res:
        u, v = (da.interp(time=days, lat=cut["lat"], lon=cut["lon"]).values for da in result_velocity(res.load()))
    mask = (cut["n_fixes"].values > 0) & np.isfinite(u) & np.isfinite(v) & np.isfinite(cut["u"].values)
    box_err = relative_l2(u, v, tr["u"].values, tr["v"].values, mask)
    map_err = relative_l2(cut["u"].values, cut["v"].values, tr["u"].values, tr["v"].values, mask)
    log(f"one box {west:g}..{east:g} E, {south:g}..{north:g} N, days {start:g}..{start + 30:g} "
        f"({int(keep.sum())} fixes): assimilate {box_err:.3f}, map {map_err:.3f} on {int(mask.sum())} cell-days")
    return {"box": [west, east, south, north], "start_day": float(start), "fixes": int(keep.sum()),
            "cells": int(mask.sum()), "box_error": box_err, "map_error": map_err, "ratio": map_err / box_err,
            "assimilate_s": seconds}
