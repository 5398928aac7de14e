"""The background of `lagda map --background`: a gridded ocean product read and interpolated to scattered points.

The product lies on (time, lat, lon), in a netCDF file or a Zarr store. It gives either velocities (CF eastward and
northward sea water velocity, DUACS ugos/vgos, model uo/vo, ...) or a sea surface height eta (adt, sla, zos, ssh),
from which the surface geostrophic velocity on the sphere is

    u = -(g / f) d(eta)/dy,   v = (g / f) d(eta)/dx,   dx = R cos(lat) dlon,   dy = R dlat,   f = 2 Omega sin(lat),

in centred differences (one-sided next to land and at the grid's edges), left NaN within `EQUATOR_BAND_DEG` of the
equator, where f vanishes. `Background.velocity` interpolates linearly in time between the product's times and
bilinearly in space, reading only the time slices, rows and columns its points need.

Examples
--------
>>> import os, tempfile
>>> import numpy as np, xarray as xr
>>> east = xr.DataArray(np.full((1, 3, 4), 10.0), dims=("time", "lat", "lon"), attrs={"units": "cm/s"})
>>> north = xr.DataArray(np.zeros((1, 3, 4)), dims=("time", "lat", "lon"), attrs={"units": "cm/s"})
>>> coords = {"time": [np.datetime64("2020-01-01")], "lat": [40.0, 41.0, 42.0], "lon": [0.0, 1.0, 2.0, 3.0]}
>>> path = os.path.join(tempfile.mkdtemp(), "background.nc")
>>> xr.Dataset({"uo": east, "vo": north}, coords).to_netcdf(path)
>>> background = Background.open(path)
>>> background.extent[:4]
(0.0, 3.0, 40.0, 42.0)
>>> background.velocity([1.5, 5.0], [41.0, 41.0], [1577836800.0, 1577836800.0])  # the second is east of it
(array([0.1, nan]), array([ 0., nan]))
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Literal, NamedTuple

import numpy as np

from lagda.arguments import given
from lagda.io.physical import EARTH_RADIUS_M, iso_time

GRAVITY = 9.81  # m/s^2
OMEGA = 7.2921159e-5  # the Earth's rotation rate, rad/s
EQUATOR_BAND_DEG = 5.0  # geostrophic velocities are NaN at |lat| below this (f -> 0)
SINGLE_TIME_HALF_S = 43200.0  # a product of one time answers within half a day of it
POINTS_AT_ONCE = 1 << 19  # points interpolated in one go: bounds the temporaries (about 4 MB each)

# (eastward standard name, northward standard name, anomaly), in order of preference
VELOCITY_STANDARD_NAMES = (
    ("surface_geostrophic_eastward_sea_water_velocity", "surface_geostrophic_northward_sea_water_velocity", False),
    ("eastward_sea_water_velocity", "northward_sea_water_velocity", False),
    ("surface_geostrophic_eastward_sea_water_velocity_assuming_mean_sea_level_for_geoid",
     "surface_geostrophic_northward_sea_water_velocity_assuming_mean_sea_level_for_geoid", True),
    ("surface_geostrophic_eastward_sea_water_velocity_assuming_sea_level_for_geoid",
     "surface_geostrophic_northward_sea_water_velocity_assuming_sea_level_for_geoid", True),
)
VELOCITY_NAMES = (("ugos", "vgos", False), ("uo", "vo", False), ("u", "v", False),
                  ("eastward_velocity", "northward_velocity", False), ("ugosa", "vgosa", True))
HEIGHT_STANDARD_NAMES = (("sea_surface_height_above_geoid", False), ("sea_surface_height", False),
                         ("sea_surface_height_above_sea_level", True),
                         ("sea_surface_height_above_mean_sea_level", True))
HEIGHT_NAMES = (("adt", False), ("zos", False), ("ssh", False), ("sla", True))
VELOCITY_UNITS = {"m s-1": 1.0, "m/s": 1.0, "cm s-1": 0.01, "cm/s": 0.01}  # to m/s
HEIGHT_UNITS = {"m": 1.0, "cm": 0.01}  # to m
LON_NAMES = ("lon", "longitude", "x", "nav_lon")
LAT_NAMES = ("lat", "latitude", "y", "nav_lat")
TIME_NAMES = ("time", "time_counter", "t")


class _Variables(NamedTuple):
    """What the file's velocities are made of: `names` (eastward, northward) or (height,), times `scale` to SI."""
    kind: Literal["velocity", "height"]
    names: tuple[str, ...]
    scale: float
    error_kind: Literal["velocity", "height"] | None
    error_names: tuple[str, ...]
    error_scale: float


