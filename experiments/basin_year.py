"""The basin-year benchmark: `lagda map` on a year of GDP-like drifters in a QG ocean, scored against its truth.

Steps (each cached in the work folder, default runs/basin_year/; `--quick` uses runs/basin_year_quick/):

- `make`: the archive and the truth (experiments.basin_ocean, experiments.basin_archive): a pyqg-jax QG year on a
  4,500 km domain with its mean current, placed at 30 W, 30 N; 400 drifters released over the year, hourly fixes
  with GDP-like problems, written as `archive.nc` (GDP-hourly ragged, no lagda attributes) and `archive_stats.json`;
  the truth, daily u, v on the region's grid (lon -50..-10, lat 10..50 at 0.25 degree), as `truth.nc`.
- `baselines`: binned means (0.25, 0.5, 1 degree; daily and 10-day windows) and a Goncalves-style GP per tile
  (experiments.basin_methods), each scored; rows in the CSV.
- `score --store STORE`: a `lagda map` store against the truth (experiments.basin_methods.score_map).
- `run`: `lagda map` with 1 and 2 workers (wall time, tiles/s, peak memory of the process tree), scored; the
  one-box `lagda assimilate` comparison; the CSV and the results page's table.

    python -m experiments.basin_year make
    python -m experiments.basin_year baselines
    python -m experiments.basin_year run [--workers 1 2]
    python -m experiments.basin_year page          # regenerate docs/results/basin-year.md's table from the CSV
    python -m experiments.basin_year all --quick    # a tiny configuration end to end (for tests)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import time

import numpy as np

from experiments.basin_archive import ArchiveConfig, make_archive, to_gdp_dataset
from experiments.basin_ocean import OceanConfig, simulate_year, truth_on_grid

ROOT = pathlib.Path(__file__).resolve().parents[1]
CSV = ROOT / "results" / "basin_year.csv"
PAGE = ROOT / "docs" / "results" / "basin-year.md"
START = np.datetime64("2001-01-01T00:00:00", "ms")


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """The benchmark: its ocean, archive, region (lon0, lon1, lat0, lat1 degrees), map resolution (degrees) and the
    tiling the GP baseline shares with `lagda map` (a map store's attributes override it when scored)."""

    ocean: OceanConfig = OceanConfig()
    archive: ArchiveConfig = ArchiveConfig()
    region: tuple[float, float, float, float] = (-50.0, -10.0, 10.0, 50.0)
    resolution: float = 0.25
    tile_size_deg: float = 5.0
    halo_deg: float = 1.0
    window_days: float = 30.0
    window_step_days: float = 10.0

    @property
    def period(self) -> tuple[str, str]:
        """Returns (START, END) ISO dates of the daily maps: the year's first and last recorded day."""
        end = START + np.timedelta64(self.ocean.days, "D")
        return str(START.astype("datetime64[D]")), str(end.astype("datetime64[D]"))

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns the cell centres (lon `(nlon,)`, lat `(nlat,)`) in degrees: LON0 + DEG (i + 0.5)."""
        lon0, lon1, lat0, lat1 = self.region
        nlon, nlat = int(round((lon1 - lon0) / self.resolution)), int(round((lat1 - lat0) / self.resolution))
        return lon0 + self.resolution * (np.arange(nlon) + 0.5), lat0 + self.resolution * (np.arange(nlat) + 0.5)


def full() -> Benchmark:
    """The basin-year benchmark (module docstring)."""
    return Benchmark()


def quick() -> Benchmark:
    """A tiny configuration for tests: a 1,400 km, 32^2 ocean, 40 drifters, 60 days, a 10 x 10 degree region at
    0.5 degree, 5-degree tiles."""
    ocean = OceanConfig(nx=32, L=1.4e6, rd=45_000.0, spin_up_days=360.0, spin_dt=21600.0, days=60, n_drifters=40)
    return Benchmark(ocean=ocean, archive=ArchiveConfig(release_days=30.0, min_life_days=20.0),
                     region=(-35.0, -25.0, 25.0, 35.0), resolution=0.5, window_days=20.0, window_step_days=10.0)


def make(bench: Benchmark, work: pathlib.Path, log=print) -> tuple[pathlib.Path, pathlib.Path]:
    """Returns (archive.nc, truth.nc) in `work`, made unless both exist (with archive_stats.json).

    Raises:
        ValueError: for a bad setting; ImportError: without pyqg-jax.
    """
    archive, truth, stats_path = work / "archive.nc", work / "truth.nc", work / "archive_stats.json"
    if archive.exists() and truth.exists() and stats_path.exists():
        log(f"make: cached {archive} and {truth}")
        return archive, truth
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    year = simulate_year(bench.ocean, log=log)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["make"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--work", type=pathlib.Path)
    args = parser.parse_args(argv)
    bench = quick() if args.quick else full()
    work = args.work or ROOT / "runs" / ("basin_year_quick" if args.quick else "basin_year")
    make(bench, work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
