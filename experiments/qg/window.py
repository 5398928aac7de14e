"""The window case: drifters seen only inside a 1000 km window of a larger QG ocean, assimilated as a user would.

The flow: `lagda simulate --flow qg --qg-preset window` (pyqg-jax's two-layer turbulence on a 2000 km, 128^2
domain, the background current included), 1024 drifters released over the whole domain. The user's file: the
first `--drifters` drifters' fixes inside the central 1000 km window, hourly, 10 m GPS-like noise, written as a
plain CF trajectory file in metres with no lagda mapping (drifters enter and leave; no box, no time scale).
`lagda assimilate --basis circular --method linear` with the defaults (the box inferred from the tracks, no
climatology, no noise level), then the relative L2 error of the mean velocity against the full truth on the
window's truth cells at the daily truth times (the result's grid interpolated bilinearly onto them).

    python -m experiments.qg.window --flow runs/qg_window/window.nc        # generated there if missing (~8 min)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np
import xarray as xr
from scipy.interpolate import RegularGridInterpolator

from experiments.common.paths import ROOT

GPS_M = 10.0


def flow_file(path: pathlib.Path) -> pathlib.Path:
    """Returns the window flow's path, generating it (seed 300, 1024 drifters over the whole domain) if missing."""
    if not path.exists():
        from simulate.qg import PRESETS, write_qg_dataset

        path.parent.mkdir(parents=True, exist_ok=True)
        # released over the whole domain (the preset releases in the central quarter): drifters enter and leave
        write_qg_dataset(PRESETS["window"]["turbulence"](n_flows=1, n_drifters=1024, seed=300, k_max=24,
                                                         release_box=(0.0, 1.0, 0.0, 1.0)), path)
    return path


def user_file(flow: xr.Dataset, n_drifters: int, path: pathlib.Path) -> tuple[float, float]:
    """Writes the user's tracks (fixes inside the central window, noisy); returns the window (lo, hi) in metres."""
    side = float(flow.attrs["qg_L"])
    lo, hi = side / 4, 3 * side / 4
    x, y = flow["x"].values[:n_drifters], flow["y"].values[:n_drifters]  # (drifter, obs) metres, unwrapped
    rng = np.random.default_rng(7)
    x, y = np.mod(x + rng.normal(0, GPS_M, x.shape), side), np.mod(y + rng.normal(0, GPS_M, y.shape), side)
    inside = (x > lo) & (x < hi) & (y > lo) & (y < hi)
    keep = inside.any(axis=1)
    time_ = flow["time"].values
    time_ = np.broadcast_to(time_, x.shape) if time_.ndim == 1 else time_[:n_drifters]
    mask = inside[keep]
    ds = xr.Dataset({"x": (("trajectory", "obs"), np.where(mask, x[keep], np.nan), {"units": "m", "axis": "X"}),
                     "y": (("trajectory", "obs"), np.where(mask, y[keep], np.nan), {"units": "m", "axis": "Y"}),
                     "time": (("trajectory", "obs"), np.where(mask, time_[keep], np.datetime64("NaT")))},
                    attrs={"featureType": "trajectory", "Conventions": "CF-1.11"})
    ds.to_netcdf(path)
    print(f"{n_drifters} drifters: {int(keep.sum())} ever inside the window, {inside.sum(0).mean():.1f} inside at a "
          f"time; {int(inside.sum())} fixes", flush=True)
    return lo, hi


