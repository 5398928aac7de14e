"""Figure of one day of a `lagda map` store: the velocity, its total predictive std and the fixes behind it,
dated (UTC), with an arrow scale key in m/s, labelled colour bars, the land and optionally the drifters' tracks."""

from __future__ import annotations

import json

import numpy as np
from matplotlib.figure import Figure

from lagda.assimilation.plot import arrow_key, day_index, key_speed
from lagda.io.land import draw_land
from lagda.mapping.store import open_map
from simulate.atomic import write_atomic

MAX_ARROWS = 24  # arrows per side of the velocity panel at most
ARROW_PERCENTILE = 95  # an arrow of about this percentile of the speeds drawn spans the space between two arrows
TRACK_COLOURS = {"mapped": "orange", "withheld": "deepskyblue"}  # the drifters' tracks on the map panels
NEAR_DAY_S = 12 * 3600.0  # a drifter's dot: its fix nearest the day drawn, if within this long of it


def busiest_day(maps) -> int:
    """Returns the time index of the map day with the most fixes (`n_fixes` summed over the cells)."""
    return int(np.argmax(maps["n_fixes"].sum(("lat", "lon")).values))


def map_figure(maps, time_index: int, drifters: dict | None = None) -> Figure:
    """Returns the figure of day `time_index` of a map store `maps` (`open_map`): speed with the velocity as arrows
    (a scale key in m/s above them), the speed's total predictive std (u_std and v_std in quadrature) and the
    fixes per cell that day, on longitude/latitude (a map across the dateline is drawn with its longitudes
    continued past 180), the land drawn over it in grey with its coast (lagda.io.land); each colour bar says its
    quantity and unit, the title the day (UTC).

    Parameters
    ----------
    maps
        a map store (xarray Dataset on time, lat, lon: u, v, u_std, v_std in m/s, n_fixes).
    time_index
        the map time drawn.
    drifters
        tracks drawn over the speed and std panels, {label: lagda.io.fixes.Fixes} (e.g.
        {"mapped": ..., "withheld": ...}; colours TRACK_COLOURS, else grey; `draw_drifters`) with a legend;
        None: none drawn.

    Raises
    ------
    ValueError
        `time_index` out of range.
    """
    n_time = maps.sizes["time"]
    if not -n_time <= time_index < n_time:
        raise ValueError(f"day index {time_index} out of range: the map has {n_time} days")
    day = maps.isel(time=time_index).load()
    lon = day["lon"].values
    lon = lon[0] + (lon - lon[0]) % 360.0  # continuous across the dateline
    lat = day["lat"].values
    u, v = day["u"].values, day["v"].values
    panels = [("speed and velocity", np.hypot(u, v), "viridis", "speed (m/s)"),
              ("total predictive std of the velocity", np.hypot(day["u_std"].values, day["v_std"].values),
               "magma", "std of the velocity (m/s)"),
              ("fixes per cell that day", np.where(day["n_fixes"].values > 0, day["n_fixes"].values, np.nan),
               "Blues", "fixes per cell")]
    half = (lon[1] - lon[0] if len(lon) > 1 else 0.5) / 2, (lat[1] - lat[0] if len(lat) > 1 else 0.5) / 2
    edges = (lon[0] - half[0], lon[-1] + half[0]), (lat[0] - half[1], lat[-1] + half[1])
    fig = Figure(figsize=(15, 4.8), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    for ax, (title, image, cmap, label) in zip(axes, panels):
        mesh = ax.pcolormesh(lon, lat, image, cmap=cmap, shading="nearest", vmin=0.0, zorder=1)
        draw_land(ax, *edges)
        fig.colorbar(mesh, ax=ax, shrink=0.85, label=label)
        ax.set(title=title, xlabel="longitude (degrees east)", xlim=edges[0], ylim=edges[1],
               aspect=1 / np.cos(np.deg2rad(np.mean(lat))))
    step = (max(1, len(lat) // MAX_ARROWS), max(1, len(lon) // MAX_ARROWS))
    u_drawn, v_drawn = u[::step[0], ::step[1]], v[::step[0], ::step[1]]
    speed = np.hypot(u_drawn, v_drawn)
    spacing = step[1] * (lon[1] - lon[0] if len(lon) > 1 else 1.0)  # degrees of longitude between arrows
    long = key_speed(speed[np.isfinite(speed)], ARROW_PERCENTILE) if np.isfinite(speed).any() else 1.0
    arrows = axes[0].quiver(lon[::step[1]], lat[::step[0]], u_drawn, v_drawn, color="w", zorder=4, scale_units="x",
                            scale=long / spacing, width=0.004)
    arrow_key(axes[0], arrows, speed, "m/s", ARROW_PERCENTILE)  # about as long as the space between arrows
    axes[0].set_ylabel("latitude (degrees north)")
    for label, fixes in (drifters or {}).items():
        for ax in axes[:2]:
            draw_drifters(ax, fixes, lon[0], day["time"].values, TRACK_COLOURS.get(label, "0.5"), label)
    if drifters:
        axes[1].legend(loc="lower right", fontsize=7, framealpha=0.8, title="drifters", title_fontsize=7)
    when = str(np.datetime_as_string(day["time"].values, unit="m")).replace("T", " ")
    fig.suptitle(f"lagda map, {when} UTC: {int(np.isfinite(u).sum())} of {u.size} cells mapped, "
                 f"{int(day['n_fixes'].sum())} fixes")
    return fig


def draw_drifters(ax, fixes, west: float, when, colour, label: str) -> None:
    """Draws each drifter of `fixes` (lagda.io.fixes.Fixes) on a longitude/latitude axes: its track as a
    line (broken where it jumps more than 180 degrees), its fix nearest `when` (datetime64, UTC) as a dot if within
    NEAR_DAY_S of it; longitudes taken from `west` on, as the map's are. The first line carries `label` (for a
    legend)."""
    seconds = (np.datetime64(when, "s") - np.datetime64("1970-01-01T00:00:00", "s")) / np.timedelta64(1, "s")
    lon = west + (fixes.lon - west) % 360.0
    for n, traj in enumerate(np.unique(fixes.traj)):
        mine = np.flatnonzero(fixes.traj == traj)
        mine = mine[np.argsort(fixes.time[mine], kind="stable")]
        x, y = lon[mine], fixes.lat[mine]
        x = np.where(np.r_[False, np.abs(np.diff(x)) > 180.0], np.nan, x)  # no line across the map's seam
        ax.plot(x, y, "-", color=colour, lw=0.9, alpha=0.9, zorder=5, label=None if n else label)
        near = int(np.argmin(np.abs(fixes.time[mine] - seconds)))
        if abs(fixes.time[mine][near] - seconds) <= NEAR_DAY_S:
            ax.plot(lon[mine][near], y[near], "o", color=colour, mec="k", mew=0.6, ms=5, zorder=6)


def drifters_of(archive, store) -> dict:
    """Returns {"mapped": Fixes, "withheld": Fixes} (lagda.io.fixes.Fixes) to draw on a map's figure: the
    fixes the map store was made from and those of the drifters it withheld (that key only for a map made with
    --withhold), selected, cleaned and low-passed as the map's settings (in its manifest) say
    (lagda.mapping.run.map_fixes, lagda.mapping.check.withheld).

    Parameters
    ----------
    archive
        the drifter file or archive the map was made from (as `lagda map --tracks` took it).
    store
        the map store (.nc or .zarr).

    Raises
    ------
    FileNotFoundError
        no such store or archive.
    """
    from lagda.mapping.check import withheld
    from lagda.mapping.run import map_fixes
    from lagda.mapping.settings import ABSENT_SETTINGS, MapSettings

    with open_map(store) as maps:
        stored = {**ABSENT_SETTINGS, **json.loads(maps.attrs["manifest"])["settings"]}
    settings = MapSettings(**{name: tuple(value) if isinstance(value, list) else value
                              for name, value in stored.items()})
    fixes = map_fixes(archive, settings, settings.tiles())
    held = withheld(fixes, settings.withhold)
    return {"mapped": fixes.subset(~held), **({"withheld": fixes.subset(held)} if held.any() else {})}


def plot_map(store, out_png, day: str | None = None, drifters: dict | None = None) -> tuple[str, str]:
    """Returns (out_png, the day drawn) after drawing `map_figure` of one day of a map store.

    Parameters
    ----------
    store
        a `lagda map` store (.zarr or .nc).
    out_png
        the PNG image to write (via a temporary file and a rename).
    day
        a date (ISO 8601, "2025-03-15"): the map time nearest it; None: the day with the most fixes.
    drifters
        tracks to draw, as `map_figure` takes them (None: none).

    Returns
    -------
    tuple[str, str]
        `(out_png, day)`: the image's path as a string and the day drawn, "YYYY-MM-DD".

    Raises
    ------
    FileNotFoundError
        no such store.
    ValueError
        a day outside the map's period, or not a date.

    Examples
    --------
    After `lagda map --tracks gdp_like.nc --out map.nc` (not run here):

    ```python
    plot_map("map.nc", "map.png")  # ("map.png", "2025-03-02"): the day with the most fixes
    ```
    """
    with open_map(store) as maps:
        times = maps["time"].values
        index = busiest_day(maps) if day is None else day_index(times, day, "the map")
        fig = map_figure(maps, index, drifters)
    write_atomic(out_png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return str(out_png), str(times[index])[:10]
