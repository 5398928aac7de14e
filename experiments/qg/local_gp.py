"""The one-box local GP on tracks in projected metres: default `lagda assimilate` on a QG truth file with and
without it (`--no-local-gp`), the result file's u, v against the file's gridded truth.

The first N drifters of flow 0 of a QG truth file (`lagda simulate --flow qg`), with 10 m of position noise, are
assimilated with every default (linear in the circular basis, the box and prior from the tracks) on a 32^2 grid;
the result's u, v (m/s) are compared with the truth interpolated (linearly, periodically) to the result's cells
and days: the relative L2 error on the cells that hold a fix that day and on every cell, and the 95% coverage of
the total std. Rows: results/qg_local_gp.csv.

    lagda simulate --flow qg --n-samples 1 --n-drifters 64 --seed 5 --out runs/qg_local_gp/qg.nc
    python -m experiments.qg.local_gp --tracks runs/qg_local_gp/qg.nc --drifters 16 64
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import tempfile

import numpy as np
import xarray as xr

from experiments.common.paths import ROOT

CSV = ROOT / "results" / "qg_local_gp.csv"
GPS_M, N_GRID = 10.0, 32


def truth_on(sub: xr.Dataset, res) -> dict:
    """Returns the truth's u, v `(time, y, x)` m/s at the result's cells and times (linear, periodic)."""
    from scipy.interpolate import RegularGridInterpolator

    stamps = np.asarray(sub["truth_time"].values)
    seconds = (stamps - stamps[0]) / np.timedelta64(1, "s")
    at = res.mapping.time_from_model(np.asarray(res.time)) - res.mapping.time_from_model(0.0)
    xx, yy = np.meshgrid(np.asarray(res.x) % 1.0, np.asarray(res.y) % 1.0)
    out = {}
    for c in ("u", "v"):
        values = np.asarray(sub[c].values[0], np.float64)  # (time, ny, nx) on cell centres
        n = values.shape[-1]
        axis = (np.arange(-1, n + 1) + 0.5) / n
        padded = np.pad(values, ((0, 0), (1, 1), (1, 1)), mode="wrap")
        f = RegularGridInterpolator((seconds, axis, axis), padded)
        out[c] = np.stack([f(np.stack([np.full(xx.shape, t), yy, xx], axis=-1)) for t in at])
    return out


def fix_cells(tracks, res) -> np.ndarray:
    """Returns bool `(time, y, x)`: the result's cells nearest a fix on the result day nearest its time."""
    n, times = len(res.x), np.asarray(res.time)
    x, y, t = (np.asarray(a, np.float64).ravel() for a in (tracks.positions[..., 0], tracks.positions[..., 1],
                                                           tracks.times))
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(t)
    day = np.argmin(np.abs(t[ok][:, None] - times[None]), axis=1)
    cells = np.zeros((len(times), n, n), bool)
    cells[day, np.round(y[ok] % 1.0 * n).astype(int) % n, np.round(x[ok] % 1.0 * n).astype(int) % n] = True
    return cells


def run(path: pathlib.Path, n_drifter: int, work: pathlib.Path) -> list[dict]:
    """Returns a row with and one without the local GP for the first `n_drifter` drifters of flow 0."""
    from lagda.assimilation import AssimilateSettings, assimilate_file
    from lagda.io.formats import read_tracks
    from lagda.io.results import read_result

    with xr.open_dataset(path) as ds:
        keep = np.flatnonzero(ds["field"].values == 0)[:n_drifter]
        sub = ds.isel(trajectory=keep, flow=[0]).drop_vars(["x0", "y0"]).load()
    rng = np.random.default_rng(n_drifter)
    for name in ("x", "y"):
        sub[name].values[...] += rng.normal(size=sub[name].shape) * GPS_M
    sub.attrs["qg_n_drifters"], sub.attrs["qg_n_flows"] = n_drifter, 1
    tracks_path = work / f"tracks_{n_drifter}.nc"
    sub.to_netcdf(tracks_path)
    rows = []
    for local_gp in (False, True):
        out = work / f"result_{n_drifter}_{local_gp}.nc"
        summary = assimilate_file(tracks_path, out, AssimilateSettings(basis="circular", n_grid=N_GRID,
                                                                       local_gp=local_gp), overwrite=True)
        res = read_result(out)
        truth, near = truth_on(sub, res), fix_cells(read_tracks(tracks_path), res)
        err = {c: res.fields[f"{c}_mean"][0] - truth[c] for c in ("u", "v")}
        std = {c: res.fields.get(f"{c}_total_std", res.fields[f"{c}_std"])[0] for c in ("u", "v")}
        rel = lambda where: float(np.sqrt(sum(np.sum(err[c][where] ** 2) for c in err)
                                          / sum(np.sum(truth[c][where] ** 2) for c in truth)))
        every = np.ones_like(near)
        rows.append({"drifters": n_drifter, "local_gp": local_gp, "fix_cell_days": int(near.sum()),
                     "error_at_fix_cells": round(rel(near), 4), "error_every_cell": round(rel(every), 4),
                     "coverage_95": round(float(np.mean(np.concatenate(
                         [(np.abs(err[c]) <= 1.96 * std[c]).ravel() for c in err]))), 4),
                     "note": next((n for n in summary.notes if n.startswith("near the drifters: what")), "")})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracks", type=pathlib.Path, required=True, help="a QG truth file (lagda simulate --flow qg)")
    parser.add_argument("--drifters", type=int, nargs="+", default=[16, 64])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        rows = [row for n in args.drifters for row in run(args.tracks, n, pathlib.Path(work))]
    CSV.parent.mkdir(exist_ok=True)
    with open(CSV, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {CSV}")


if __name__ == "__main__":
    main()
