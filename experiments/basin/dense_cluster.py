"""A dense deployment: `lagda map` with every default on a GLAD-like release, against its truth and binned means.

Three hundred drifters are released in a 20 km cluster (Gaussian, 7 km std) at 88 W, 28 N and followed for 60 days
with a fix every 15 minutes and 10 m position noise, as the Gulf of Mexico's GLAD experiment (2012) gave, in an
analytic divergence-free flow: a uniform current of (0.05, 0.02) m/s and 12 Gaussian eddies (radius 30-60 km, peak
speed 0.06-0.18 m/s) drifting at about 0.02 m/s, on the plane x = R cos(28 N) dlon, y = R dlat (RK4 steps of 15
minutes). The file is an `id,time,lon,lat` CSV of 1,728,300 rows, no lagda attributes.

`lagda map --tracks dense.csv --out map.nc` (every default), and again at `--resolution 0.05`, is scored at the
cells with a fix each day (`n_fixes` > 0) against the truth at the cell centres and map times: the relative L2
error, the 95% band's coverage of u and v, the median `u_std` and the RMS error per component in m/s. Beside it,
daily binned means of the centred finite-difference velocities (over 30 minutes) on the same cells, as a user
would grid them by hand.

    python -m experiments.basin.dense_cluster             # the file (cached in runs/dense_cluster/), both maps, the CSV
    python -m experiments.basin.dense_cluster --tile-method basis  # the same with the tile basis (its rows merged in)
    python -m experiments.basin.dense_cluster --work DIR --csv OUT.csv
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

from experiments.basin.methods import binned_means, fd_velocities, relative_l2
from experiments.common.csv_rows import merge_rows
from experiments.common.paths import ROOT
from lagda.io.physical import EARTH_RADIUS_M

CSV = ROOT / "results" / "dense_cluster.csv"
CENTRE = (-88.0, 28.0)  # lon, lat of the release and of the flow's plane
START = np.datetime64("2012-07-20T00:00")
STEP_S, DAYS, DRIFTERS = 900.0, 60, 300
COLUMNS = ("tile_method", "resolution_deg", "cell_days", "error", "binned_error", "coverage", "median_u_std_m_s",
           "rms_error_m_s", "binned_rms_error_m_s", "wall_s", "local_gp", "coverage_under_10_fixes",
           "coverage_10_to_50_fixes", "coverage_over_50_fixes", "coverage_days_30_45")


class Flow:
    """The analytic flow: a uniform current and 12 drifting Gaussian eddies (seed 0); velocities in m/s on the
    plane x = R cos(lat0) dlon, y = R dlat (metres)."""

    def __init__(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        n = 12
        self.x0, self.y0 = rng.uniform(-300e3, 300e3, n), rng.uniform(-300e3, 300e3, n)
        self.amplitude = rng.choice([-1, 1], n) * rng.uniform(0.1, 0.3, n)
        self.radius = rng.uniform(30e3, 60e3, n)
        self.drift = rng.normal(size=(n, 2)) * 0.02
        self.current = (0.05, 0.02)
        self.rng = rng  # the release and the noise continue the same stream

    def velocity(self, x, y, t):
        """Returns (u, v) m/s at plane points x, y (m, any shape) at t seconds after START."""
        u, v = np.full_like(x, self.current[0]), np.full_like(x, self.current[1])
        for i in range(len(self.radius)):
            dx = x - (self.x0[i] + self.drift[i, 0] * t)
            dy = y - (self.y0[i] + self.drift[i, 1] * t)
            g = np.exp(-(dx**2 + dy**2) / (2 * self.radius[i] ** 2)) * self.amplitude[i] / self.radius[i]
            u, v = u + g * dy, v - g * dx  # psi = a r exp(-r^2 / 2 r0^2): divergence-free
        return u, v

    def on_cells(self, lon, lat, t):
        """Returns the true eastward and northward velocity (m/s) at lon, lat degrees (any shape) at t seconds."""
        x = np.deg2rad(lon - CENTRE[0]) * EARTH_RADIUS_M * np.cos(np.deg2rad(CENTRE[1]))
        y = np.deg2rad(lat - CENTRE[1]) * EARTH_RADIUS_M
        u, v = self.velocity(x, y, t)
        return u * np.cos(np.deg2rad(lat)) / np.cos(np.deg2rad(CENTRE[1])), v


def make(path: pathlib.Path, drifters: int = DRIFTERS, days: float = DAYS) -> pathlib.Path:
    """Writes the deployment's CSV at `path` (unless it exists; `drifters` followed for `days`) and returns it."""
    import pandas as pd

    if path.exists():
        return path
    flow = Flow()
    rng = flow.rng
    x, y = rng.normal(0, 7e3, drifters), rng.normal(0, 7e3, drifters)
    steps = int(days * 86400 / STEP_S)
    xs, ys = np.empty((steps + 1, drifters)), np.empty((steps + 1, drifters))
    xs[0], ys[0] = x, y
    h = STEP_S
    for k in range(steps):
        t = k * h
        k1 = flow.velocity(x, y, t)
        k2 = flow.velocity(x + h / 2 * k1[0], y + h / 2 * k1[1], t + h / 2)
        k3 = flow.velocity(x + h / 2 * k2[0], y + h / 2 * k2[1], t + h / 2)
        k4 = flow.velocity(x + h * k3[0], y + h * k3[1], t + h)
        x = x + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y = y + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        xs[k + 1], ys[k + 1] = x, y
    lat = CENTRE[1] + np.degrees(ys / EARTH_RADIUS_M)
    lon = CENTRE[0] + np.degrees(xs / (EARTH_RADIUS_M * np.cos(np.deg2rad(CENTRE[1]))))
    lat += np.degrees(rng.normal(0, 10.0, lat.shape) / EARTH_RADIUS_M)  # 10 m position noise
    lon += np.degrees(rng.normal(0, 10.0, lon.shape) / EARTH_RADIUS_M) / np.cos(np.deg2rad(CENTRE[1]))
    times = START + (np.arange(steps + 1) * STEP_S).astype("timedelta64[s]")
    frame = pd.DataFrame({"id": np.tile(np.arange(drifters) + 1000, steps + 1), "time": np.repeat(times, drifters),
                          "lon": lon.ravel(), "lat": lat.ravel()}).sort_values(["id", "time"], kind="stable")
    frame["time"] = frame["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.6f")
    return path


