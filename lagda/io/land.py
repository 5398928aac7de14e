"""Where the land is: the sea fraction of longitude/latitude cells, from the GLOBE 1-km land mask.

The mask is the one the global-land-mask package ships: NOAA's GLOBE elevation data set reduced to land or sea
on 21,600 x 43,200 pixels of 1/120 degree (pixel row i spans latitudes 90 - (i + 1)/120 to 90 - i/120, column j
longitudes -180 + j/120 to -180 + (j + 1)/120; most lakes count as land). That package's own module loads the
whole mask at import (0.9 GB as booleans, 5 s); here its compressed file is read a band of rows at a time and
only the rows and columns of the cells asked for are kept, so a basin costs about a second and little memory.

Examples
--------
>>> import numpy as np
>>> sea_fraction(np.array([-30.0]), np.array([0.0]), 1.0)  # a 1-degree cell in the mid-Atlantic
array([[1.]], dtype=float32)
>>> sea_fraction(np.array([20.0]), np.array([25.0]), 1.0)  # in the Sahara
array([[0.]], dtype=float32)
>>> sea_fraction(np.array([-6.5, -5.5]), np.array([35.5]), 1.0).round(2)  # the Gulf of Cadiz, Gibraltar
array([[0.93, 0.26]], dtype=float32)
"""

from __future__ import annotations

import functools
import importlib.util
import os
import zipfile

import numpy as np

SOURCE = "the GLOBE 1-km land mask (NOAA, via global-land-mask)"
PIXELS_PER_DEGREE = 120
BAND_ROWS = 240  # mask rows read at once (10 MB)
DRAWN_PIXELS_PER_DEGREE = 30  # the land drawn on figures: 2-minute pixels, at most DRAWN_PIXELS a side
DRAWN_PIXELS = 1200


def _mask_file() -> str:
    """Returns the path of the package's compressed mask, without importing the package (which loads it)."""
    spec = importlib.util.find_spec("global_land_mask")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the land mask needs the global-land-mask package: pip install global-land-mask")
    return os.path.join(list(spec.submodule_search_locations)[0], "globe_combined_mask_compressed.npz")


def _cell_index(centres: np.ndarray, step: float, pixel_centres: np.ndarray, periodic: bool) -> np.ndarray:
    """Returns the cell of each pixel centre, -1 where it lies in no cell (cells `centres +- step/2`)."""
    offset = pixel_centres - (centres[0] - step / 2)
    if periodic:
        offset = offset % 360.0
    index = np.floor(offset / step).astype(np.int64)
    return np.where((index >= 0) & (index < len(centres)), index, -1)