class _Grid(NamedTuple):
    """The product's axes sorted increasing (`*_index`: their rows, columns and times in the file)."""
    lon: np.ndarray  # (x,) degrees, increasing, unwrapped from the westmost
    lon_index: np.ndarray
    lat: np.ndarray  # (y,) degrees, increasing
    lat_index: np.ndarray
    seconds: np.ndarray  # (time,) since 1970
    time_index: np.ndarray
    periodic: bool  # the longitudes go round the globe: the seam cell joins the last column to the first
    half_step: float  # seconds the period extends by at either end
    dims: tuple[str | None, str, str]  # (time, lat, lon) dimension names; time None for a scalar time
    fixed: dict  # {other dimension: the index taken}


class _Window(NamedTuple):
    """The rows and columns of the grid one call reads: sorted indices, coordinates, file spans."""
    first_row: int
    first_col: int  # of the extended longitude axis (a periodic one repeats past the seam)
    lat: np.ndarray
    lon: np.ndarray  # unwrapped, increasing
    row_span: slice
    col_span: slice
    rows: np.ndarray  # into the file span
    cols: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)  # compared by identity: it holds arrays
class Background:
    """A gridded ocean product on (time, lat, lon) read as velocities at scattered points (module docstring).

    Open one with `Background.open`. It keeps the path and the grid, not the data: each call reads the slices
    it needs, so an instance is small and pickles (to Dask workers).

    Attributes
    ----------
    path
        the netCDF file or Zarr store.
    notes
        what was read and decided, one line each (variables, units, grid, period, geostrophy).
    extent
        (west, east, south, north, start, end): the box in degrees (the product's longitude convention;
        east = west + 360 for a global product) and the period in seconds since 1970-01-01T00:00:00Z where
        `velocity` answers (the product's times widened by half a time step, half a day for a single time).
    """

    path: str
    notes: tuple[str, ...]
    extent: tuple[float, float, float, float, float, float]
    _variables: _Variables = dataclasses.field(repr=False)
    _grid: _Grid = dataclasses.field(repr=False)

    @classmethod
    def open(cls, path) -> Background:
        """Returns the background of the product at `path` (netCDF, or a .zarr store): its variables and grid.

        Raises
        ------
        FileNotFoundError
            no file or folder at `path`.
        ValueError
            in one line, a file xarray cannot read, with no usable variable (naming those it has and
            those accepted), units not understood, no longitude, latitude or time coordinate, a curvilinear
            grid, fewer than two longitudes or latitudes, repeated coordinates.
        """
        path = os.fspath(path)
        with _open_dataset(path) as ds:
            variables, notes = _find_variables(ds, path)
            grid, grid_notes = _find_grid(ds, variables.names[0], path)
        west, east = grid.lon[0], grid.lon[0] + 360.0 if grid.periodic else grid.lon[-1]
        extent = (float(west), float(east), float(grid.lat[0]), float(grid.lat[-1]),
                  float(grid.seconds[0] - grid.half_step), float(grid.seconds[-1] + grid.half_step))
        notes = [f"background {path}: {notes[0]}", *grid_notes, *notes[1:]]
        if variables.kind == "height" and np.any(np.abs(grid.lat) < EQUATOR_BAND_DEG):
            notes.append(f"velocities left NaN within {EQUATOR_BAND_DEG:g} degrees of the equator, where f -> 0")
        return cls(path, tuple(notes), extent, variables, grid)

    @property
    def kind(self) -> Literal["velocity", "height"]:
        """Returns what the product gives: "velocity" (read as it is) or "height" (its geostrophic velocity)."""
        return self._variables.kind

    @property
    def has_error_std(self) -> bool:
        """Returns whether the product states its error (`error_std` answers arrays, not None)."""
        return self._variables.error_kind is not None

    def velocity(self, lon, lat, seconds) -> tuple[np.ndarray, np.ndarray]:
        """Returns the background velocity (u, v), float64 `(n,)` m/s eastward and northward, at the points.

        Linear in time between the product's times, bilinear in space. NaN outside the box, more than half a time
        step outside the period (half a day for a single time), and where a grid value the point needs is NaN
        (land; the equatorial band of a geostrophic velocity).

        Parameters
        ----------
        lon
            (n,) degrees east, any convention (-180..180 or 0..360, whatever the product's).
        lat
            (n,) degrees north.
        seconds
            (n,) seconds since 1970-01-01T00:00:00Z.

        Raises
        ------
        ValueError
            if the three do not have one shape `(n,)`.
        """
        u, v = self._interpolate(lon, lat, seconds, self._velocity_fields)
        return u, v

    def error_std(self, lon, lat, seconds) -> np.ndarray | None:
        """Returns the product's stated error std of one velocity component, float64 `(n,)` m/s, at the points, or
        None when the product states none.

        It is sqrt((err_u^2 + err_v^2) / 2) of the product's velocity errors (err_ugos, err_vgos), or the height
        error (err_sla, err_adt) carried through the same geostrophic differences, the errors of neighbouring
        values taken independent; interpolated as `velocity` is, NaN where it is.

        Parameters
        ----------
        lon, lat, seconds
            (n,) as for `velocity`.

        Raises
        ------
        ValueError
            if the three do not have one shape `(n,)`.
        """
        if self._variables.error_kind is None:
            return None
        return self._interpolate(lon, lat, seconds, self._error_fields)[0]

    def _velocity_fields(self, ds, time, window: _Window) -> tuple[np.ndarray, ...]:
        """Returns (u, v) m/s `(lat, lon)` on the window at the file's `time` index."""
        variables = self._variables
        values = [self._read(ds, name, time, window) * variables.scale for name in variables.names]
        if variables.kind == "height":
            return geostrophic_velocity(values[0], window.lon, window.lat)
        return tuple(values)

    def _error_fields(self, ds, time, window: _Window) -> tuple[np.ndarray]:
        """Returns (error std of one component,) m/s `(lat, lon)` on the window at the file's `time` index."""
        variables = self._variables
        errors = [self._read(ds, name, time, window) * variables.error_scale for name in variables.error_names]
        if variables.error_kind == "height":
            errors = _geostrophic_error(errors[0], window.lon, window.lat)
        return (np.sqrt(0.5 * (errors[0] ** 2 + errors[1] ** 2)),)

    def _read(self, ds, name: str, time, window: _Window) -> np.ndarray:
        """Returns float64 `(lat, lon)` of variable `name` on the window at the file's `time` index (fills NaN)."""
        from lagda.io.cf_time import without_fills

        time_dim, lat_dim, lon_dim = self._grid.dims
        where = {**self._grid.fixed, lat_dim: window.row_span, lon_dim: window.col_span}
        if time_dim is not None:
            where[time_dim] = int(time)
        values = without_fills(ds[name].isel(where).transpose(lat_dim, lon_dim).values)
        return values[np.ix_(window.rows, window.cols)]

    def _interpolate(self, lon, lat, seconds, fields) -> list[np.ndarray]:
        """Returns the `fields(ds, time, window)` interpolated to the points, one `(n,)` array each."""
        lon, lat, seconds = _points(lon, lat, seconds)
        grid = self._grid
        axis = np.append(grid.lon, grid.lon[0] + 360.0) if grid.periodic else grid.lon
        col, x_weight, inside = _locate(axis, grid.lon[0] + (lon - grid.lon[0]) % 360.0)
        row, y_weight, inside_y = _locate(grid.lat, lat)
        step, t_weight = _time_weights(grid.seconds, seconds)
        inside &= inside_y & (np.abs(seconds - np.clip(seconds, grid.seconds[0], grid.seconds[-1])) <= grid.half_step)
        valid = np.flatnonzero(inside)
        if valid.size == 0:
            return [np.full(lon.shape, np.nan) for _ in range(2)]
        window = _window(grid, row[valid], col[valid])
        row, col = row - window.first_row, col - window.first_col
        order = valid[np.argsort(step[valid], kind="stable")]
        steps = step[order]
        needed = np.union1d(steps[t_weight[order] < 1], steps[t_weight[order] > 0] + 1)
        out = None
        with _open_dataset(self.path) as ds:
            for k in needed:
                now = order[slice(*np.searchsorted(steps, [k, k + 1]))]
                before = order[slice(*np.searchsorted(steps, [k - 1, k]))]
                now, before = now[t_weight[now] < 1], before[t_weight[before] > 0]
                points = np.concatenate([now, before])
                weight = np.concatenate([1.0 - t_weight[now], t_weight[before]])
                values = fields(ds, grid.time_index[k], window)
                if out is None:
                    out = [np.where(inside, 0.0, np.nan) for _ in values]
                for first in range(0, len(points), POINTS_AT_ONCE):
                    at, part = points[first:first + POINTS_AT_ONCE], weight[first:first + POINTS_AT_ONCE]
                    for total, field in zip(out, values):
                        total[at] += part * _bilinear(field, row[at], col[at], y_weight[at], x_weight[at])
        return out