def binned(tracks: pathlib.Path, lon, lat, times) -> tuple[np.ndarray, np.ndarray]:
    """Returns the daily binned means (u, v) `(day, lat, lon)` m/s (NaN where no velocity) of the tracks' centred
    finite-difference velocities (experiments.basin.methods: `fd_velocities`, `binned_means` in bins of one cell) on
    the map's cells lon `(nx,)`, lat `(ny,)` (centres) and times `(nt,)` (datetime64, daily)."""
    import pandas as pd
    import xarray as xr

    frame = pd.read_csv(tracks)
    ids, rowsize = np.unique(frame["id"].values, return_counts=True)  # the rows are sorted by (id, time)
    archive = xr.Dataset({"rowsize": ("traj", rowsize), "lon": ("obs", frame["lon"].values),
                          "lat": ("obs", frame["lat"].values),
                          "time": ("obs", pd.to_datetime(frame["time"], utc=True).dt.tz_convert(None).to_numpy())})
    means = binned_means(fd_velocities(archive)[0], lon, lat, times, bin_deg=float(lon[1] - lon[0]))
    return means["u"].values, means["v"].values


def score(store: pathlib.Path, tracks: pathlib.Path) -> dict:
    """Returns the map's and the binned means' scores at the cells with a fix each day (module docstring)."""
    import xarray as xr

    flow = Flow()
    with xr.open_dataset(store) as m:
        times, lon, lat = m.time.values, m.lon.values, m.lat.values
        u, v, su, sv, n = (m[k].values.astype(np.float64) for k in ("u", "v", "u_std", "v_std", "n_fixes"))
        records = json.loads(m.attrs.get("tile_records", "[]"))
    local = [r["local_gp"] for r in records if "local_gp" in r]
    rejected = sum(isinstance(x, str) and x.startswith("rejected") for x in local)
    local_gp = f"fitted in {sum(isinstance(x, dict) for x in local)}, rejected in {rejected}" if local else ""  # basis
    lon2, lat2 = np.meshgrid(lon, lat)
    seconds = (times - START) / np.timedelta64(1, "s")
    tu, tv = np.stack([np.stack(flow.on_cells(lon2, lat2, t)) for t in seconds], axis=1)  # (day, lat, lon) each
    bu, bv = binned(tracks, lon, lat, times)
    cells = (n > 0) & np.isfinite(u) & np.isfinite(bu)
    rms = lambda a, b: float(np.sqrt(np.mean(((a - tu)[cells] ** 2 + (b - tv)[cells] ** 2) / 2)))
    inside = lambda part: np.r_[np.abs(u - tu)[part] <= 1.96 * su[part], np.abs(v - tv)[part] <= 1.96 * sv[part]]
    day = np.arange(len(times))[:, None, None]

    def covered(where):  # "coverage (cell-days)" in a part of the cells
        part = cells & where
        return f"{inside(part).mean():.3f} ({int(part.sum())})" if part.any() else ""

    parts = {"coverage_under_10_fixes": covered(n < 10), "coverage_10_to_50_fixes": covered((n >= 10) & (n <= 50)),
             "coverage_over_50_fixes": covered(n > 50), "coverage_days_30_45": covered((day >= 30) & (day <= 45))}
    return {**parts, "cell_days": int(cells.sum()), "error": relative_l2(u, v, tu, tv, cells),
            "binned_error": relative_l2(bu, bv, tu, tv, cells),
            "coverage": float(inside(cells).mean()), "median_u_std_m_s": float(np.median(su[cells])),
            "rms_error_m_s": rms(u, v), "binned_rms_error_m_s": rms(bu, bv), "local_gp": local_gp}


