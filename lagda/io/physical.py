"""Physical units: the mapping between real drifter coordinates and the model's periodic domain.

The model lives on the torus [0, 1)^2 with nondimensional time (docs/design/forward-model.md,
"The flow"). Real tracks carry longitude/latitude in degrees (or projected x/y in metres) and CF
times. `Mapping` takes them there and back:

- **Box and projection.** A box [west, east] x [south, north] is mapped onto the unit square
  through the local tangent plane at the box centre (lon_c, lat_c), in its equirectangular
  form: X = R cos(lat_c) (lon - lon_c), Y = R (lat - lat_c) (angles in radians, R the mean
  Earth radius), so that x = (lon - west) / (east - west), y = (lat - south) / (north - south).
  The box's sides measure L_x = R cos(lat_c) (east - west) and L_y = R (north - south) metres.
  For projected x/y in metres the box is given in metres and the map is the same affine one.
- **Time.** t = (seconds since the time origin) / T, with T (`time_scale_s`) the seconds per
  model time unit.
- **Fields.** A model velocity (u, v) in domain lengths per model time is (u L_x / T, v L_y / T)
  m/s on the plane; the eastward velocity on the sphere is the plane's times cos(lat) / cos(lat_c)
  (a drifter's longitude changes by u_X / (R cos(lat_c)) per second, whatever its latitude),
  the northward one is exact. psi is the plane's streamfunction, psi_model L_x L_y / T in m^2/s.

When a file does not say which box and time scale were used, `infer_mapping` infers them:
the box is the tracks' extent on the tangent plane widened by `BOX_MARGIN` of its larger side
on every side and made square (the model's prior is isotropic), the time origin is the first
observation, and T maps the observation window onto the presets' window (t_final = 0.1),
over which the prior's RMS speed of 10 moves a drifter about one box length. `Mapping.notes` says in
two lines (the box; the time) what was inferred and how, in km and days; the result file keeps them and the
command prints them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import numpy as np

EARTH_RADIUS_M = 6_371_008.8  # mean Earth radius (IUGG), metres
BOX_MARGIN = 0.1  # inferred box: the tracks' extent plus this fraction of its larger side on every side
MODEL_WINDOW = 0.1  # inferred time scale: the observation window maps onto the presets' t_final
EPOCH = np.datetime64("1970-01-01T00:00:00", "s")
TIME_UNITS = "seconds since 1970-01-01T00:00:00Z"  # how lagda writes physical times
ATTR_PREFIX = "lagda_mapping_"


@dataclasses.dataclass(frozen=True)
class Mapping:
    """The map between physical track coordinates and the model's torus (module docstring).

    Attributes
    ----------
    box
        (west, east, south, north): degrees for "lonlat", metres for "projected".
    coordinates
        "lonlat" (longitude/latitude, degrees) or "projected" (x/y, metres).
    time_origin
        seconds since 1970-01-01T00:00:00Z of model time t = 0.
    time_scale_s
        seconds per model time unit (T).
    notes
        the box, the time origin and time unit, what was inferred and how (`infer_mapping`), one line each.
    inferred
        which of "box", "time_origin", "time_scale" were inferred from the tracks (not given, not stored).
    """

    box: tuple[float, float, float, float]
    coordinates: Literal["lonlat", "projected"]
    time_origin: float
    time_scale_s: float
    notes: tuple[str, ...] = ()
    inferred: tuple[str, ...] = ()

    def __post_init__(self):
        west, east, south, north = self.box
        if self.coordinates not in ("lonlat", "projected"):
            raise ValueError(f"mapping coordinates {self.coordinates!r} is not 'lonlat' or 'projected'")
        if not (np.all(np.isfinite(self.box)) and east > west and north > south):
            raise ValueError(f"box {tuple(float(b) for b in self.box)} must have west < east and south < north")
        if self.coordinates == "lonlat" and not (-90 < south and north < 90 and east - west <= 360):
            raise ValueError(f"box {tuple(float(b) for b in self.box)}: latitudes must lie in (-90, 90), width <= 360")
        if not (np.isfinite(self.time_scale_s) and self.time_scale_s > 0):
            raise ValueError(f"time scale {self.time_scale_s!r} s must be positive")

    @property
    def centre(self) -> tuple[float, float]:
        """Returns the box centre (lon_c, lat_c), or (x_c, y_c) in metres."""
        west, east, south, north = self.box
        return 0.5 * (west + east), 0.5 * (south + north)

    @property
    def lengths_m(self) -> tuple[float, float]:
        """Returns the box's side lengths (L_x, L_y) in metres on the tangent plane."""
        west, east, south, north = self.box
        if self.coordinates == "projected":
            return east - west, north - south
        scale = EARTH_RADIUS_M * np.pi / 180
        return float(scale * np.cos(np.deg2rad(self.centre[1])) * (east - west)), float(scale * (north - south))

    def to_model(self, a, b) -> tuple[np.ndarray, np.ndarray]:
        """Returns model positions (x, y) in domain lengths of lon/lat (or projected x/y) `a`, `b`."""
        west, east, south, north = self.box
        return (np.asarray(a, np.float64) - west) / (east - west), (np.asarray(b, np.float64) - south) / (north - south)

    def from_model(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Returns lon/lat (or projected x/y) of model positions `x`, `y` (the inverse of `to_model`)."""
        west, east, south, north = self.box
        return west + np.asarray(x, np.float64) * (east - west), south + np.asarray(y, np.float64) * (north - south)

    def time_to_model(self, seconds) -> np.ndarray:
        """Returns model time t of `seconds` since 1970-01-01T00:00:00Z."""
        return (np.asarray(seconds, np.float64) - self.time_origin) / self.time_scale_s

    def time_from_model(self, t) -> np.ndarray:
        """Returns seconds since 1970-01-01T00:00:00Z of model time `t`."""
        return self.time_origin + np.asarray(t, np.float64) * self.time_scale_s

    def velocity_factors(self, b) -> tuple[np.ndarray, np.ndarray]:
        """Returns the m/s per model velocity unit of (u, v) at latitudes (or projected y) `b`, broadcast.

        u: L_x / T cos(lat) / cos(lat_c) (eastward on the sphere); v: L_y / T (northward).
        """
        lx, ly = self.lengths_m
        b = np.asarray(b, np.float64)
        east = np.ones_like(b)
        if self.coordinates == "lonlat":
            east = np.cos(np.deg2rad(b)) / np.cos(np.deg2rad(self.centre[1]))
        return lx / self.time_scale_s * east, np.full_like(b, ly / self.time_scale_s)

    @property
    def psi_factor(self) -> float:
        """Returns the m^2/s per model streamfunction unit, L_x L_y / T."""
        lx, ly = self.lengths_m
        return lx * ly / self.time_scale_s

    @property
    def max_scale_error(self) -> float:
        """Returns max |cos(lat) / cos(lat_c) - 1| over the box: how far plane and sphere distances differ."""
        if self.coordinates == "projected":
            return 0.0
        lat = np.array(self.box[2:])
        return float(np.max(np.abs(np.cos(np.deg2rad(lat)) / np.cos(np.deg2rad(self.centre[1])) - 1)))

    def describe(self) -> str:
        """Returns one line: the box, its size in km, the time origin and the model's time unit in days.

        >>> Mapping((-42.0, -36.0, 32.0, 37.0), "lonlat", 0.0, 8.64e6).describe()
        'box lon -42..-36, lat 32..37 (550 x 556 km), from 1970-01-01T00:00:00Z, model time unit 100 days'
        """
        return (f"{self.box_text()}, from {iso_time(self.time_origin)}, model time unit "
                f"{self.time_scale_s / 86400:.4g} days")

    def box_text(self) -> str:
        """Returns "box lon W..E, lat S..N (Lx x Ly km)" (x, y in metres for projected coordinates)."""
        west, east, south, north = self.box
        lx, ly = self.lengths_m
        a, b, unit = ("lon", "lat", "") if self.coordinates == "lonlat" else ("x", "y", " m")
        return (f"box {a} {west:.4g}..{east:.4g}, {b} {south:.4g}..{north:.4g}{unit} ({lx / 1e3:,.0f} x "
                f"{ly / 1e3:,.0f} km)")

    def attrs(self) -> dict:
        """Returns the mapping as netCDF global attributes (`from_attrs` reads them back)."""
        return {
            ATTR_PREFIX + "coordinates": self.coordinates,
            ATTR_PREFIX + "box": np.asarray(self.box, np.float64),
            ATTR_PREFIX + "box_units": "degrees" if self.coordinates == "lonlat" else "m",
            ATTR_PREFIX + "time_origin": iso_time(self.time_origin),
            ATTR_PREFIX + "time_scale_s": float(self.time_scale_s),
            ATTR_PREFIX + "projection": (
                "x = (lon - west) / (east - west), y = (lat - south) / (north - south): the equirectangular local "
                f"tangent plane at the box centre, Earth radius {EARTH_RADIUS_M} m; t = (time - time_origin) / "
                "time_scale_s"
                if self.coordinates == "lonlat" else
                "x = (x_m - west) / (east - west), y = (y_m - south) / (north - south); t = (time - time_origin) / "
                "time_scale_s"),
            ATTR_PREFIX + "notes": json.dumps(list(self.notes)),
        }

    @classmethod
    def from_attrs(cls, attrs) -> "Mapping | None":
        """Returns the mapping stored in netCDF attributes by `attrs()`, or None when there is none.

        Raises
        ------
        ValueError
            if the attributes are present but inconsistent.
        """
        if ATTR_PREFIX + "box" not in attrs:
            return None
        try:
            box = tuple(float(b) for b in np.ravel(attrs[ATTR_PREFIX + "box"]))
            origin = parse_time(str(attrs[ATTR_PREFIX + "time_origin"]))
            mapping = cls(box, str(attrs[ATTR_PREFIX + "coordinates"]), origin,
                          float(attrs[ATTR_PREFIX + "time_scale_s"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"inconsistent {ATTR_PREFIX}* attributes ({error})") from None
        return mapping


def iso_time(seconds: float) -> str:
    """Returns ISO 8601 UTC text ("...Z") of `seconds` since 1970-01-01T00:00:00Z, to the second."""
    return str(EPOCH + np.timedelta64(int(round(float(seconds))), "s")) + "Z"


def parse_time(text: str) -> float:
    """Returns seconds since 1970-01-01T00:00:00Z of an ISO 8601 datetime (a trailing Z or offset allowed).

    Raises
    ------
    ValueError
        if `text` is not an ISO 8601 date or datetime.
    """
    import pandas as pd

    try:
        stamp = pd.Timestamp(text.strip())
    except (ValueError, TypeError):
        raise ValueError(f"{text!r} is not an ISO 8601 datetime") from None
    if stamp is pd.NaT:
        raise ValueError(f"{text!r} is not an ISO 8601 datetime")
    stamp = stamp.tz_convert("UTC").tz_localize(None) if stamp.tzinfo is not None else stamp
    return float((stamp - pd.Timestamp(0)).total_seconds())


def unwrap_longitudes(lons: list, reference: float | None = None) -> list:
    """Returns each track's longitudes continuous (no jump at +-180), all near one reference.

    Every longitude is first brought within 180 degrees of `reference`, then each track is unwrapped
    along its valid fixes, so tracks across the date line stay continuous. Without a reference (the
    first finite longitude is one), all are then shifted by whole turns so that the middle of their
    extent lies in [-180, 180), or just east of it across the date line: a file in 0..360 degrees across
    Greenwich reads as -3..6, not 357..366, and one across the date line as 178..183 (east of it above
    180) whichever convention it was written in.
    """
    finite = [lon[np.isfinite(lon)] for lon in map(np.asarray, lons)]
    given = reference is not None
    if reference is None:
        reference = next((float(f[0]) for f in finite if len(f)), 0.0)
    out = []
    for lon in lons:
        lon = np.array(lon, np.float64)
        ok = np.isfinite(lon)
        near = reference + (lon[ok] - reference + 180.0) % 360.0 - 180.0
        lon[ok] = np.unwrap(near, period=360.0) if len(near) else near
        out.append(lon)
    values = np.concatenate([lon[np.isfinite(lon)] for lon in out] or [np.zeros(0)])
    if not given and len(values):
        middle = 0.5 * (values.min() + values.max())
        turn = 360.0 * np.floor((middle + 180.0) / 360.0)
        turn -= 360.0 * (values.min() - turn < -180.0)  # across the date line: east of it above 180, not below -180
        out = [lon - turn for lon in out]
    return out


def infer_mapping(positions: list, seconds: list, coordinates: Literal["lonlat", "projected"],
                  box=None, time_scale_s: float | None = None, time_origin: float | None = None) -> Mapping:
    """Returns the mapping of tracks, inferring what is not given (module docstring); notes say what.

    Parameters
    ----------
    positions : list of array_like
        Per track `(obs, 2)`: lon/lat in degrees (longitudes unwrapped) or x/y in metres; NaN = missing.
    seconds : list of array_like
        Per track `(obs,)`: seconds since 1970-01-01T00:00:00Z; NaN = missing.
    coordinates : {"lonlat", "projected"}
        The units of `positions`.
    box : tuple of float, optional
        `(west, east, south, north)` in the units of `positions`; inferred from the tracks' extent if None.
    time_scale_s : float, optional
        Seconds per model time unit T; if None, the observation window maps onto model time `MODEL_WINDOW`.
    time_origin : float, optional
        Model time t = 0 in seconds since 1970-01-01T00:00:00Z; the first observation if None.

    Returns
    -------
    Mapping
        With `inferred` naming what was inferred and `notes` one line per inference.

    Raises
    ------
    ValueError
        If there is no valid observation to infer from, or a single observation time and no `time_scale_s`.

    Examples
    --------
    A 10-day track in metres, in a given 10 km box: the time origin and time scale are inferred.

    >>> import numpy as np
    >>> day = 86400.0
    >>> mapping = infer_mapping([np.array([[0.0, 0.0], [2500.0, -5000.0]])], [np.array([0.0, 10 * day])],
    ...                         "projected", box=(-5e3, 5e3, -5e3, 5e3))
    >>> mapping.inferred
    ('time_origin', 'time_scale')
    >>> mapping.time_scale_s / day  # the 10-day window is model time 0.1
    100.0
    >>> mapping.to_model(np.array([0.0, 2500.0]), np.array([0.0, -5000.0]))  # the centre, then the south edge
    (array([0.5 , 0.75]), array([0.5, 0. ]))
    """
    xy = np.concatenate([np.asarray(p, np.float64).reshape(-1, 2) for p in positions] or [np.zeros((0, 2))])
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    t = np.concatenate([np.asarray(s, np.float64).ravel() for s in seconds] or [np.zeros(0)])
    t = t[np.isfinite(t)]
    if not len(xy) or not len(t):
        raise ValueError("the tracks hold no valid position and time")
    inferred = []
    if box is None:
        box, inferred = _infer_box(xy, coordinates), inferred + ["box"]
    if time_origin is None:
        time_origin, inferred = float(t.min()), inferred + ["time_origin"]
    window = float(t.max() - time_origin)
    if time_scale_s is None:
        if window <= 0:
            raise ValueError("the tracks have a single observation time: pass --time-scale SECONDS")
        time_scale_s, inferred = window / MODEL_WINDOW, inferred + ["time_scale"]
    mapping = Mapping(tuple(float(b) for b in box), coordinates, float(time_origin), float(time_scale_s))
    if "box" in inferred and mapping.max_scale_error > MAX_INFERRED_SCALE_ERROR:
        lx, ly = mapping.lengths_m
        west, east, south, north = mapping.box
        off = 100 * mapping.max_scale_error
        raise ValueError(f"the tracks need a box of {lx / 1e3:,.0f} x {ly / 1e3:,.0f} km (lon {west:.4g}..{east:.4g}, "
                         f"lat {south:.4g}..{north:.4g}): a plane that large is off the sphere's scale by up to "
                         f"{off:.0f}%; "
                         "`lagda map` maps a region of any size tile by tile, or give each region's drifters a file "
                         "of their own (--box assimilates a box anyway)")
    notes = _mapping_notes(mapping, inferred, window)
    if mapping.max_scale_error > 0.01:
        notes.append("the box's flat map is off the sphere's east-west distances by up to "
                     f"{100 * mapping.max_scale_error:.1f}% at its north and south edges")
    return dataclasses.replace(mapping, notes=tuple(notes), inferred=tuple(inferred))


MAX_INFERRED_SCALE_ERROR = 0.5  # an inferred box whose plane is further off the sphere's scale is refused


def _mapping_notes(mapping: Mapping, inferred: list, window_s: float) -> list[str]:
    """Returns the two lines on a mapping: its box (and, inferred, how); the time origin and the model's time unit in
    days (and, inferred, how); each with the option that sets it."""
    box = mapping.box_text() + (f": the drifters' extent plus {BOX_MARGIN:.0%} of it on each side, made square "
                                "(--box sets it)" if "box" in inferred else "")
    start = ("from the first fix, " if "time_origin" in inferred else "from ") + iso_time(mapping.time_origin)
    unit = f"model time unit {mapping.time_scale_s / 86400:.4g} days"
    if "time_scale" in inferred:
        unit += f": {1 / MODEL_WINDOW:g} times the {window_s / 86400:.4g}-day window (--time-scale sets it)"
    return [box, f"time {start}; {unit}"]


def box_of_size(centre, lengths_m, coordinates: Literal["lonlat", "projected"]) -> tuple[float, float, float, float]:
    """Returns the box (west, east, south, north) of side lengths (L_x, L_y) metres on the tangent plane at `centre`.

    Parameters
    ----------
    centre
        (lon_c, lat_c) degrees, or (x_c, y_c) metres for projected coordinates.
    """
    half = 0.5 * np.asarray(lengths_m, np.float64)
    if coordinates == "lonlat":
        half = half / (EARTH_RADIUS_M * np.pi / 180 * np.array([np.cos(np.deg2rad(centre[1])), 1.0]))
    return (float(centre[0] - half[0]), float(centre[0] + half[0]),
            float(centre[1] - half[1]), float(centre[1] + half[1]))


def _infer_box(xy: np.ndarray, coordinates: str) -> tuple[float, float, float, float]:
    """Returns the square box (west, east, south, north) around `xy` `(n, 2)` with the margin."""
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    centre = 0.5 * (lo + hi)
    # metres per unit of each coordinate on the tangent plane at the centre
    per = np.ones(2)
    if coordinates == "lonlat":
        per = EARTH_RADIUS_M * np.pi / 180 * np.array([np.cos(np.deg2rad(centre[1])), 1.0])
    extent = (hi - lo) * per
    side = max(float(extent.max()), 1e3 if coordinates == "lonlat" else 1.0) * (1 + 2 * BOX_MARGIN)
    half = 0.5 * side / per
    if coordinates == "lonlat" and (centre[1] + half[1] >= 90 or centre[1] - half[1] <= -90):
        raise ValueError("the inferred box would reach a pole: pass --box")
    return (float(centre[0] - half[0]), float(centre[0] + half[0]),
            float(centre[1] - half[1]), float(centre[1] + half[1]))


def physical_fields(fields: dict, mapping: Mapping, y) -> dict:
    """Returns gridded model fields `{psi_mean, u_std, ...}` `(..., y, x)` in physical units (lagda.io.physical).

    psi times L_x L_y / T (m^2/s); u times L_x / T cos(lat) / cos(lat_c) (eastward, m/s); v times
    L_y / T (northward, m/s); a std scales like its mean.

    Parameters
    ----------
    fields
        arrays whose last two axes are (y, x) of the model grid
    mapping
        the track mapping
    y
        model grid y `(y,)` in domain lengths.
    """
    lat = mapping.from_model(np.zeros_like(np.asarray(y, np.float64)), y)[1]
    fu, fv = mapping.velocity_factors(lat)
    factor = {"psi": mapping.psi_factor, "u": fu[:, None], "v": fv[:, None]}
    return {key: np.asarray(value) * factor[key.split("_")[0]] for key, value in fields.items()}