def sea_fraction(lon, lat, resolution) -> np.ndarray:
    """Returns the fraction of each cell that is sea `(len(lat), len(lon))` float32 in [0, 1].

    The fraction is the share of the mask's pixels whose centre lies in the cell; a cell that holds no pixel
    centre (cells under 1/120 degree) takes the pixel at its centre.

    Parameters
    ----------
    lon
        (nx,) cell centres in degrees east, evenly spaced (any convention: -180..180, 0..360, across the
        dateline).
    lat
        (ny,) cell centres in degrees north, evenly spaced and increasing.
    resolution
        the cells' side in degrees, or (dlon, dlat).

    Returns
    -------
    np.ndarray
        float32 `(ny, nx)`: the sea fraction of each cell, in [0, 1] (rows by latitude, columns by longitude).

    Raises
    ------
    ValueError
        latitudes outside -90..90.
    ImportError
        global-land-mask missing.

    Examples
    --------
    >>> import numpy as np
    >>> sea_fraction(np.array([-6.5, -5.5]), np.array([35.5]), 1.0).round(2)  # the Gulf of Cadiz, Gibraltar
    array([[0.93, 0.26]], dtype=float32)
    """
    lon, lat = np.atleast_1d(np.asarray(lon, float)), np.atleast_1d(np.asarray(lat, float))
    dlon, dlat = (float(resolution),) * 2 if np.ndim(resolution) == 0 else map(float, resolution)
    if np.any(np.abs(lat) > 90):
        raise ValueError("latitudes must lie within -90..90")
    south, north = lat[0] - dlat / 2, lat[-1] + dlat / 2
    first = max(0, int(np.floor((90.0 - north) * PIXELS_PER_DEGREE)))
    last = min(180 * PIXELS_PER_DEGREE, int(np.ceil((90.0 - south) * PIXELS_PER_DEGREE)))
    columns = _cell_index(lon, dlon, -180.0 + (np.arange(360 * PIXELS_PER_DEGREE) + 0.5) / PIXELS_PER_DEGREE, True)
    used = np.flatnonzero(columns >= 0)
    centre_col = np.floor(((lon + 180.0) % 360.0) * PIXELS_PER_DEGREE).astype(np.int64)
    centre_row = np.clip(np.floor((90.0 - lat) * PIXELS_PER_DEGREE).astype(np.int64), 0, 180 * PIXELS_PER_DEGREE - 1)
    sea = np.zeros(len(lat) * len(lon))
    count = np.zeros(len(lat) * len(lon))
    at_centre = np.zeros((len(lat), len(lon)))
    with zipfile.ZipFile(_mask_file()) as archive, archive.open("mask.npy") as handle:
        version = np.lib.format.read_magic(handle)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(handle)
        if shape != (180 * PIXELS_PER_DEGREE, 360 * PIXELS_PER_DEGREE) or fortran or dtype != np.bool_:
            raise ImportError(f"global-land-mask's mask is not the expected 1/120 degree grid: {shape} {dtype}")
        handle.seek(handle.tell() + first * shape[1])  # forward: inflates and discards the rows north of the cells
        for top in range(first, last, BAND_ROWS):
            rows = min(BAND_ROWS, last - top)
            band = np.frombuffer(handle.read(rows * shape[1]), np.bool_).reshape(rows, shape[1])
            cell_rows = _cell_index(lat, dlat, 90.0 - (top + np.arange(rows) + 0.5) / PIXELS_PER_DEGREE, False)
            inside = cell_rows >= 0
            cells = (cell_rows[inside, None] * len(lon) + columns[None, used]).ravel()
            sea += np.bincount(cells, band[np.ix_(inside, used)].ravel(), minlength=sea.size)
            count += np.bincount(cells, minlength=sea.size)
            here = (centre_row >= top) & (centre_row < top + rows)
            at_centre[here] = band[centre_row[here] - top][:, centre_col]
    with np.errstate(invalid="ignore"):
        fraction = np.where(count > 0, sea / np.maximum(count, 1), at_centre.ravel())
    return fraction.reshape(len(lat), len(lon)).astype(np.float32)


@functools.lru_cache(maxsize=4)  # a figure's panels draw the same area: the mask is read once for them
def _drawn_sea(lon_range: tuple, lat_range: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (lon, lat, sea fraction) of the pixels `draw_land` draws over the area."""
    centres = []
    for first, last in (lon_range, lat_range):
        n = int(np.clip((last - first) * DRAWN_PIXELS_PER_DEGREE, 2, DRAWN_PIXELS))
        centres.append(first + (last - first) * (np.arange(n) + 0.5) / n)
    lon, lat = centres
    return lon, lat, sea_fraction(lon, lat, (lon[1] - lon[0], lat[1] - lat[0]))


def draw_land(ax, lon_range, lat_range) -> None:
    """Draws the land in grey over a longitude/latitude axes (over its images and meshes, under lines and
    arrows of zorder above 2) and the coast as a line, in pixels of about 2 minutes (at most DRAWN_PIXELS a side).

    Parameters
    ----------
    ax
        a matplotlib Axes in degrees
    lon_range, lat_range
        (first, last) edges of the area drawn in degrees (longitudes may run past 180).
    """
    lon, lat, sea = _drawn_sea(tuple(map(float, lon_range)), tuple(map(float, lat_range)))
    ax.imshow(np.where(sea[..., None] < 0.5, [0.8, 0.8, 0.8, 1.0], 0.0), extent=(*lon_range, *lat_range),
              origin="lower", interpolation="nearest", aspect="auto", zorder=2)
    if sea.min() < 0.5 < sea.max():  # a coast in view
        ax.contour(lon, lat, sea, levels=[0.5], colors="0.3", linewidths=0.6, zorder=3)
