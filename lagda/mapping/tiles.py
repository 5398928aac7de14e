"""The tiles of a map: overlapping space tiles with a halo, time windows with an overlap, and their taper weights.

A region (west, east, south, north) in degrees is cut into rows of tiles `tile_deg` high; each row into tiles about
`tile_deg` wide in kilometres at its mid-latitude (wider in longitude towards the poles, so that every tile is
about square on the sphere). A tile's box is its core widened by `halo_deg` (of latitude, and the same distance in
longitude) on every side; fixes in the box inform the tile. The period is cut into windows `window_days` long every
`step_days`, the first starting half an overlap before the period, so that every day of the period lies in the
full-weight part of some window.

The blend weight of a tile at a cell and day is the product of a space taper (1 in the core, falling as sin^2 to 0
at the box's edge across the halo) and a time taper (rising as sin^2 over the first half-overlap of the window,
1 in its middle, falling over the last): the map is sum_tiles w f / sum_tiles w, continuous across tile edges.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.arguments import given
from lagda.assimilation.gaussian_process import DAY_S
from lagda.assimilation.local_gp import Box
from lagda.io.physical import iso_time


@dataclasses.dataclass(frozen=True)
class Tile(Box):
    """One tile of the layout: a core box, its halo'd box and a time window (a local GP's `Box`, its `centre` the
    box's).

    The inherited `box` is the core widened by the halo (same convention), and `start_s`, `end_s` the window in
    seconds since 1970-01-01T00:00:00Z.

    Attributes
    ----------
    key : str
        "r{row}c{column}w{window}", unique in the layout (the tile's file name in the partial store).
    core : tuple of float
        (west, east, south, north) degrees, west < east (east may exceed 180 across the dateline).
    halo_lat : float
        The halo in degrees of latitude.
    halo_lon : float
        The halo in degrees of longitude (the halo's distance at the core's mid-latitude).
    ramp_s : float
        The time taper's ramp length, seconds.
    """

    key: str
    core: tuple[float, float, float, float]
    halo_lat: float
    halo_lon: float
    ramp_s: float

    def space_weight(self, lon, lat) -> np.ndarray:
        """Returns the space taper at (lon, lat) degrees `(...)` (lon in the tile's convention, see `relative_lon`)."""
        west, east, south, north = self.box
        sx = np.clip(np.minimum(lon - west, east - lon) / self.halo_lon, 0.0, 1.0)
        sy = np.clip(np.minimum(lat - south, north - lat) / self.halo_lat, 0.0, 1.0)
        return np.sin(0.5 * np.pi * sx) ** 2 * np.sin(0.5 * np.pi * sy) ** 2

    def time_weight(self, seconds) -> np.ndarray:
        """Returns the time taper at `seconds` since the epoch `(...)`."""
        s = np.asarray(seconds, np.float64)
        ramp = np.clip(np.minimum(s - self.start_s, self.end_s - s) / self.ramp_s, 0.0, 1.0)
        return np.sin(0.5 * np.pi * ramp) ** 2

    def relative_lon(self, lon) -> np.ndarray:
        """Returns longitudes `(...)` shifted by whole turns to lie within 180 degrees of the box centre."""
        c = self.centre[0]
        return (np.asarray(lon, np.float64) - c + 180.0) % 360.0 - 180.0 + c

    def holds(self, lon, lat) -> np.ndarray:
        """Returns whether (lon, lat) degrees `(...)` lie in the box (edges included), lon in the tile's convention
        (`relative_lon`)."""
        west, east, south, north = self.box
        return (lon >= west) & (lon <= east) & (lat >= south) & (lat <= north)

    def window(self, sorted_seconds) -> slice:
        """Returns the slice of `sorted_seconds` `(n,)` (ascending) in the window, start and end included."""
        return slice(np.searchsorted(sorted_seconds, self.start_s, side="left"),
                     np.searchsorted(sorted_seconds, self.end_s, side="right"))


def region_width(region) -> float:
    """Returns the east-west extent of (west, east, south, north) in degrees, across the dateline when east < west."""
    width = (region[1] - region[0]) % 360.0
    return 360.0 if width == 0 else width


def check_extent(region=None, period=None) -> None:
    """Checks a map's region (west, east, south, north degrees) and period (start, end seconds), either may be None.

    Raises
    ------
    ValueError
        latitudes outside -80 <= south < north <= 80, or a period that does not end after it starts.
    """
    if region is not None:
        south, north = float(region[2]), float(region[3])
        if not (-80.0 <= south < north <= 80.0):
            raise ValueError(f"{given('region', tuple(region))}: latitudes must satisfy -80 <= south < north <= 80")
    if period is not None and not period[1] > period[0]:
        raise ValueError(f"{given('period', tuple(map(iso_time, period)))}: the end must be after the start")


def tile_layout(region, period, tile_deg: float, halo_deg: float, window_days: float, step_days: float) -> list[Tile]:
    """Returns the tiles covering `region` (west, east, south, north degrees) over `period` (start, end seconds).

    Raises
    ------
    ValueError
        for a region outside latitudes (-80, 80), sizes that are not positive, or a step longer than
        the window.
    """
    check_extent(region, period)
    west, _, south, north = (float(r) for r in region)
    if not (tile_deg > 0 and halo_deg > 0 and window_days > 0 and 0 < step_days <= window_days):
        raise ValueError("tile size, halo and window must be positive and the window step at most the window")
    width = region_width(region)
    ramp_s = max(0.5 * (window_days - step_days), 0.25 * step_days) * DAY_S
    starts, start = [], period[0] - ramp_s
    while True:
        starts.append(start)
        if start + window_days * DAY_S - ramp_s >= period[1]:
            break
        start += step_days * DAY_S
    n_rows = max(1, int(np.ceil((north - south) / tile_deg - 1e-9)))
    tiles = []
    for r in range(n_rows):
        s, n = south + r * (north - south) / n_rows, south + (r + 1) * (north - south) / n_rows
        stretch = 1.0 / np.cos(np.deg2rad(0.5 * (s + n)))  # degrees of longitude per degree of latitude's distance
        n_cols = max(1, int(np.ceil(width / (tile_deg * stretch) - 1e-9)))
        halo_lon = halo_deg * stretch
        for c in range(n_cols):
            w, e = west + c * width / n_cols, west + (c + 1) * width / n_cols
            for k, t0 in enumerate(starts):
                tiles.append(Tile(key=f"r{r}c{c}w{k}", core=(w, e, s, n),
                                  box=(w - halo_lon, e + halo_lon, s - halo_deg, n + halo_deg), halo_lat=halo_deg,
                                  halo_lon=halo_lon, start_s=t0, end_s=t0 + window_days * DAY_S, ramp_s=ramp_s))
    return tiles


@dataclasses.dataclass(frozen=True)
class Grid:
    """The map's cells and days.

    Attributes
    ----------
    lon, lat
        `(nx,)`, `(ny,)` cell centres in degrees (lon increasing; may pass 180)
    days
        `(nt,)` seconds.
    """

    lon: np.ndarray
    lat: np.ndarray
    days: np.ndarray

    def window(self, tile: Tile) -> tuple[slice, slice, slice]:
        """Returns (day, lat, lon) slices of the cells in the tile's box and window (lon compared in its convention)."""
        def span(values, lo, hi):
            i = np.flatnonzero((values > lo) & (values < hi))
            return slice(int(i[0]), int(i[-1]) + 1) if len(i) else slice(0, 0)

        lon = tile.relative_lon(self.lon)
        inside = np.flatnonzero((lon > tile.box[0]) & (lon < tile.box[1]))
        # cells in the tile's longitude convention are contiguous unless the region spans the whole globe
        lon_slice = slice(int(inside[0]), int(inside[-1]) + 1) if len(inside) else slice(0, 0)
        return (span(self.days, tile.start_s, tile.end_s), span(self.lat, tile.box[2], tile.box[3]), lon_slice)
