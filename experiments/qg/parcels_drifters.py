"""Drifters lagda did not make, in a flow lagda did not make: Parcels advects drifters in a pyqg-jax QG flow.

The flow: the daily gridded full velocity (background current included) of one flow of a `lagda simulate --flow qg`
truth file, placed on the sphere at 40 W, 34 N (the same 1000 km box lengths on the tangent plane) and tiled 3 x 3
(the flow is periodic, so drifters may leave the central box). Parcels v4 (RK4, 15 min steps, hourly output,
bilinear in space and linear in time) advects `--drifters` drifters released uniformly in the central box for the
window. Its Parquet file is assimilated as a user would: `lagda assimilate --tracks drifters.parquet --method
linear --basis circular` with every default (no --box, no --climatology, no --noise-std, no --model). Scored
against the truth on the result's grid points inside the drifters' lon/lat extent, at the result's daily times
(relative L2 of the mean velocity; the truth interpolated bilinearly, periodically, from its cell centres).

    python -m experiments.qg.parcels_drifters --flow runs/qg_benchmark/turbulence_test.nc --drifters 64
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

CENTRE = (-40.0, 34.0)


def placement(truth: xr.Dataset):
    """Returns the Mapping that places the QG domain on the sphere (model units = fractions of the domain)."""
    from lagda.io.physical import Mapping, box_of_size

    side = float(truth.attrs["qg_L"])
    start = (truth["truth_time"].values[0] - np.datetime64("1970-01-01T00:00:00")) / np.timedelta64(1, "s")
    return Mapping(box_of_size(CENTRE, (side, side), "lonlat"), "lonlat", float(start), 1.0)


def periodic_truth(truth: xr.Dataset, flow: int):
    """Returns (u, v) `(time, y, x)` m/s on the cell centres padded by one cell each side, and their model
    coordinates `(n + 2,)`: bilinear interpolation of the periodic field anywhere in [0, 1)."""
    n = int(truth.attrs["qg_nx"])
    pad = lambda f: np.pad(np.asarray(f, np.float64), ((0, 0), (1, 1), (1, 1)), mode="wrap")  # noqa: E731
    centres = (np.arange(-1, n + 1) + 0.5) / n
    return pad(truth["u"].values[flow]), pad(truth["v"].values[flow]), centres


def run_parcels(truth: xr.Dataset, flow: int, n_drifters: int, out: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """Advects n_drifters with Parcels in the tiled flow; returns the Parquet file."""
    import parcels
    from parcels import convert

    mapping = placement(truth)
    u, v, centres = periodic_truth(truth, flow)
    n = int(truth.attrs["qg_nx"])
    tiles = np.concatenate([centres[1:-1] + k for k in (-1, 0, 1)])  # 3 n cell centres over [-1, 2)
    lon, lat = mapping.from_model(tiles, tiles)
    tile = lambda f: np.tile(f[:, 1:-1, 1:-1], (1, 3, 3))[:, None].astype(np.float32)  # noqa: E731
    dims = ("time", "depth", "lat", "lon")
    ds = xr.Dataset({"uo": (dims, tile(u)), "vo": (dims, tile(v))},
                    coords={"time": truth["truth_time"].values, "depth": [0.0],
                            "lat": ("lat", lat, {"axis": "Y", "standard_name": "latitude", "units": "degrees_north"}),
                            "lon": ("lon", lon, {"axis": "X", "standard_name": "longitude", "units": "degrees_east"})})
    fieldset = parcels.FieldSet.from_sgrid_conventions(
        convert.copernicusmarine_to_sgrid(fields={"U": ds["uo"], "V": ds["vo"]}), mesh="spherical")
    rng = np.random.default_rng(seed)
    x0, y0 = rng.uniform(0, 1, n_drifters), rng.uniform(0, 1, n_drifters)
    release_lon, release_lat = mapping.from_model(x0, y0)
    start = truth["truth_time"].values[0]
    window = truth["truth_time"].values[-1] - start
    pset = parcels.ParticleSet(fieldset, x=release_lon, y=release_lat, t=np.full(n_drifters, start))
    parquet = out / f"parcels_{n_drifters}.parquet"
    output = parcels.ParticleFile(parquet, outputdt=np.timedelta64(1, "h"))
    began = time.perf_counter()
    pset.execute([parcels.kernels.AdvectionRK4], dt=np.timedelta64(15, "m"), runtime=window, output_file=output,
                 verbose_progress=False)
    print(f"Parcels: {n_drifters} drifters over {window / np.timedelta64(1, 'D'):g} days on a {3 * n}^2 tiled grid in "
          f"{time.perf_counter() - began:.0f} s", flush=True)
    return parquet


def error_in_extent(result_path, truth: xr.Dataset, flow: int, parquet) -> tuple[float, int, int]:
    """Returns (relative L2 error of the result's mean u, v, grid points scored, times scored)."""
    from lagda.io.formats import read_tracks
    from lagda.io.results import mean_velocity

    mapping = placement(truth)
    u, v, centres = periodic_truth(truth, flow)
    tracks = read_tracks(parquet)
    fixes = np.stack(tracks.mapping.from_model(tracks.positions[..., 0], tracks.positions[..., 1]), -1)
    lo, hi = np.nanmin(fixes, axis=(0, 1)), np.nanmax(fixes, axis=(0, 1))
    truth_days = (truth["truth_time"].values - truth["truth_time"].values[0]) / np.timedelta64(1, "D")
    with xr.open_dataset(result_path) as res:
        glon, glat = np.meshgrid(res["lon"].values, res["lat"].values)
        inside = (glon >= lo[0]) & (glon <= hi[0]) & (glat >= lo[1]) & (glat <= hi[1])
        x, y = mapping.to_model(glon[inside], glat[inside])
        points = np.stack([np.mod(y, 1.0), np.mod(x, 1.0)], -1)
        res_days = (res["time"].values - truth["truth_time"].values[0]) / np.timedelta64(1, "D")
        err = ref = 0.0
        scored = 0
        for j, day in enumerate(res_days):
            i = int(np.argmin(np.abs(truth_days - day)))
            if abs(truth_days[i] - day) > 1.5 / 24:
                continue
            scored += 1
            for name, field in (("u", u), ("v", v)):
                true = RegularGridInterpolator((centres, centres), field[i])(points)
                est = mean_velocity(res, name)[j][inside]
                err, ref = err + float(np.sum((est - true) ** 2)), ref + float(np.sum(true**2))
    return float(np.sqrt(err / ref)), int(inside.sum()), scored


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flow", type=pathlib.Path, required=True, help="a `lagda simulate --flow qg` truth file")
    parser.add_argument("--field", type=int, default=0, help="which flow of the file")
    parser.add_argument("--drifters", type=int, default=64)
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "parcels_qg")
    args = parser.parse_args(argv)
    from lagda.assimilation import AssimilateSettings, assimilate_file

    args.work.mkdir(parents=True, exist_ok=True)
    with xr.open_dataset(args.flow) as truth:
        parquet = run_parcels(truth, args.field, args.drifters, args.work)
        out = args.work / f"result_{args.drifters}.nc"
        began = time.perf_counter()
        summary = assimilate_file(parquet, out, AssimilateSettings("linear", basis="circular", n_grid=64),
                                  overwrite=True)
        wall = time.perf_counter() - began
        error, cells, times = error_in_extent(out, truth, args.field, parquet)
    for note in summary.notes:
        print("note:", note)
    print(json.dumps({"drifters": args.drifters, "error_in_extent": round(error, 3), "grid_points": cells,
                      "times": times, "method_seconds": round(summary.seconds, 1), "wall_seconds": round(wall, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