@functools.lru_cache(maxsize=2)
def open_background(path) -> Background:
    """Returns the product at `path` opened (`Background.open`: its variables and grid, no data read), once per
    process: `lagda map`'s tiles and `lagda assimilate` ask for it many times.

    Raises
    ------
    FileNotFoundError
        One line naming the option as the user gave it (`background='x.nc'`, `--background x.nc`): no such file.
    ValueError
        One line: a file this module cannot read (no velocity or height, units not understood, ...).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"{given('background', os.fspath(path))}: no such file or Zarr store")
    return Background.open(path)


def geostrophic_velocity(eta, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """Returns the surface geostrophic velocity (u, v), float64 `(lat, lon)` m/s, of sea surface height `eta`.

    u = -(g / f) d(eta)/dy, v = (g / f) d(eta)/dx on the sphere: dx = R cos(lat) dlon, dy = R dlat,
    f = 2 Omega sin(lat), R = EARTH_RADIUS_M, g = GRAVITY, Omega = OMEGA. The derivatives are centred (second order,
    on uneven spacing too) where both neighbours are finite, one-sided (first order) where one is (next to land, at
    the grid's edges), NaN where none is; u and v are NaN within EQUATOR_BAND_DEG of the equator.

    Parameters
    ----------
    eta
        (lat, lon) metres, NaN on land.
    lon
        (lon,) degrees, increasing (unwrapped across the seam).
    lat
        (lat,) degrees, increasing.

    Examples
    --------
    >>> import numpy as np
    >>> lon, lat = np.arange(0.0, 3.0), np.array([44.0, 45.0, 46.0])
    >>> eta = np.repeat(0.01 * lat[:, None], 3, axis=1)  # rising 1 cm per degree northward
    >>> u, v = geostrophic_velocity(eta, lon, lat)
    >>> print(f"{u[1, 1]:.4e} {v[1, 1]:.1f}")  # u = -(g / f) (0.01 m) / (111.2 km) at 45N
    -8.5549e-03 0.0
    """
    eta, lon, lat = (np.asarray(a, np.float64) for a in (eta, lon, lat))
    factor = GRAVITY / _coriolis(lat)[:, None] / (EARTH_RADIUS_M * np.pi / 180)
    u = -factor * _derivative(eta, lat, axis=0)
    v = factor * _derivative(eta, lon, axis=1) / np.cos(np.deg2rad(lat))[:, None]
    return u, v


def _coriolis(lat: np.ndarray) -> np.ndarray:
    """Returns f = 2 Omega sin(lat) `(lat,)` 1/s, NaN within EQUATOR_BAND_DEG of the equator."""
    return np.where(np.abs(lat) < EQUATOR_BAND_DEG, np.nan, 2 * OMEGA * np.sin(np.deg2rad(lat)))


def _stencils(values: np.ndarray, coord: np.ndarray, axis: int):
    """Returns the one-sided differences (backward, forward) of `values` along `axis` and the spacings (h1, h2)."""
    f = np.moveaxis(values, axis, -1)
    h = np.diff(coord)
    backward, forward = np.full(f.shape, np.nan), np.full(f.shape, np.nan)
    backward[..., 1:] = np.diff(f, axis=-1) / h
    forward[..., :-1] = backward[..., 1:]
    h1, h2 = np.append(np.nan, h), np.append(h, np.nan)
    return backward, forward, h1, h2


def _derivative(values: np.ndarray, coord: np.ndarray, axis: int) -> np.ndarray:
    """Returns d values / d coord along `axis`: centred where both neighbours are finite, else one-sided."""
    backward, forward, h1, h2 = _stencils(values, coord, axis)
    centred = (h2 * backward + h1 * forward) / (h1 + h2)  # second order on uneven spacing (np.gradient's)
    out = np.where(np.isfinite(centred), centred, np.where(np.isfinite(backward), backward, forward))
    return np.moveaxis(out, -1, axis)


def _derivative_std(std: np.ndarray, coord: np.ndarray, axis: int) -> np.ndarray:
    """Returns the std of `_derivative` of values of independent errors `std` along `axis`."""
    f = np.moveaxis(std, axis, -1) ** 2
    backward, forward, h1, h2 = _stencils(std, coord, axis)  # only where they are finite matters
    before, after = np.full(f.shape, np.nan), np.full(f.shape, np.nan)
    before[..., 1:], after[..., :-1] = f[..., :-1], f[..., 1:]
    centred = (h2 ** 2 / (h1 * (h1 + h2)) ** 2 * before + ((h2 - h1) / (h1 * h2)) ** 2 * f
               + h1 ** 2 / (h2 * (h1 + h2)) ** 2 * after)
    variance = np.where(np.isfinite(centred), centred,
                        np.where(np.isfinite(backward), (before + f) / h1 ** 2, (after + f) / h2 ** 2))
    return np.moveaxis(np.sqrt(variance), -1, axis)


def _geostrophic_error(std: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> list[np.ndarray]:
    """Returns the error std (u, v) `(lat, lon)` m/s of `geostrophic_velocity` of a height of error `std` m."""
    factor = GRAVITY / np.abs(_coriolis(lat))[:, None] / (EARTH_RADIUS_M * np.pi / 180)
    return [factor * _derivative_std(std, lat, axis=0),
            factor * _derivative_std(std, lon, axis=1) / np.cos(np.deg2rad(lat))[:, None]]


def _points(lon, lat, seconds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the points as float64 `(n,)` arrays; raises ValueError quoting the shapes if they differ."""
    arrays = [np.asarray(a, np.float64) for a in (lon, lat, seconds)]
    shapes = [a.shape for a in arrays]
    if len(shapes[0]) != 1 or len(set(shapes)) != 1:
        raise ValueError(f"lon, lat, seconds must have one shape (n,): got {shapes[0]}, {shapes[1]}, {shapes[2]}")
    return tuple(arrays)


def _locate(axis: np.ndarray, values: np.ndarray):
    """Returns (cell, weight, inside): each value lies at `weight` of the way from axis[cell] to axis[cell + 1]."""
    cell = np.clip(np.searchsorted(axis, values, side="right") - 1, 0, len(axis) - 2)
    weight = (values - axis[cell]) / (axis[cell + 1] - axis[cell])
    return cell, weight, (values >= axis[0]) & (values <= axis[-1])


def _time_weights(times: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (step, weight): `seconds` lie `weight` of the way from times[step] to times[step + 1], clipped
    to the first and last times (weight 0 for a single time)."""
    if len(times) == 1:
        return np.zeros(seconds.shape, np.int64), np.zeros(seconds.shape)
    step = np.clip(np.searchsorted(times, seconds, side="right") - 1, 0, len(times) - 2)
    with np.errstate(invalid="ignore"):
        weight = np.clip((seconds - times[step]) / (times[step + 1] - times[step]), 0.0, 1.0)
    return step, np.nan_to_num(weight)


def _bilinear(field: np.ndarray, row, col, y_weight, x_weight) -> np.ndarray:
    """Returns `field` `(lat, lon)` bilinear at the points; a corner of weight 0 is not needed (its NaN is not)."""
    total = 0.0
    for dy, dx, weight in ((0, 0, (1 - y_weight) * (1 - x_weight)), (0, 1, (1 - y_weight) * x_weight),
                           (1, 0, y_weight * (1 - x_weight)), (1, 1, y_weight * x_weight)):
        total = total + np.where(weight > 0, weight * field[row + dy, col + dx], 0.0)
    return total


def _window(grid: _Grid, row: np.ndarray, col: np.ndarray) -> _Window:
    """Returns the window of the grid cells `row`, `col` (extended axis) and one more around (the derivatives)."""
    ny, nx = len(grid.lat), len(grid.lon)
    rows = np.arange(max(row.min() - 1, 0), min(row.max() + 2, ny - 1) + 1)
    if grid.periodic:
        cols = np.arange(col.min() - 1, col.max() + 3)
    else:
        cols = np.arange(max(col.min() - 1, 0), min(col.max() + 2, nx - 1) + 1)
    file_rows, file_cols = grid.lat_index[rows], grid.lon_index[cols % nx]
    return _Window(int(rows[0]), int(cols[0]), grid.lat[rows], grid.lon[cols % nx] + 360.0 * (cols // nx),
                   slice(int(file_rows.min()), int(file_rows.max()) + 1),
                   slice(int(file_cols.min()), int(file_cols.max()) + 1),
                   file_rows - file_rows.min(), file_cols - file_cols.min())


def _open_dataset(path: str):
    """Returns the xarray Dataset at `path`, lazily read, times not decoded; raises FileNotFoundError, ValueError."""
    import xarray as xr

    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or Zarr store")
    engine = "zarr" if os.path.isdir(path) or path.rstrip("/").endswith(".zarr") else None
    try:
        return xr.open_dataset(path, engine=engine, decode_times=False, decode_timedelta=False)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a netCDF file or Zarr store xarray can read ({error})") from None


def _match(ds, standard_name: str | None = None, name: str | None = None) -> str | None:
    """Returns the data variable of two or more dimensions with this standard name, or else this name (any case)."""
    for key, variable in ds.data_vars.items():
        if variable.ndim >= 2 and (str(variable.attrs.get("standard_name", "")).lower() == standard_name
                                   or str(key).lower() == name):
            return str(key)
    return None


def _find_pair(ds):
    """Returns (eastward, northward, anomaly) names of the file's velocities, or None."""
    for table, by_name in ((VELOCITY_STANDARD_NAMES, False), (VELOCITY_NAMES, True)):
        for east, north, anomaly in table:
            pair = [_match(ds, name=key) if by_name else _match(ds, standard_name=key) for key in (east, north)]
            if None not in pair:
                return pair[0], pair[1], anomaly
    return None


def _find_height(ds):
    """Returns (name, anomaly) of the file's sea surface height, or None."""
    for table, by_name in ((HEIGHT_STANDARD_NAMES, False), (HEIGHT_NAMES, True)):
        for key, anomaly in table:
            name = _match(ds, name=key) if by_name else _match(ds, standard_name=key)
            if name is not None:
                return name, anomaly
    return None


def _scale(ds, name: str, accepted: dict, path: str, notes: list) -> float:
    """Returns the factor to SI of `name`'s units attribute (SI assumed, and noted, without one)."""
    units = ds[name].attrs.get("units")
    if units is None:
        notes.append(f"{name} has no units attribute: read as {next(iter(accepted))}")
        return 1.0
    key = " ".join(str(units).lower().replace(".", " ").replace("**", "").replace("^", "").split())
    if key not in accepted:
        raise ValueError(f"{path}: {name} has units {units!r}; accepted: {', '.join(accepted)}")
    return accepted[key]


def _describe(ds, names, kind: str, units: str) -> str:
    """Returns "kind name, name (long name, units)" for a note."""
    first = ds[names[0]].attrs
    label = first.get("standard_name") or first.get("long_name")
    return f"{kind} {', '.join(names)} ({f'{label}, ' if label else ''}{units})"


def _find_variables(ds, path: str) -> tuple[_Variables, list[str]]:
    """Returns the variables to read and the notes (the first: what was read), or raises ValueError."""
    pair, height = _find_pair(ds), _find_height(ds)
    notes: list[str] = []
    if pair is None and height is None:
        raise ValueError(f"{path}: no velocity or sea surface height: it has {_inventory(ds)}; accepted: "
                         f"velocities {', '.join('/'.join(n[:2]) for n in VELOCITY_NAMES)} or of CF standard names "
                         f"such as {VELOCITY_STANDARD_NAMES[1][0]}, or a height "
                         f"{', '.join(n for n, _ in HEIGHT_NAMES)} or {HEIGHT_STANDARD_NAMES[0][0]}")
    if height is not None and (pair is None or (pair[2] and not height[1])):
        names, kind, anomaly, accepted = height[:1], "height", height[1], HEIGHT_UNITS
        if pair is not None:
            notes.append(f"{pair[0]}/{pair[1]} are anomalies: the velocities are computed from the full height "
                         f"{height[0]} instead")
    else:
        names, kind, anomaly, accepted = pair[:2], "velocity", pair[2], VELOCITY_UNITS
        if height is not None:
            notes.append(f"the file also has the height {height[0]}: its velocities {'/'.join(names)} are used "
                         "as they are")
    scale = _scale(ds, names[0], accepted, path, notes)
    if len(names) == 2 and _scale(ds, names[1], accepted, path, notes) != scale:
        raise ValueError(f"{path}: {names[0]} and {names[1]} have different units")
    units = ds[names[0]].attrs.get("units", next(iter(accepted)))
    what = "eastward, northward velocity" if kind == "velocity" else "sea surface height"
    notes.insert(0, _describe(ds, names, what, units))
    if kind == "height":
        notes.append(_geostrophy_note(names[0]))
    if anomaly:
        notes.append(f"{'/'.join(names)} {'are anomalies' if kind == 'velocity' else 'is an anomaly'} (from the "
                     "mean sea surface): the prior is then the velocity anomaly, not the full current")
    error_kind, error_names, error_scale = _find_errors(ds, names, kind, height, path, notes)
    return _Variables(kind, names, scale, error_kind, error_names, error_scale), notes


def _inventory(ds) -> str:
    """Returns "name (standard name), ..." of the file's data variables, for an error message."""
    names = [f"{key} ({variable.attrs['standard_name']})" if "standard_name" in variable.attrs else str(key)
             for key, variable in ds.data_vars.items()]
    return ", ".join(names) or "no data variable"


def _geostrophy_note(name: str) -> str:
    """Returns the note on the velocities computed from the height `name`."""
    return (f"velocities computed from {name} by geostrophy on the sphere: u = -(g/f) d({name})/dy, "
            f"v = (g/f) d({name})/dx, dx = R cos(lat) dlon, dy = R dlat, g = {GRAVITY} m/s2, f = 2 Omega sin(lat), "
            f"Omega = {OMEGA} rad/s, R = {EARTH_RADIUS_M} m; centred differences, one-sided next to land and at "
            "the grid's edges")


def _find_errors(ds, names, kind: str, height, path: str, notes: list):
    """Returns (error kind, error names, scale to SI) of the product's stated errors, (None, (), 1.0) if none:
    velocity errors err_<u>/err_<v> (DUACS: err_ugosa/err_vgosa, the mapping error of ugos too), else a height's."""
    dims = set(ds[names[0]].dims)

    def usable(key: str) -> str | None:
        name = _match(ds, name=key)
        return name if name is not None and set(ds[name].dims) == dims else None

    own = [tuple(f"err_{name.lower()}" for name in names)] if kind == "velocity" else []
    for keys in dict.fromkeys([*own, ("err_ugos", "err_vgos"), ("err_ugosa", "err_vgosa")]):
        pair = [usable(key) for key in keys]
        if None not in pair:
            scale = _scale(ds, pair[0], VELOCITY_UNITS, path, notes)
            if _scale(ds, pair[1], VELOCITY_UNITS, path, notes) != scale:
                raise ValueError(f"{path}: {pair[0]} and {pair[1]} have different units")
            notes.append(f"error std: {pair[0]}, {pair[1]}; error_std is sqrt(({pair[0]}^2 + {pair[1]}^2)/2)")
            return "velocity", tuple(pair), scale
    heights = [names[0]] if kind == "height" else [height[0]] if height else []
    for key in dict.fromkeys(f"err_{name.lower()}" for name in [*heights, "adt", "sla", "zos", "ssh"]):
        if (name := usable(key)) is not None:
            scale = _scale(ds, name, HEIGHT_UNITS, path, notes)
            notes.append(f"error std: {name} carried through the same geostrophic differences (neighbouring "
                         "errors taken independent), the RMS of the u and v errors")
            return "height", (name,), scale
    notes.append("no error std in the file (err_ugos/err_vgos, err_sla): error_std answers None")
    return None, (), 1.0


def _coordinate(ds, standard_name: str, names: tuple, dims: tuple, path: str, what: str) -> str:
    """Returns the coordinate variable of `what` on the variable's `dims`, by standard name then name."""
    candidates = [k for k, v in ds.variables.items() if set(v.dims) <= set(dims) and v.ndim >= 1]
    for key in candidates:
        if str(ds[key].attrs.get("standard_name", "")).lower() == standard_name:
            return str(key)
    for name in names:
        for key in candidates:
            if str(key).lower() == name:
                return str(key)
    raise ValueError(f"{path}: no {what} coordinate on dimensions {dims} (looked for standard name "
                     f"{standard_name!r} or a variable {', '.join(names)})")


def _axis(ds, name: str, path: str) -> tuple[np.ndarray, str]:
    """Returns the 1-D values and the dimension of coordinate `name`; a 2-D one must vary along one dimension."""
    values = np.asarray(ds[name].values, np.float64)
    dims = ds[name].dims
    if values.ndim == 1:
        return values, dims[0]
    for along in range(values.ndim):
        across = tuple(a for a in range(values.ndim) if a != along)
        line = values[tuple(0 if a in across else slice(None) for a in range(values.ndim))]
        if np.allclose(values, np.expand_dims(line, across), rtol=0, atol=1e-6):
            return line, dims[along]
    raise ValueError(f"{path}: {name} varies along {dims}: a curvilinear grid; regrid the product to a regular "
                     "longitude/latitude grid")


def _sorted_longitudes(lon: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """Returns (longitudes from the westmost, unwrapped and increasing; their file columns; periodic)."""
    turned = np.argsort(lon % 360.0, kind="stable")
    gaps = np.diff(np.append(lon[turned[-1]] % 360.0 - 360.0, lon[turned] % 360.0))  # the gap before each
    widest = gaps >= gaps.max() - 1e-3 * np.median(gaps)
    start = lon[turned[widest]].min()  # after the widest gap (the least of ties: a global grid's first), as the file
    unwrapped = start + (lon - start) % 360.0
    order = np.argsort(unwrapped, kind="stable")
    unwrapped = unwrapped[order]
    steps = np.diff(unwrapped)
    if np.any(steps <= 0):
        raise ValueError(f"{path}: repeated longitudes")
    periodic = bool(unwrapped[0] + 360.0 - unwrapped[-1] <= 1.5 * np.median(steps))
    return unwrapped, order, periodic


def _spacing(values: np.ndarray) -> str:
    """Returns "every STEP" of an evenly spaced axis, else "spacing LEAST..MOST", for a note."""
    steps = np.diff(values)
    if np.ptp(steps) <= 1e-4 * max(abs(steps[0]), 1e-12):  # float32 axes
        return f"every {steps[0]:g}"
    return f"spacing {steps.min():g}..{steps.max():g}"


def _find_time(ds, name: str, path: str) -> tuple[str | None, str]:
    """Returns (the time dimension, or None for a scalar time; the time variable)."""
    timelike = lambda key: " since " in str(ds[key].attrs.get("units", "")) and (
        str(ds[key].attrs.get("standard_name", "")).lower() == "time" or str(ds[key].attrs.get("axis", "")) == "T"
        or str(key).lower() in TIME_NAMES)
    for dim in ds[name].dims:
        if dim in ds.variables and ds[dim].ndim == 1 and timelike(dim):
            return str(dim), str(dim)
    for key, variable in ds.variables.items():
        if variable.ndim == 0 and timelike(key):
            return None, str(key)
    raise ValueError(f"{path}: {name} has no time coordinate (dimensions {ds[name].dims}; a time variable with "
                     "units 'UNIT since DATE' named time, or of standard name time, was looked for)")


def _find_grid(ds, name: str, path: str) -> tuple[_Grid, list[str]]:
    """Returns the grid of variable `name` and its notes (grid, period, levels taken), or raises ValueError."""
    from lagda.io.cf_time import calendar_note, cf_seconds

    dims = ds[name].dims
    lon, lon_dim = _axis(ds, _coordinate(ds, "longitude", LON_NAMES, dims, path, "longitude"), path)
    lat, lat_dim = _axis(ds, _coordinate(ds, "latitude", LAT_NAMES, dims, path, "latitude"), path)
    if lon_dim == lat_dim or len(lon) < 2 or len(lat) < 2:
        raise ValueError(f"{path}: {name} needs two or more longitudes and latitudes on two dimensions ({dims})")
    if np.any(np.abs(lat) > 90) or not np.all(np.isfinite(lon)):
        raise ValueError(f"{path}: latitudes outside -90..90 or longitudes not finite (a projected grid?)")
    time_dim, time_name = _find_time(ds, name, path)
    time = ds[time_name]
    seconds = np.atleast_1d(cf_seconds(time.values, time.attrs["units"], time.attrs.get("calendar"), path, False))
    time_order = np.argsort(seconds, kind="stable")
    seconds = seconds[time_order]
    if not np.all(np.isfinite(seconds)) or np.any(np.diff(seconds) <= 0):
        raise ValueError(f"{path}: times missing or repeated")
    notes, fixed = [], {}
    for dim in dims:
        if dim not in (time_dim, lat_dim, lon_dim):
            fixed[dim] = _level(ds, name, dim, notes)
    lon_sorted, lon_order, periodic = _sorted_longitudes(lon, path)
    lat_order = np.argsort(lat, kind="stable")
    if np.any(np.diff(lat[lat_order]) <= 0):
        raise ValueError(f"{path}: repeated latitudes")
    half = SINGLE_TIME_HALF_S if len(seconds) == 1 else 0.5 * float(np.median(np.diff(seconds)))
    notes.insert(0, f"grid {len(lat)} latitudes {lat.min():g}..{lat.max():g} {_spacing(lat[lat_order])} deg"
                 f"{' (flipped to increasing)' if lat[0] > lat[-1] else ''} x {len(lon)} longitudes "
                 f"{lon_sorted[0]:g}..{lon_sorted[-1]:g} {_spacing(lon_sorted)} deg"
                 f"{' (global: interpolated across the seam)' if periodic else ''}")
    period = f"{iso_time(seconds[0])}..{iso_time(seconds[-1])}"
    notes.insert(1, f"one time {iso_time(seconds[0])}: velocities answer within half a day of it" if len(seconds) == 1
                 else f"{len(seconds)} times {period} {_spacing(seconds / 3600)} h: velocities answer from half a "
                 f"time step ({half / 3600:g} h) before the first to half a step after the last")
    if calendar_note(time.attrs.get("calendar")):
        notes.append(calendar_note(time.attrs.get("calendar")))
    return _Grid(lon_sorted, lon_order, lat[lat_order], lat_order, seconds, time_order, periodic, half,
                 (time_dim, lat_dim, lon_dim), fixed), notes


def _level(ds, name: str, dim: str, notes: list) -> int:
    """Returns the index taken along a dimension other than time, lat, lon: the shallowest (noted) of several."""
    size = ds.sizes[dim]
    if size == 1:
        return 0
    if dim in ds.variables and np.issubdtype(ds[dim].dtype, np.number):
        depths = np.asarray(ds[dim].values, np.float64)
        index = int(np.nanargmin(np.abs(depths)))
        notes.append(f"{name} has {size} levels along {dim}: took the shallowest, {dim} = {depths[index]:g} "
                     f"{ds[dim].attrs.get('units', '')}".rstrip())
        return index
    notes.append(f"{name} has {size} values along {dim} (no coordinate): took the first")
    return 0
