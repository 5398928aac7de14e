"""What a map is made of: `MapSettings`, every field of which a resume compares, with its grid and tiles."""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from lagda.arguments import given
from lagda.io.physical import parse_time
from lagda.mapping.methods.interface import TileMethod
from lagda.mapping.methods.registry import TILE_METHODS
from lagda.mapping.tiles import DAY_S, Grid, Tile, check_extent, region_width, tile_layout

# what a map made before a setting existed did: it is compared as that, not as the setting's default
ABSENT_SETTINGS = {"low_pass": False, "method": "basis", "background": None}


def _region_degrees(region) -> tuple[float, float, float, float] | None:
    """Returns a region as (west, east, south, north) floats, None for None.

    West east of east reads as the band eastward from west across the dateline only when that band is the narrower
    reading of the two (at most 180 degrees wide): `170, -170` is 20 degrees across the dateline; `-37, -41` would
    be 356 degrees, a map of the whole latitude band where 4 degrees were meant, and is refused, the message
    writing both readings (the wide band as `-37, 319`).

    Raises
    ------
    ValueError
        not four finite numbers, or a west east of east whose band across the dateline is over 180
        degrees wide.
    """
    if region is None:
        return None
    try:
        west, east, south, north = (float(value) for value in region)
    except (TypeError, ValueError):
        raise ValueError(f"{given('region', region)}: four numbers, west east south north in degrees") from None
    if not np.all(np.isfinite([west, east, south, north])):
        raise ValueError(f"{given('region', region)}: four finite numbers, west east south north in degrees")
    width = region_width((west, east))
    if west > east and width > 180.0:
        raise ValueError(f"{given('region', region)}: west {west:g} lies east of east {east:g}; across the "
                         f"dateline that is a {width:g}-degree band: for the {360 - width:g}-degree band between them "
                         f"give {given('region', (east, west, south, north))}, for the wide band "
                         f"{given('region', (west, east + 360, south, north))}")
    return west, east, south, north


def _meridian_crossed(west: float, width: float) -> str:
    """Returns " across the dateline" or " across 0 degrees" (a 0..360 region across Greenwich) when the band of
    `width` degrees eastward from `west` crosses it, else "" (a west in 0..360 and an east in -180..180)."""
    for meridian, name in ((180.0, "the dateline"), (0.0, "0 degrees")):
        if 0.0 < (meridian - west) % 360.0 < width:
            return f" across {name}"
    return ""


def _period_seconds(period) -> tuple[float, float] | None:
    """Returns a period as (start, end) seconds since 1970-01-01T00:00:00Z, None for None. Each date is an ISO 8601
    string, a numpy.datetime64, a pandas.Timestamp, a datetime or date (each written as ISO 8601 and read by
    lagda.io.physical.parse_time; with a time zone, in UTC) or seconds since 1970-01-01T00:00:00Z.

    Raises
    ------
    ValueError
        not two dates, or a date that is none of these.
    """
    if period is None:
        return None
    if isinstance(period, (str, bytes)) or not hasattr(period, "__len__") or len(period) != 2:
        raise ValueError(f"{given('period', period)}: two dates, the first and last map time (e.g. "
                         f"{given('period', ('2025-03-01', '2025-03-31'))})")

    def seconds(when) -> float:
        try:
            if isinstance(when, numbers.Real) and not isinstance(when, bool):
                if np.isfinite(when):
                    return float(when)
            else:
                return parse_time(str(when))  # str() of datetime64, Timestamp and datetime is ISO 8601
        except ValueError:  # not ISO 8601, or a year pandas cannot hold
            pass
        raise ValueError(f"{given('period', period)}: {str(when)!r} is not a date (ISO 8601 such as '2025-03-01', "
                         "a numpy.datetime64, a pandas.Timestamp, a datetime, or seconds since 1970)")

    return seconds(period[0]), seconds(period[1])


