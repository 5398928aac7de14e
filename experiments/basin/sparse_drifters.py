"""The basin-year benchmark at the GDP's density: `lagda map` with every default on N of the archive's drifters,
scored against the truth by distance to the day's nearest fix the map used, beside a map of zero and binned means.

The archive and truth are the basin-year benchmark's (experiments.basin.year make: 400 GDP-like drifters over a
QG year, 40 x 40 degrees; 583 trajectory ids). Its trajectories are drawn (a fixed seed, by id) down to
`--drifters` ids (the GDP keeps about one drifter per 5 x 5 degrees: about 60 over this region; 583 or more: the
whole archive), written as a ragged file, mapped, and every daily cell
is scored in the bands of its `distance_to_fix` (within 30 km, 30-100 km, 100-300 km, beyond 300 km; no fix that
day counts as beyond 300 km): relative error against the truth (0 perfect, 1 a map of zero) and the coverage of
its 95% bands; beside it, on the same cells, the daily binned mean at the map's resolution on the cells that hold
a fix, and the 1-degree binned mean over +-5 days (zero where a bin is empty).

    python -m experiments.basin.year make            # once (about 3 min)
    python -m experiments.basin.sparse_drifters --drifters 40 60 583 --background
    # (583: every trajectory, the dense case)
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys

import numpy as np
import xarray as xr

from experiments.basin.benchmark import full
from experiments.basin.methods import binned_means, crop_to_truth, fd_velocities
from experiments.basin.run import run_map, subset_archive
from experiments.basin.year import make
from experiments.common.paths import ROOT

CSV = ROOT / "results" / "sparse_basin.csv"
BANDS_KM = (30.0, 100.0, 300.0)
BAND_NAMES = ("within 30 km", "30-100 km", "100-300 km", "beyond 300 km")
BACKGROUND_SMOOTH_DEG, BACKGROUND_SMOOTH_DAYS = 1.0, 5.0  # the synthetic background: the truth smoothed so, ...
BACKGROUND_NOISE = 0.3  # ... with noise of this fraction of its RMS speed


def sparse_archive(archive: pathlib.Path, n: int, work: pathlib.Path) -> pathlib.Path:
    """Returns a ragged file of `n` of the archive's trajectory ids (drawn with seed 0; all of them when `n` is at
    least their number), made once."""
    out = work / f"archive_{n}.nc"
    if out.exists():
        return out
    with xr.open_dataset(archive) as ds:
        ds = ds.load()
        ids = np.unique(ds["id"].values)
        chosen = ids if n >= len(ids) else np.random.default_rng(0).choice(ids, size=n, replace=False)
        per_obs = np.repeat(ds["id"].values, ds["rowsize"].values)
        part = out.with_suffix(".nc.part")
        subset_archive(ds, np.isin(per_obs, chosen)).to_netcdf(part)
    part.rename(out)
    return out


def smoothed_background(truth_path: pathlib.Path, work: pathlib.Path) -> pathlib.Path:
    """Returns a background product made from the truth as a model or altimetry would give it: the daily truth
    smoothed over BACKGROUND_SMOOTH_DEG and BACKGROUND_SMOOTH_DAYS, plus noise correlated over 1 degree and
    BACKGROUND_SMOOTH_DAYS (a product's errors last for days, as an altimetry map's do) of BACKGROUND_NOISE x the
    truth's RMS speed per component, written as CF ugos/vgos (made once)."""
    from scipy.ndimage import gaussian_filter

    out = work / "background_smoothed_noisy.nc"
    if out.exists():
        return out
    with xr.open_dataset(truth_path) as truth:
        res = float(truth.lon[1] - truth.lon[0])
        sigma = (BACKGROUND_SMOOTH_DAYS, BACKGROUND_SMOOTH_DEG / res, BACKGROUND_SMOOTH_DEG / res)
        rng = np.random.default_rng(1)
        rms = float(np.sqrt(np.mean(truth.u.values**2 + truth.v.values**2) / 2))
        fields = {}
        for name, standard in (("ugos", "surface_geostrophic_eastward_sea_water_velocity"),
                               ("vgos", "surface_geostrophic_northward_sea_water_velocity")):
            smooth = gaussian_filter(truth[name[0]].values.astype(np.float64), sigma, mode="nearest")
            noise = gaussian_filter(rng.normal(size=smooth.shape), (BACKGROUND_SMOOTH_DAYS, 1.0 / res, 1.0 / res),
                                    mode="wrap")
            noise *= BACKGROUND_NOISE * rms / noise.std()
            fields[name] = (("time", "lat", "lon"), (smooth + noise).astype(np.float32),
                            {"standard_name": standard, "units": "m s-1"})
        ds = xr.Dataset(fields, coords={"time": truth.time, "lat": truth.lat, "lon": truth.lon})
        part = out.with_suffix(".nc.part")
        ds.to_netcdf(part)
    part.rename(out)
    return out