def window_error(result: xr.Dataset, flow: xr.Dataset, lo: float, hi: float, n_eval: int = 256) -> float:
    """Relative L2 error of the result's mean velocity on the window's truth cells at the daily truth times.

    The mean velocity is evaluated from the result's coefficients (simulate.qg.projection.basis_fields) on an
    n_eval^2 grid of the result's box and interpolated bilinearly onto the truth cells; truth times outside the
    result's window (the tracks' first to last fix) are left out.
    """
    from simulate.qg.projection import basis_fields

    n, side = int(flow.attrs["qg_nx"]), float(flow.attrs["qg_L"])
    cells = (np.arange(n) + 0.5) * side / n
    inside = np.flatnonzero((cells > lo) & (cells < hi))
    west, east, south, north = (float(b) for b in result.attrs["lagda_mapping_box"])
    scale = float(result.attrs["lagda_mapping_time_scale_s"])
    origin = np.datetime64(result.attrs["lagda_mapping_time_origin"].rstrip("Z"))
    degree = int(result["degree"].max())
    k1, k2 = result["k1"].values[:: degree + 1][1:], result["k2"].values[:: degree + 1][1:]  # the current first
    coef = result["coef_mean_re"].values[0] + 1j * result["coef_mean_im"].values[0]
    t_end = float(np.nanmax(result["track_time"].values))
    times = (flow["truth_time"].values - origin) / np.timedelta64(1, "s") / scale
    use = np.flatnonzero((times >= 0) & (times <= t_end))
    _, u, v = basis_fields(coef[None], k1, k2, degree, 0.0, t_end, times[use], n_eval, True)
    grid_x = west + (np.arange(n_eval) + 0.5) / n_eval * (east - west)
    grid_y = south + (np.arange(n_eval) + 0.5) / n_eval * (north - south)
    yy, xx = np.meshgrid(cells[inside], cells[inside], indexing="ij")
    err = ref = 0.0
    for name, field, factor in (("u", u[0], (east - west) / scale), ("v", v[0], (north - south) / scale)):
        for i, ti in enumerate(use):
            interp = RegularGridInterpolator((grid_y, grid_x), field[i] * factor, bounds_error=False, fill_value=None)
            est = interp(np.stack([yy.ravel(), xx.ravel()], axis=-1)).reshape(yy.shape)
            true = flow[name].values[0, ti][np.ix_(inside, inside)].astype(np.float64)
            err, ref = err + float(np.sum((est - true) ** 2)), ref + float(np.sum(true**2))
    print(f"scored on {len(inside)}^2 truth cells at {len(use)} of {len(times)} daily truth times", flush=True)
    return float(np.sqrt(err / ref))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flow", type=pathlib.Path, default=ROOT / "runs" / "qg_window" / "window.nc")
    parser.add_argument("--drifters", type=int, default=256, help="the first N drifters of the flow file")
    parser.add_argument("--n-grid", type=int, default=32, help="the result file's grid")
    parser.add_argument("--score-only", action="store_true", help="score the existing result")
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "qg_window")
    parser.add_argument("--out", type=pathlib.Path, help="append the row to this CSV in experiments.qg.benchmark's "
                        "defaults layout (method window:noclim, drifters: the density per 1000 km box, N / 4), "
                        "for --merge")
    args = parser.parse_args(argv)
    from lagda.assimilation import AssimilateSettings, assimilate_file

    args.work.mkdir(parents=True, exist_ok=True)
    with xr.open_dataset(flow_file(args.flow)) as flow:
        tracks = args.work / f"user_{args.drifters}.nc"
        lo, hi = user_file(flow, args.drifters, tracks)
        start = time.perf_counter()
        summary = None if args.score_only else assimilate_file(
            tracks, args.work / f"result_{args.drifters}.nc",
            AssimilateSettings("linear", basis="circular", n_grid=args.n_grid), overwrite=True)
        wall = time.perf_counter() - start
        seconds, notes = (float("nan"), ()) if summary is None else (summary.seconds, summary.notes)
        with xr.open_dataset(args.work / f"result_{args.drifters}.nc") as result:
            error = window_error(result, flow, lo, hi)
    for note in notes:
        print("note:", note)
    row = {"drifters": args.drifters, "error_in_window": round(error, 4),
           "method_seconds": round(seconds, 1), "wall_seconds": round(wall, 1)}
    print(json.dumps(row))
    if args.out:
        write_row(args.out, args.drifters, error, seconds)
    return 0


def write_row(path: pathlib.Path, n_drifters: int, error: float, seconds: float) -> None:
    """Appends the window case to `path` as a row of experiments.qg.benchmark's defaults section: drifters is the
    density it matches there (the 2000 km flow holds four 1000 km boxes: N / 4 per box); no projection limit in the
    window."""
    import csv

    fields = ["regime", "basis", "flow", "method", "drifters", "interval_h", "noise_m", "error", "error_vs_projection",
              "limit", "seconds", "ratio"]
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerow({"regime": "turbulence", "basis": "defaults k12P3", "flow": 0, "method": "window:noclim",
                         "drifters": n_drifters // 4, "interval_h": 1, "noise_m": GPS_M, "error": round(error, 5),
                         "error_vs_projection": "nan", "limit": "nan", "seconds": round(seconds, 3), "ratio": "nan"})


if __name__ == "__main__":
    raise SystemExit(main())
