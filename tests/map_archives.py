"""Drifter archives in a known uniform current and the map settings of the lagda map tests (tests/test_map*.py)."""

import numpy as np
import xarray as xr

from lagda.io.physical import EARTH_RADIUS_M, parse_time
from lagda.mapping.settings import MapSettings

START = "2025-01-01T00:00:00Z"
U, V = 0.12, -0.05  # m/s


def write_archive(path, lon0, lat0, size=6.0, days=16, n=14, seed=0, spikes=0, every_h=1.0, inertial=0.0):
    """Writes a GDP-like ragged archive of drifters in the uniform current (U, V), a fix every `every_h` hours with
    20 m noise; with `inertial` m/s, the drifters also loop clockwise at their local inertial period, all in phase."""
    rng = np.random.default_rng(seed)
    t0 = np.datetime64("2025-01-01T00:00:00", "ns")
    rows, lons, lats, times = [], [], [], []
    for _ in range(n):
        lon, lat = lon0 + rng.uniform(0, size), lat0 + rng.uniform(0, size)
        s = 3600.0 * every_h * np.arange(int(days * 24 / every_h))
        f = 2 * 7.2921159e-5 * np.sin(np.radians(lat))
        loop_x, loop_y = inertial / f * np.sin(f * s), inertial / f * np.cos(f * s)  # u = U + A cos ft, v = V - A sin
        lat_t = lat + np.degrees((V * s + loop_y + rng.normal(0, 20, len(s))) / EARTH_RADIUS_M)
        lon_t = lon + np.degrees((U * s + loop_x + rng.normal(0, 20, len(s)))
                                 / (EARTH_RADIUS_M * np.cos(np.radians(lat_t))))
        if spikes:
            k = rng.choice(np.arange(5, len(s) - 5), spikes, replace=False)
            lat_t[k] += 0.45  # 50 km off
        rows.append(len(s))
        lons.append((lon_t + 180.0) % 360.0 - 180.0)
        lats.append(lat_t)
        times.append(t0 + (s * 1e9).astype("timedelta64[ns]"))
    xr.Dataset({"rowsize": ("traj", np.array(rows)), "id": ("traj", 300234060000000 + np.arange(n)),
                "lon": ("obs", np.concatenate(lons), {"units": "degrees_east"}),
                "lat": ("obs", np.concatenate(lats), {"units": "degrees_north"}),
                "time": ("obs", np.concatenate(times))}).to_netcdf(path)


def settings(lon0, lat0, size=6.0, method="basis", days=14.0):
    """The tests' map settings, a `size`-degree box from (lon0, lat0) and `days` days from START; most of the map tests
    test the basis method's tiles (tests/test_objective.py the default's)."""
    return MapSettings((lon0, (lon0 + size + 180.0) % 360.0 - 180.0, lat0, lat0 + size),
                       (parse_time(START), parse_time(START) + days * 86400.0), resolution=0.5, tile_deg=3.0,
                       halo_deg=1.0, window_days=10.0, step_days=5.0, k_max=3.0, degree=1, method=method)


def small_settings(method="objective", tile_deg=3.0):
    """The settings of a map 3 degrees square and 8 days (2 tiles of 3 degrees: two windows of one box; 8 of 1.5),
    of the archive `write_archive(path, -40.0, 30.0)` writes; the tile method's default unless `method` is given."""
    return MapSettings((-40.0, -37.0, 30.0, 33.0), (parse_time(START), parse_time(START) + 8 * 86400.0),
                       resolution=0.5, tile_deg=tile_deg, halo_deg=1.0, window_days=8.0, step_days=4.0, k_max=3.0,
                       degree=1, method=method)
