"""How wide a `lagda map` store's error bars are against its truth: beyond the 95% coverage the basin-year score
gives, the 68% coverage, the median of |error| / std (0.674 for a calibrated Gaussian band) and the RMS error
beside the RMS std, on the cells with a fix and on every cell with a value. Rows (one per cell set) are merged into
results/band_widths.csv by (store, cells).

    python -m experiments.basin.band_widths --store runs/basin_year/map.zarr --truth runs/basin_year/truth.nc --label L
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np
import pandas as pd
import xarray as xr

from experiments.basin.methods import aligned_truth, crop_to_truth
from experiments.common.paths import ROOT
from lagda.mapping.store import open_map

CSV = ROOT / "results" / "band_widths.csv"


def band_widths(store: xr.Dataset, truth: xr.Dataset) -> list[dict]:
    """Returns one row per cell set ("with a fix", "every cell"): cell-day components, coverage of the 95% and
    68% bands, median |error| / std, RMS error and RMS std (m/s), u and v together."""
    store = crop_to_truth(store, truth)[0]
    tr = aligned_truth(store, truth)
    fixed = np.asarray(store["n_fixes"]) > 0
    rows = []
    for cells, where in (("with a fix", fixed), ("every cell", np.ones_like(fixed))):
        err, std = [], []
        for name in ("u", "v"):
            e = np.asarray(store[name], np.float64) - np.asarray(tr[name], np.float64)
            s = np.asarray(store[f"{name}_std"], np.float64)
            ok = where & np.isfinite(e) & np.isfinite(s)
            err.append(e[ok])
            std.append(s[ok])
        e, s = np.concatenate(err), np.concatenate(std)
        z = np.abs(e) / s
        rows.append({"cells": cells, "components": len(e), "coverage_95": float(np.mean(z <= 1.96)),
                     "coverage_68": float(np.mean(z <= 1.0)), "median_abs_z": float(np.median(z)),
                     "rms_error_m_s": float(np.sqrt(np.mean(e**2))), "rms_std_m_s": float(np.sqrt(np.mean(s**2)))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=pathlib.Path, required=True)
    parser.add_argument("--truth", type=pathlib.Path, required=True)
    parser.add_argument("--label", required=True, help="the store's row label")
    args = parser.parse_args()
    rows = [{"store": args.label, **row} for row in band_widths(open_map(args.store), xr.open_dataset(args.truth))]
    for row in rows:
        print(row)
    old = pd.read_csv(CSV) if CSV.exists() else pd.DataFrame(columns=list(rows[0]))
    old = old[old["store"] != args.label]
    pd.concat([old, pd.DataFrame(rows)]).round(4).to_csv(CSV, index=False)
    print(f"wrote {CSV}")


if __name__ == "__main__":
    main()
