"""A background product as the prior mean of `lagda assimilate --background FILE`: the drifters correct its
departure, and far from them the result is the background.

The product (lagda.io.background.Background: a gridded velocity on (time, lat, lon), or the geostrophic velocity
of a sea surface height) enters `linear` in a chosen basis on longitude/latitude tracks, the ocean path, in three
places, each a departure from it:

- the fit: the drifters' difference velocities less the background's at the same points and times are the data
  (`BackgroundFlow`, in model units through the tracks' mapping, is `FlowModel.background`; subtracted where the
  velocities are formed, lagda.assimilation.methods.linear.representation_posterior). The prior's spectrum, the
  error model along the tracks and the guard that answers zero when nothing beats zero are then those of the
  departure: where the drifters say nothing, the departure is zero;
- the local Gaussian process near the drifters: their velocities less the background, less the departure field
  (lagda.assimilation.local_gp.box_local_gp);
- the result: the background on the result's grid is added to u, v (`add_background`).

Decided, and said in a note each (`background_notes`, `add_background`): psi and the coefficients hold the
departure only (g/f times a height is not the streamfunction of its geostrophic velocity where f varies over the
box, and a velocity product has none); u_std, v_std and the total std are the departure's, whose prior is fitted
to the drifters' departures from the product, which are its error, so the product's own error std is not added
(that would count its error twice); where the product has no value (outside its box or period, on land) the
background is zero, as in `lagda map`.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from lagda.arguments import given
from lagda.io.background import Background
from lagda.io.physical import Mapping, iso_time
from lagda.report import counted


@dataclasses.dataclass(frozen=True, eq=False)  # compared by identity: it holds a product
class BackgroundFlow:
    """The background's velocity on one track file's mapping: in m/s at longitudes, latitudes and times
    (`velocity`), or in model units at model positions and times (calling it: `FlowModel.background`, the prior
    mean the fit's velocities depart from).

    Attributes
    ----------
    background
        the product, opened (lagda.io.background.Background).
    mapping
        the tracks' longitude/latitude mapping (lagda.io.physical.Mapping).

    Examples
    --------
    >>> import os, tempfile
    >>> import xarray as xr
    >>> shape, axes = (1, 3, 3), {"time": [np.datetime64("2020-01-01")], "lat": [39.0, 40.0, 41.0],
    ...                           "lon": [9.0, 10.0, 11.0]}
    >>> path = os.path.join(tempfile.mkdtemp(), "current.nc")
    >>> xr.Dataset({"uo": (("time", "lat", "lon"), np.full(shape, 0.2), {"units": "m/s"}),
    ...             "vo": (("time", "lat", "lon"), np.zeros(shape), {"units": "m/s"})}, axes).to_netcdf(path)
    >>> mapping = Mapping((9.5, 10.5, 39.5, 40.5), "lonlat", 1577836800.0, 86400.0)  # a model time unit: a day
    >>> flow = BackgroundFlow(Background.open(path), mapping)
    >>> flow.velocity([10.0], [40.0], [1577836800.0])  # m/s
    array([[0.2, 0. ]])
    >>> flow(np.array([[0.5, 0.5]]), np.zeros(1)) * mapping.lengths_m[0] / 86400.0  # box widths a day, in m/s
    array([[0.2, 0. ]])
    """

    background: Background
    mapping: Mapping

    def velocity(self, lon, lat, seconds) -> np.ndarray:
        """Returns the background velocity (east, north) `(n, 2)` m/s at longitudes, latitudes (degrees) and
        seconds since 1970-01-01T00:00:00Z `(n,)`; zero where the product has no value."""
        u, v = self.background.velocity(np.ravel(lon), np.ravel(lat), np.ravel(seconds))
        return np.nan_to_num(np.stack([u, v], axis=-1))

    def __call__(self, points, t) -> np.ndarray:
        """Returns the background velocity `(n, 2)` in model units (domain lengths per model time) at model positions
        `points` `(n, 2)` and model times `t` `(n,)`: its m/s over the mapping's velocity_factors at their latitude
        (exact: both are the same map of the sphere); zero where the product has no value."""
        points = np.asarray(points, np.float64)
        lon, lat = self.mapping.from_model(points[:, 0], points[:, 1])
        velocity = self.velocity(lon, lat, self.mapping.time_from_model(t))
        return velocity / np.stack(self.mapping.velocity_factors(lat), axis=-1)


def background_notes(flow: BackgroundFlow, tracks) -> tuple[str, ...]:
    """Returns the note lines of a background taken as the prior mean of `tracks` (lagda.io.tracks.Tracks, physical):
    what was read (Background.notes), what the drifters correct, how many fixes lie where it has no value, and what
    psi and the std hold (module docstring).

    Raises
    ------
    ValueError
        One line naming the option: the product has no value at any fix (its box and period, and the fixes').
    """
    background, mapping = flow.background, flow.mapping
    positions, times = np.asarray(tracks.positions, np.float64), np.asarray(tracks.times, np.float64)
    ok = np.all(np.isfinite(positions), axis=-1) & np.isfinite(times)
    lon, lat = mapping.from_model(positions[ok][:, 0], positions[ok][:, 1])
    seconds = mapping.time_from_model(times[ok])
    missing = int(np.isnan(background.velocity(lon, lat, seconds)[0]).sum())
    fixes = counted(len(lon), "fix", "fixes")
    if missing == len(lon):
        west, east, south, north, start, end = background.extent
        raise ValueError(f"{given('background', background.path)}: no value at any of the {fixes} "
                         f"(it covers lon {west:g}..{east:g}, lat {south:g}..{north:g}, {iso_time(start)}.."
                         f"{iso_time(end)}; the fixes lie in lon {lon.min():.4g}..{lon.max():.4g}, lat "
                         f"{lat.min():.4g}..{lat.max():.4g}, {iso_time(seconds.min())}..{iso_time(seconds.max())})")
    what = "geostrophic velocities from its height" if background.kind == "height" else "its velocities"
    read = tuple(line if line.startswith("background") else f"background: {line}" for line in background.notes)
    where = (f"background: {missing:,} of {fixes} lie where it has no value: zero there",) if missing else ()
    psi = (": g/f times its height is not the streamfunction of its velocity where f varies over the box"
           if background.kind == "height" else "")
    std = ("its own error std is not added: that would count it twice" if background.has_error_std else
           "the product states none")
    return (*read,
            f"background {os.path.basename(background.path)}, {what}: the prior mean; the drifters correct its "
            "departure, and far from them u, v are the background",
            *where,
            f"background: psi and the coefficients are the departure's alone{psi}",
            "background: u_std, v_std and the total std are the departure's, fitted to the drifters' departures from "
            f"the product (its error); {std}")


def add_background(result, flow: BackgroundFlow) -> tuple[str, ...]:
    """Adds the background on the result's grid and times to its u, v (`u_mean`, `v_mean` `(field, time, lat, lon)`
    m/s, changed in place); returns a note when some cells lie where the product has no value (zero added there),
    else ().

    Parameters
    ----------
    result
        lagda.io.results.Result of longitude/latitude tracks (physical fields, `result.mapping` set), its u, v the
        departure from the background.
    flow
        the background on the result's mapping.
    """
    from lagda.io.results import physical_axes

    lon, lat = physical_axes(result)
    seconds = flow.mapping.time_from_model(result.time)
    at = [a.ravel() for a in np.meshgrid(seconds, lat, lon, indexing="ij")]  # (time, lat, lon) each
    u, v = flow.background.velocity(at[2], at[1], at[0])
    shape = (len(seconds), len(lat), len(lon))
    for name, value in (("u_mean", u), ("v_mean", v)):
        result.fields[name] = np.asarray(result.fields[name]) + np.nan_to_num(value).reshape(shape)[None]
    missing = int(np.isnan(u).sum())
    if not missing:
        return ()
    return (f"background: no value on {missing:,} of {u.size:,} cells and times of the result (outside its box or "
            "period, or land): u, v there are the departure alone",)
