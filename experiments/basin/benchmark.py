"""The basin-year benchmark's configuration: its ocean, archive, region, map resolution and tiling (`Benchmark`),
as the benchmark runs it (`full`) and in a tiny form for tests (`quick`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments.basin.archive import START, ArchiveConfig
from experiments.basin.ocean import OceanConfig


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
    """The basin-year benchmark (the module docstring of experiments.basin.year)."""
    return Benchmark()


def quick() -> Benchmark:
    """A tiny configuration for tests: a 1,400 km, 32^2 ocean, 40 drifters, 60 days, a 10 x 10 degree region at
    0.5 degree, 5-degree tiles."""
    ocean = OceanConfig(nx=32, L=1.4e6, rd=45_000.0, spin_up_days=360.0, spin_dt=21600.0, days=60, n_drifters=40)
    return Benchmark(ocean=ocean, archive=ArchiveConfig(release_days=30.0, min_life_days=20.0),
                     region=(-35.0, -25.0, 25.0, 35.0), resolution=0.5, window_days=20.0, window_step_days=10.0)
