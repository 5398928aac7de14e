"""The shipped GDP-like example, an ocean flow: how it is made, and what `lagda assimilate` recovers from it.

The flow: `lagda simulate --flow qg` (pyqg-jax two-layer turbulence, 1000 km, the background current
included), 8 drifters released in the central 400 km, hourly fixes over 30 days. The file: those fixes placed
on the sphere at 40 W, 34 N (`lagda export-tracks --centre`), 6 gaps of 1-12 fixes per drifter, clouddrift's
ragged layout, written `--plain` (no lagda mapping, release points or truth: the box and time scale are
inferred, as for a real file). Then `lagda assimilate` as the README runs it, with lagda's own steady model
and with `--basis circular` (no climatology), scored against the QG truth: the relative L2 error of the mean
velocity over the truth cells inside the drifters' extent, at the daily truth times inside the window.

    python -m experiments.drifters.gdp_like                  # writes runs/gdp/ and prints one row per method
    python -m experiments.drifters.gdp_like --ship           # also copies the file to lagda/shipped/gdp_like.nc
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil

import numpy as np
import xarray as xr
from scipy.interpolate import RegularGridInterpolator

from experiments.common.paths import ROOT

SIMULATE = ["simulate", "--flow", "qg", "--n-samples", "1", "--n-drifters", "8", "--release-box", "0.3", "0.7",
            "0.3", "0.7", "--window-days", "30", "--seed", "11"]
CENTRE = (-40.0, 34.0)
EXPORT = ["--start", "2025-03-01T00:00:00Z", "--gaps", "6", "12", "--layout", "ragged", "--plain"]


def make(work: pathlib.Path, centre=CENTRE) -> tuple[pathlib.Path, pathlib.Path]:
    """Returns (the QG truth file, the GDP-like file placed at `centre` (lon, lat)), made by the two commands if
    missing."""
    from lagda import cli

    truth = work / "qg_gdp.nc"
    tracks = work / ("gdp_like.nc" if tuple(centre) == CENTRE else f"gdp_like_{centre[0]:g}_{centre[1]:g}.nc")
    work.mkdir(parents=True, exist_ok=True)
    if not truth.exists() and cli.main([*SIMULATE, "--out", str(truth)]) != 0:
        raise SystemExit("lagda simulate failed")
    if not tracks.exists() and cli.main(["export-tracks", "--tracks", str(truth), "--out", str(tracks),
                                         "--centre", *(f"{c:g}" for c in centre), *EXPORT]) != 0:
        raise SystemExit("lagda export-tracks failed")
    return truth, tracks


def error_in_extent(result_path, truth: xr.Dataset, tracks_path, centre=CENTRE) -> tuple[float, int, int]:
    """Returns (relative L2 error of the result's mean u, v against the truth, cells, times scored).

    Truth cells (metres in the QG domain) go to lon/lat through the export's tangent plane at `centre` and are
    scored where they lie inside the tracks' lon/lat extent; the result's grid is interpolated bilinearly.
    """
    from lagda.io.physical import Mapping, box_of_size, parse_time
    from lagda.io.results import mean_velocity

    side = float(truth.attrs["qg_L"])
    plane = Mapping(box_of_size(tuple(centre), (side, side), "lonlat"), "lonlat",
                    parse_time("2025-03-01T00:00:00Z"), 1.0)
    n = int(truth.attrs["qg_nx"])
    cells = (np.arange(n) + 0.5) / n  # model units of the QG domain
    lon, lat = plane.from_model(*np.meshgrid(cells, cells))  # (y, x)
    with xr.open_dataset(tracks_path) as fixes:
        inside = ((lon >= float(fixes["lon"].min())) & (lon <= float(fixes["lon"].max()))
                  & (lat >= float(fixes["lat"].min())) & (lat <= float(fixes["lat"].max())))
    truth_days = (truth["truth_time"].values - truth["truth_time"].values[0]) / np.timedelta64(1, "D")
    with xr.open_dataset(result_path) as res:
        res_days = (res["time"].values - np.datetime64("2025-03-01T00:00:00")) / np.timedelta64(1, "D")
        err = ref = 0.0
        scored = 0
        for i, day in enumerate(truth_days):
            j = int(np.argmin(np.abs(res_days - day)))
            if abs(res_days[j] - day) > 1.5 / 24:  # the result's daily times start at the first fix
                continue
            scored += 1
            for name in ("u", "v"):
                interp = RegularGridInterpolator((res["lat"].values, res["lon"].values),
                                                 mean_velocity(res, name)[j], bounds_error=False, fill_value=None)
                est = interp(np.stack([lat[inside], lon[inside]], axis=-1))
                true = truth[name].values[0, i][inside].astype(np.float64)
                err, ref = err + float(np.sum((est - true) ** 2)), ref + float(np.sum(true**2))
    return float(np.sqrt(err / ref)), int(inside.sum()), scored


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "gdp")
    parser.add_argument("--ship", action="store_true", help="copy the file to lagda/shipped/gdp_like.nc")
    parser.add_argument("--centre", type=float, nargs=2, default=CENTRE, metavar=("LON", "LAT"),
                        help="where the tracks are placed on the sphere (default -40 34; e.g. -40 70 for 65-75 N)")
    parser.add_argument("--default-only", action="store_true", help="only the default run (no method flags)")
    args = parser.parse_args(argv)
    from lagda.assimilation import AssimilateSettings, assimilate_file

    truth_path, tracks = make(args.work, args.centre)
    if args.ship and tuple(args.centre) != CENTRE:
        raise SystemExit("--ship copies the file at the default centre only")
    if args.ship:
        shutil.copyfile(tracks, ROOT / "lagda" / "shipped" / "gdp_like.nc")
    with xr.open_dataset(truth_path) as truth:
        runs = (("default (no method flags: the ocean path)", {}),
                ("linear (lagda's steady model)", {"method": "linear"}),
                ("linear --basis circular", {"method": "linear", "basis": "circular"}))
        for label, options in runs[:1] if args.default_only else runs:
            out = args.work / f"result_{label.split(' ')[0]}_{tracks.stem}.nc"
            summary = assimilate_file(tracks, out, AssimilateSettings(n_grid=64, **options), overwrite=True)
            error, cells, times = error_in_extent(out, truth, tracks, args.centre)
            print(json.dumps({"run": label, "centre": list(args.centre), "error_in_extent": round(error, 3),
                              "cells": cells, "times": times, "method_seconds": round(summary.seconds, 1),
                              "decided": summary.diagnostics}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
