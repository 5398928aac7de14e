"""Figure of one day of a `lagda map` store: the velocity, its total predictive std and the fixes behind it."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from lagda.io.land import draw_land
from lagda.io.physical import parse_time
from lagda.mapping.run import open_map
from simulate.atomic import write_atomic

MAX_ARROWS = 24  # arrows per side of the velocity panel at most


def busiest_day(maps) -> int:
    """Returns the time index of the map day with the most fixes (`n_fixes` summed over the cells)."""
    return int(np.argmax(maps["n_fixes"].sum(("lat", "lon")).values))


def map_figure(maps, time_index: int) -> Figure:
    """Returns the figure of day `time_index` of a map store `maps` (`open_map`): speed with the velocity as arrows,
    the speed's total predictive std (u_std and v_std in quadrature) and the fixes per cell that day, on
    longitude/latitude (a map across the dateline is drawn with its longitudes continued past 180), the land drawn
    over it in grey with its coast (lagda.io.land).

    Raises:
        ValueError: `time_index` out of range.
    """
    n_time = maps.sizes["time"]
    if not -n_time <= time_index < n_time:
        raise ValueError(f"day index {time_index} out of range: the map has {n_time} days")
    day = maps.isel(time=time_index).load()
    lon = day["lon"].values
    lon = lon[0] + (lon - lon[0]) % 360.0  # continuous across the dateline
    lat = day["lat"].values
    u, v = day["u"].values, day["v"].values
    panels = [("speed (m/s) and velocity", np.hypot(u, v), "viridis"),
              ("total predictive std of the velocity (m/s)", np.hypot(day["u_std"].values, day["v_std"].values),
               "magma"),
              ("fixes per cell that day", np.where(day["n_fixes"].values > 0, day["n_fixes"].values, np.nan),
               "Blues")]
    half = (lon[1] - lon[0] if len(lon) > 1 else 0.5) / 2, (lat[1] - lat[0] if len(lat) > 1 else 0.5) / 2
    edges = (lon[0] - half[0], lon[-1] + half[0]), (lat[0] - half[1], lat[-1] + half[1])
    fig = Figure(figsize=(15, 4.6), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    for ax, (title, image, cmap) in zip(axes, panels):
        mesh = ax.pcolormesh(lon, lat, image, cmap=cmap, shading="nearest", vmin=0.0, zorder=1)
        draw_land(ax, *edges)
        fig.colorbar(mesh, ax=ax, shrink=0.85)
        ax.set(title=title, xlabel="longitude (degrees east)", xlim=edges[0], ylim=edges[1],
               aspect=1 / np.cos(np.deg2rad(np.mean(lat))))
    step = (max(1, len(lat) // MAX_ARROWS), max(1, len(lon) // MAX_ARROWS))
    axes[0].quiver(lon[::step[1]], lat[::step[0]], u[::step[0], ::step[1]], v[::step[0], ::step[1]], color="w",
                   zorder=4)
    axes[0].set_ylabel("latitude (degrees north)")
    when = str(np.datetime_as_string(day["time"].values, unit="m")).replace("T", " ")
    fig.suptitle(f"lagda map, {when} UTC: {int(np.isfinite(u).sum())} of {u.size} cells mapped, "
                 f"{int(day['n_fixes'].sum())} fixes")
    return fig


def parse_day(day: str) -> np.datetime64:
    """Returns the date `day` (ISO 8601) as datetime64[s].

    Raises:
        ValueError: one line, if `day` is not a date.
    """
    try:
        return np.datetime64(round(parse_time(day)), "s")
    except ValueError:
        raise ValueError(f"--plot-day {day}: not a date (use ISO 8601, e.g. 2025-03-15)") from None


def plot_map(store, out_png, day: str | None = None) -> tuple[str, str]:
    """Returns (out_png, the day drawn) after drawing `map_figure` of one day of a map store.

    Args:
        store: a `lagda map` store (.zarr or .nc).
        out_png: the PNG image to write (via a temporary file and a rename).
        day: a date (ISO 8601, "2025-03-15"): the map time nearest it; None: the day with the most fixes.

    Returns:
        `(out_png, day)`: the image's path as a string and the day drawn, "YYYY-MM-DD".

    Raises:
        FileNotFoundError: no such store.
        ValueError: a day outside the map's period, or not a date.

    Example:
        After `lagda map --tracks lagda/shipped/gdp_like.nc --out map.nc` (not run here):

        ```python
        plot_map("map.nc", "map.png")  # ("map.png", "2025-03-02"): the day with the most fixes
        ```
    """
    with open_map(store) as maps:
        times = maps["time"].values
        if day is None:
            index = busiest_day(maps)
        else:
            wanted = parse_day(day)
            half = (times[1] - times[0]) / 2 if len(times) > 1 else np.timedelta64(12, "h")
            if not times[0] - half <= wanted <= times[-1] + half:
                raise ValueError(f"--plot-day {day}: outside the map's days, {str(times[0])[:10]} to "
                                 f"{str(times[-1])[:10]}")
            index = int(np.argmin(np.abs(times - wanted)))
        fig = map_figure(maps, index)
    write_atomic(out_png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return str(out_png), str(times[index])[:10]