def relative(est_u, est_v, tu, tv) -> float:
    """Returns sqrt(sum |est - truth|^2 / sum |truth|^2) over the given values `(n,)` each."""
    return float(np.sqrt(np.sum((est_u - tu) ** 2 + (est_v - tv) ** 2) / np.sum(tu**2 + tv**2)))


def score(store: pathlib.Path, truth_path: pathlib.Path, sparse: pathlib.Path, bench, background=None) -> list[dict]:
    """Returns one row per distance band: the map's error and coverage, and the baselines' errors on its cells
    (and the `background` product's alone, when there is one)."""
    with xr.open_zarr(store) as maps, xr.open_dataset(truth_path) as truth, xr.open_dataset(sparse) as arch:
        maps, _ = crop_to_truth(maps.load(), truth)
        tr = truth.sel(time=maps.time, lat=maps.lat, lon=maps.lon, method="nearest")
        fixes, _ = fd_velocities(arch)
        times = maps.time.values
        daily = binned_means(fixes, maps.lon.values, maps.lat.values, times, bench.resolution, 1.0)
        coarse = binned_means(fixes, maps.lon.values, maps.lat.values, times, 1.0, 11.0)
        u, v = maps.u.values, maps.v.values
        su, sv = maps.u_std.values, maps.v_std.values
        tu, tv = tr.u.values, tr.v.values
        distance = np.nan_to_num(maps.distance_to_fix.values, nan=np.inf)
        valid = np.isfinite(u) & np.isfinite(tu)
        band = np.searchsorted(BANDS_KM, distance)
        rows = []
        for b, name in enumerate(BAND_NAMES):
            m = valid & (band == b)
            if not m.any():
                continue
            cover = np.r_[np.abs(u - tu)[m] <= 1.96 * su[m], np.abs(v - tv)[m] <= 1.96 * sv[m]]
            cu, cv = np.nan_to_num(coarse.u.values[m]), np.nan_to_num(coarse.v.values[m])
            du, dv = daily.u.values[m], daily.v.values[m]
            has = np.isfinite(du)
            rows.append({"band": name, "cells": int(m.sum()), "share": float(m.mean() / valid.mean()),
                         "map": relative(u[m], v[m], tu[m], tv[m]), "coverage_95": float(cover.mean()),
                         "binned_1deg_11d": relative(cu, cv, tu[m], tv[m]),
                         "daily_binned_own_cells": relative(du[has], dv[has], tu[m][has], tv[m][has])
                         if has.any() else float("nan"),
                         "map_on_those_cells": relative(u[m][has], v[m][has], tu[m][has], tv[m][has])
                         if has.any() else float("nan"), "zero": 1.0})
            if background is not None:
                with xr.open_dataset(background) as bg:
                    bg = bg.sel(time=maps.time, lat=maps.lat, lon=maps.lon, method="nearest")
                    rows[-1]["background_alone"] = relative(bg.ugos.values[m], bg.vgos.values[m], tu[m], tv[m])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drifters", type=int, nargs="+", default=[40, 60])
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "basin_year")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--background", action="store_true", help="also map with a smoothed, noisy truth as "
                        "--background (smoothed_background), scored alone beside the map")
    args = parser.parse_args(argv)
    bench = full()
    archive, truth = make(bench, args.work)
    rows = []
    background = smoothed_background(truth, args.work) if args.background else None
    for n in args.drifters:
        sparse = sparse_archive(archive, n, args.work)
        for prior in (None, background) if background is not None else (None,):
            store = args.work / f"map_sparse_{n}{'_background' if prior else ''}.zarr"
            measured = {"wall_s": float("nan"), "peak_rss_gb": float("nan")}
            if not store.exists():
                extra = ("--no-progress", *(("--background", str(prior)) if prior else ()))
                measured = run_map(bench, sparse, store, args.workers, extra)
                print(f"{n} drifters: lagda map {measured['wall_s']:.0f} s, {measured['peak_rss_gb']:.2f} GB",
                      flush=True)
            for row in score(store, truth, sparse, bench, prior):
                rows.append({"drifters": n, "background": "smoothed, noisy truth" if prior else "none", **row,
                             "wall_s": measured["wall_s"], "peak_rss_gb": measured["peak_rss_gb"]})
                print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()),
                      flush=True)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