@dataclasses.dataclass(frozen=True)
class MapSettings:
    """What a map is made of (every field is part of what a resume compares).

    Attributes
    ----------
    region
        (west, east, south, north) degrees; west > east is the band eastward from west across the
        dateline when that band is at most 180 degrees wide (`(170, -170, ...)`: 20 degrees; a note says so),
        and refused when wider (`(-37, -41, ...)`: write `(-41, -37, ...)`, or `(-37, 319, ...)` for the wide
        band); None: the extent of the archive's fixes, which `map_archive` finds and records
        (archive.archive_extent).
    period
        (start, end), each an ISO 8601 string ("2025-03-01"), a numpy.datetime64, a pandas.Timestamp, a
        datetime or seconds since 1970-01-01T00:00:00Z; kept as seconds (UTC); None: from the first to the last
        fix, likewise.
    resolution
        cell size in degrees (longitude and latitude).
    cadence_s
        seconds between map times (default: a day).
    tile_deg
        tile height in degrees of latitude; a tile is about as wide in distance (lagda.mapping.tiles).
    halo_deg
        how far each tile's box reaches beyond its core on every side, in degrees of latitude (and the
        same distance in longitude): the fixes in the box inform the tile, whose field fades to 0 across the
        halo where it is blended with its neighbours'.
    window_days
        each tile's time window, days.
    step_days
        the step between the starts of consecutive windows, days.
    k_max
        the tile basis's circular Fourier modes, up to `k_max` per box side.
    degree
        the tile basis's Legendre polynomial degree in time.
    keep_undrogued
        keep fixes with drogue_status 0.
    local_gp
        add to each tile's field a space-time Gaussian process of what the basis leaves out at the
        drifters (lagda.assimilation.local_gp), fitted per tile; without it that velocity is the error model's
        std.
    land_mask
        leave the cells with no sea in the GLOBE 1-km land mask NaN (lagda.io.land); the map's
        `sea_area_fraction` is written either way.
    withhold
        the fraction of the drifters left out of the map and checked against it once it is written
        (lagda.mapping.check: the same drifters on every run); 0: every drifter mapped.
    low_pass
        average each drifter segment's positions over its local inertial period and two tidal periods
        before the map is made (lagda.io.lowpass): the map is of the flow varying over days, without the
        inertial oscillations and tides that hourly fixes hold.
    method
        the name of each tile's method, a key of lagda.mapping.methods.registry.TILE_METHODS: "objective"
        (each tile an objective map with the archive's own covariance: lagda.mapping.methods.objective; far
        from the drifters the prior) or "basis" (each tile the `linear` posterior in a Fourier-Legendre basis
        of its box with a local GP: lagda.mapping.methods.basis; k_max, degree and local_gp are its settings).
    background
        the path of a gridded velocity or sea surface height product (lagda.io.background) taken as
        the prior mean of a method that takes one (the "objective" method), or None for a prior mean of zero.

    Raises
    ------
    ValueError
        one line naming the value refused, as the user gave it (`resolution=0` in Python, `--resolution
        0` on the command line: lagda.arguments): resolution, cadence_s, tile_deg, halo_deg or
        window_days not positive, step_days not in (0, window_days], k_max < 1 or degree < 0; a region not of
        four numbers, its latitudes outside -80 <= south < north <= 80, or a west east of its east by over 180
        degrees; a period not of two dates, or one that does not end after it starts; withhold outside [0, 1);
        an unknown method, or a background with a method that takes none (basis).

    Examples
    --------
    >>> s = MapSettings(region=(-60, -20, 20, 60), period=("2025-01-01", "2025-01-31"))
    >>> s.period  # seconds since 1970-01-01T00:00:00Z
    (1735689600.0, 1738281600.0)
    >>> grid = s.grid()  # cells of 0.25 degree, daily
    >>> len(grid.days), len(grid.lat), len(grid.lon)
    (31, 160, 160)
    >>> MapSettings(region=(170, -170, 30, 40)).region_note()[:63]
    'region: west 170 > east -170, read as the 20-degree band eastwa'
    """

    region: tuple[float, float, float, float] | None = None
    period: tuple[float, float] | None = None
    resolution: float = 0.25
    cadence_s: float = DAY_S
    tile_deg: float = 6.0
    halo_deg: float = 1.5
    window_days: float = 30.0
    step_days: float = 15.0
    k_max: float = 8.0
    degree: int = 3
    keep_undrogued: bool = False
    local_gp: bool = True
    land_mask: bool = True
    withhold: float = 0.0
    low_pass: bool = True
    method: str = "objective"
    background: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "region", _region_degrees(self.region))  # frozen: each set once, here
        object.__setattr__(self, "period", _period_seconds(self.period))
        for name, value, ok, needs in (("resolution", self.resolution, self.resolution > 0, "positive"),
                                       ("cadence_s", self.cadence_s, self.cadence_s > 0, "positive (seconds)"),
                                       ("k_max", self.k_max, self.k_max >= 1, "at least 1"),
                                       ("degree", self.degree, self.degree >= 0, "at least 0"),
                                       ("tile_deg", self.tile_deg, self.tile_deg > 0, "positive"),
                                       ("halo_deg", self.halo_deg, self.halo_deg > 0, "positive"),
                                       ("window_days", self.window_days, self.window_days > 0, "positive"),
                                       ("step_days", self.step_days, 0 < self.step_days <= self.window_days,
                                        f"positive and at most the window, {self.window_days:g} days")):
            if not ok:
                raise ValueError(f"{given(name, value)}: must be {needs}")
        if self.method not in TILE_METHODS:
            raise ValueError(f"{given('method', self.method)}: one of {', '.join(TILE_METHODS)}")
        if self.background is not None and not TILE_METHODS[self.method].takes_background:
            takers = " or ".join(name for name, method in TILE_METHODS.items() if method.takes_background)
            raise ValueError(f"{given('background', self.background)}: the prior mean of the {takers} method, not "
                             f"with {given('method', self.method)}")
        check_extent(self.region, self.period)  # before the archive is read
        if not 0.0 <= self.withhold < 1.0:
            raise ValueError(f"{given('withhold', self.withhold)}: the fraction of drifters to withhold must be in "
                             "[0, 1)")

    def region_note(self) -> str:
        """Returns the note on a region whose west lies east of its east (read across the dateline), "" for
        another region or none."""
        if self.region is None or self.region[0] <= self.region[1]:
            return ""
        west, east, south, north = self.region
        width = region_width(self.region)
        return (f"region: west {west:g} > east {east:g}, read as the {width:g}-degree band eastward from {west:g}"
                f"{_meridian_crossed(west, width)} to {east:g} (the {360 - width:g}-degree band from "
                f"{east:g} to {west:g} is {given('region', (east, west, south, north))})")

    def grid(self) -> Grid:
        """Returns the map's cells (centres) and times (region and period given or found)."""
        if self.region is None or self.period is None:
            raise ValueError("the map's grid needs its region and period (map_archive finds them in the archive)")
        west, _, south, north = self.region
        nx = max(1, int(round(region_width(self.region) / self.resolution)))
        ny = max(1, int(round((north - south) / self.resolution)))
        days = np.arange(self.period[0], self.period[1] + 1e-6, self.cadence_s)
        return Grid(west + self.resolution * (np.arange(nx) + 0.5), south + self.resolution * (np.arange(ny) + 0.5),
                    days)

    def tiles(self) -> list[Tile]:
        """Returns the map's tiles (lagda.mapping.tiles.tile_layout of its region, period, tile size, halo and
        windows), region and period given or found."""
        return tile_layout(self.region, self.period, self.tile_deg, self.halo_deg, self.window_days, self.step_days)

    def tile_method(self) -> TileMethod:
        """Returns a new object of the tile method these settings name (lagda.mapping.methods.registry), built
        from them.

        Examples
        --------
        >>> MapSettings(method="basis").tile_method().name
        'basis'
        """
        return TILE_METHODS[self.method](self)