def run_map(tracks: pathlib.Path, out: pathlib.Path, resolution: float | None, tile_method: str = "objective") -> float:
    """Runs `lagda map` on the tracks as a user would (a new process), returns its wall seconds."""
    command = [sys.executable, "-m", "lagda", "map", "--tracks", str(tracks), "--out", str(out), "--no-progress",
               "--overwrite", "--tile-method", tile_method]
    if resolution is not None:
        command += ["--resolution", str(resolution)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"lagda map exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "dense_cluster")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV)
    parser.add_argument("--tile-method", choices=("objective", "basis"), default="objective",
                        help="lagda map's tile method (default: its default, objective)")
    args = parser.parse_args(argv)
    tracks = make(args.work / "dense.csv")
    rows = []
    for resolution in (None, 0.05):
        out = args.work / f"map_{args.tile_method}_{resolution or 'default'}.nc"
        wall = run_map(tracks, out, resolution, args.tile_method)
        row = {"tile_method": args.tile_method, "resolution_deg": resolution or 0.25, "wall_s": round(wall, 1),
               **score(out, tracks)}
        rows.append(row)
        print(f"resolution {row['resolution_deg']:g}: error {row['error']:.3f} (binned means "
              f"{row['binned_error']:.3f}) on {row['cell_days']} cell-days, coverage {row['coverage']:.3f}, "
              f"median u_std {row['median_u_std_m_s']:.4f} m/s, RMS error {row['rms_error_m_s']:.4f} m/s, {wall:.1f} s")
    merge_rows(args.csv, rows, COLUMNS, key=lambda row: (row["tile_method"], float(row["resolution_deg"])))
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
