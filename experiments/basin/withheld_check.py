"""Does `lagda map --withhold` tell a user what the truth would? The basin-year archive mapped with a fraction of
its drifters withheld, the map's check against them set beside its score against the truth at the same points.

```bash
python -m experiments.basin.withheld_check --quick --withhold 0.2  # the tiny basin (a minute to make, a minute to map)
python -m experiments.basin.withheld_check --withhold 0.1          # the basin year (its cache in runs/basin_year/)
python -m experiments.basin.withheld_check --store MAP.zarr        # an existing map of the archive made with --withhold
```

Rows (results/withheld_check.csv, and the table of docs/results/withheld-check.md): the map against the withheld
drifters' daily velocities (what `lagda map` says, with no truth), the map against the truth at the same points and
times (what the check stands for), the drifters' daily velocities against the truth there (how far the check's
reference is from the truth), and the map against the truth on every cell-day holding a fix of the mapped drifters
(the basin-year page's headline score).
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import sys

import numpy as np
import xarray as xr

from experiments.basin.benchmark import full, quick
from experiments.basin.run import run_map
from experiments.basin.year import make, score_store
from experiments.common.csv_rows import cell as _fmt
from experiments.common.page_tables import write_page
from experiments.common.paths import ROOT
from lagda.io.tracks import id_text
from lagda.mapping.check import band_scores, daily_velocities, sample_map
from lagda.mapping.run import map_fixes
from lagda.mapping.settings import MapSettings
from lagda.mapping.store import open_map

CSV = ROOT / "results" / "withheld_check.csv"
PAGE = ROOT / "docs" / "results" / "withheld-check.md"
FIELDS = ["benchmark", "withhold", "comparison", "velocities", "error", "rms_m_s", "speed_rms_m_s", "coverage_95",
          "z_rms"]


def compare(bench, archive, truth: xr.Dataset, store) -> list[dict]:
    """Returns the rows (module docstring) of a map made with --withhold, against the truth."""
    maps = open_map(store)
    ids = set(json.loads(maps.attrs["check_withheld_ids"]))
    settings = json.loads(maps.attrs["settings"])
    settings = MapSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    fixes = map_fixes(archive, settings, settings.tiles())  # as the map had them (selected, cleaned, low-passed)
    held = fixes.subset(np.isin(fixes.traj, [t for t, i in enumerate(fixes.ids) if id_text(i) in ids]))
    lon, lat, seconds, velocity, _ = daily_velocities(held)
    mapped, _ = sample_map(maps, lon, lat, seconds)
    true, _ = sample_map(truth, lon, lat, seconds, names=("u", "v"))
    ok = np.all(np.isfinite(mapped), axis=1) & np.all(np.isfinite(true), axis=1)
    mean, std = mapped[ok, :2], mapped[ok, 2:]
    rows = [("the map against the withheld drifters (the check)", band_scores(mean, std, velocity[ok])),
            ("the map against the truth at the same points", band_scores(mean, std, true[ok])),
            ("the drifters' daily velocities against the truth there",
             {k: v for k, v in band_scores(velocity[ok], std, true[ok]).items() if k not in ("coverage_95", "z_rms")})]
    headline = score_store(bench, store, truth, "")
    rows.append(("the map against the truth on the cell-days with a fix of the mapped drifters",
                 {"velocities": headline["cells"], "error": headline["error"], "coverage_95": headline["coverage"]}))
    name = "quick" if bench == quick() else "basin year"
    withhold = settings.withhold
    return [{"benchmark": name, "withhold": withhold, "comparison": label, **scores} for label, scores in rows]


def write_csv(rows: list[dict], path: pathlib.Path) -> pathlib.Path:
    """Replaces the rows of the same benchmark in the CSV at `path` by `rows`; returns the path."""
    old = []
    if path.exists():
        with open(path, newline="") as handle:
            old = [r for r in csv.DictReader(handle) if r["benchmark"] != rows[0]["benchmark"]]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(old + [{k: _fmt(r.get(k, "")) for k in FIELDS} for r in rows])
    return path


def page_table(csv_path: pathlib.Path) -> str:
    """Returns the basin-year page's table of the check (markdown) from the CSV."""
    with open(csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    lines = ["| archive | withheld | comparison | velocities | error | RMS m/s | RMS speed m/s | coverage (95%) "
             "| RMS error / std |", "|" + "---|" * 9]
    lines += ["| " + " | ".join(r[k] for k in FIELDS) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny basin (experiments.basin.benchmark.quick)")
    parser.add_argument("--work", type=pathlib.Path, help="the cache folder (default runs/basin_year[_quick])")
    parser.add_argument("--withhold", type=float, default=0.1, help="the fraction of drifters withheld")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--store", type=pathlib.Path, help="a map of the archive already made with --withhold")
    parser.add_argument("--csv", type=pathlib.Path, default=CSV)
    args = parser.parse_args(argv)
    bench = quick() if args.quick else full()
    work = args.work or ROOT / "runs" / ("basin_year_quick" if args.quick else "basin_year")
    archive, truth_path = make(bench, work)
    store = args.store
    if store is None:
        store = work / f"map_withhold{args.withhold:g}.zarr"
        measured = run_map(bench, archive, store, args.workers, ["--withhold", str(args.withhold)])
        print(f"mapped in {measured['wall_s']:.0f} s, peak {measured['peak_rss_gb']:.2f} GB")
    try:
        rows = compare(bench, archive, xr.open_dataset(truth_path), store)
    except (KeyError, ValueError) as error:
        print(f"error: {store}: {error} (a map made with --withhold?)", file=sys.stderr)
        return 2
    for row in rows:
        print(", ".join(f"{k} {_fmt(row.get(k, ''))}" for k in FIELDS[2:] if row.get(k, "") != ""))
    print(f"wrote {write_csv(rows, args.csv)}")
    if args.csv == CSV:
        print(f"wrote {write_page(CSV, PAGE, page_table, 'withheld-check table')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
