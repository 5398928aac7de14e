"""Figure of an assimilation result: true and recovered psi on one colour scale, their error, the
velocity's uncertainty, the tracks; for physical results in degrees, m/s and dates. Also what the figures of
`lagda assimilate --plot` and `lagda map --plot` share: the day a figure shows (`day_index`) and the arrows' scale
key (`arrow_key`)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from lagda.arguments import given
from lagda.io.land import draw_land
from lagda.io.physical import parse_time
from lagda.io.results import Result, read_result
from lagda.io.tracks import Tracks
from simulate.atomic import write_atomic
from simulate.flow import grid_fields
from simulate.plot import wrapped_segments


def parse_day(day: str) -> np.datetime64:
    """Returns the date `day` (ISO 8601, "2025-03-15" or "2025-03-15T12:00") as datetime64[s] (UTC).

    Raises
    ------
    ValueError
        one line, if `day` is not a date.

    Examples
    --------
    >>> parse_day("2025-03-15T06:00")
    np.datetime64('2025-03-15T06:00:00')
    """
    try:
        return np.datetime64(round(parse_time(day)), "s")
    except ValueError:
        raise ValueError(f"{given('plot_day', day)}: not a date (use ISO 8601, e.g. 2025-03-15)") from None


def day_index(times, day: str, source: str = "the result") -> int:
    """Returns the index of the time in `times` nearest the date `day`: the time a figure of that day shows.

    Parameters
    ----------
    times
        datetime64 `(time,)`, increasing (a map's or a result's grid times, UTC).
    day
        a date, ISO 8601 ("2025-03-15").
    source
        what the times are of, for the error ("the map": "outside the map's days").

    Raises
    ------
    ValueError
        one line: `day` is not a date, or lies more than half a time step outside `times`.

    Examples
    --------
    >>> times = np.arange("2025-03-01", "2025-03-31", dtype="datetime64[D]").astype("datetime64[s]")
    >>> day_index(times, "2025-03-15T10:00")
    14
    """
    times = np.asarray(times).astype("datetime64[s]")
    wanted = parse_day(day)
    half = (times[1] - times[0]) / 2 if len(times) > 1 else np.timedelta64(12, "h")
    if not times[0] - half <= wanted <= times[-1] + half:
        raise ValueError(f"{given('plot_day', day)}: outside {source}'s days, {str(times[0])[:10]} to "
                         f"{str(times[-1])[:10]}")
    return int(np.argmin(np.abs(times - wanted)))


def result_dates(mapping, model_times) -> np.ndarray:
    """Returns datetime64[s] `(time,)` (UTC) of model times `(time,)` of physical tracks (`mapping`,
    lagda.io.physical.Mapping)."""
    return np.round(mapping.time_from_model(np.asarray(model_times, np.float64))).astype("datetime64[s]")


def plot_time_index(mapping, model_times, day: str | None) -> int:
    """Returns the grid time a result's figure shows: the one nearest the date `day`, else (None) the middle one
    (index len // 2: the window's middle, where its drifters inform the field from both sides).

    Parameters
    ----------
    mapping
        the tracks' lagda.io.physical.Mapping (None for model-unit tracks, which have no dates).
    model_times
        the result's grid times `(time,)` in model units.
    day
        a date (ISO 8601) or None.

    Raises
    ------
    ValueError
        one line: `day` is not a date, lies outside the grid times, or the tracks have no dates.
    """
    if day is None:
        return len(model_times) // 2
    if mapping is None:
        parse_day(day)  # a bad date is said as such
        raise ValueError(f"{given('plot_day', day)}: these tracks are in model units, without dates")
    return day_index(result_dates(mapping, model_times), day)


def plot_assimilation(result, out_png, tracks: Tracks | None = None, truth=None, field: int = 0,
                      time_index: int | None = None, day: str | None = None) -> str:
    """Returns `out_png` after drawing `assimilation_figure` of one field at one grid time.

    Parameters
    ----------
    result
        a result file path or a `Result` from `read_result`.
    out_png
        output image path (written via a temporary file + rename).
    tracks, truth, field
        as in `assimilation_figure`.
    time_index
        the grid time drawn; None: that of `day` (`plot_time_index`: the middle one without it).
    day
        a date (ISO 8601) of a physical result: the grid time nearest it (used when `time_index` is None).

    Raises
    ------
    ValueError
        one line, if `field` or `time_index` is out of range, or `day` is not a date of the result.
    """
    res: Result = result if isinstance(result, Result) else read_result(result)
    if time_index is None:
        time_index = plot_time_index(res.mapping, res.time, day)
    fig = assimilation_figure(res, tracks, truth, field, time_index)
    # format given: the temporary name has no .png suffix
    write_atomic(out_png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return str(out_png)


def assimilation_figure(res: Result, tracks: Tracks | None = None, truth=None, field: int = 0,
                        time_index: int | None = None) -> Figure:
    """Returns the figure of one field of a result at one grid time.

    Panels: true psi, posterior-mean psi with the mean velocity as arrows and the error (posterior
    mean - true psi), all three on one colour scale, then the posterior std of the velocity (its
    total predictive std where the result has one). Without a known truth only the last two panels
    are drawn. psi is shown without its spatial mean: the constant mode k = (0, 0) moves no drifter,
    so no track can recover it. The field's tracks are overlaid on each panel, wrapped onto the
    torus. For a result in physical units (`res.mapping`) the maps are in longitude/latitude
    (degrees, the land drawn over them in grey; or km for projected tracks), psi in m^2/s and the
    spread in m/s, the title gives the date and time (UTC), and a last panel shows each drifter's fixes
    against the date (its gaps). The velocity arrows carry a scale key (m/s, or model units), each colour bar
    its quantity and unit; the title names the field only when the result has several.

    Parameters
    ----------
    res
        a `Result` from `read_result`.
    tracks
        observed tracks; defaults to those stored in the result.
    truth
        complex `(field, mode)` true coefficients; defaults to the result's.
    field
        which field to draw.
    time_index
        which grid time to draw; None: the middle one (`plot_time_index`).

    Raises
    ------
    ValueError
        if `field` or `time_index` is out of range.
    """
    n_field, n_time = res.fields["psi_mean"].shape[:2]
    time_index = n_time // 2 if time_index is None else time_index
    if not 0 <= field < n_field or not -n_time <= time_index < n_time:
        raise ValueError(f"field {field} / time index {time_index} out of range: the result has {n_field} fields, "
                         f"{n_time} times")
    tracks = res.tracks if tracks is None else tracks
    truth = res.true_coef if truth is None else truth
    mapping = res.mapping
    t = float(res.time[time_index])
    psi_mean = _without_mean(res.fields["psi_mean"][field, time_index])
    psi_panels = [("posterior mean psi and velocity", psi_mean)]
    if truth is not None:
        psi_true = grid_fields(np.asarray(truth)[field : field + 1], res.k1, res.k2, res.omega, res.time[[time_index]],
                               len(res.x))[0]
        psi_true = _without_mean(np.asarray(psi_true)[0, 0]) * (1.0 if mapping is None else mapping.psi_factor)
        psi_panels = [("true psi", psi_true), psi_panels[0], ("error: posterior mean - true psi", psi_mean - psi_true)]
    limit = max(float(np.max(np.abs(image))) for _, image in psi_panels) or 1.0  # error unclipped
    # The std of psi is dominated by the constant c_(0,0), which no track can see; the
    # velocity's spread is the uncertainty a user can act on.
    # the total predictive std (the velocity the basis leaves out included) where the result has it: the band
    # to read against an ocean's velocity; else the spread of the field in the basis
    total = "u_total_std" in res.fields
    std = {c: res.fields[f"{c}_total_std" if total else f"{c}_std"][field, time_index] for c in ("u", "v")}
    speed_std = np.hypot(std["u"], std["v"])
    n_panel = len(psi_panels) + 1 + (mapping is not None and tracks is not None)
    fig = Figure(figsize=(3.9 * n_panel + 0.8, 4.0), layout="constrained")
    axes = list(fig.subplots(1, n_panel))
    maps = axes[: len(psi_panels) + 1]
    # map coordinates: model x, y in [0, 1), or lon/lat degrees (km for projected tracks)
    to_map = (lambda x, y: (x, y)) if mapping is None else _map_coordinates(mapping)
    (west, east), (south, north) = to_map(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    extent = dict(origin="lower", extent=(west, east, south, north), interpolation="bilinear")
    units = ("", "") if mapping is None else (r" (m$^2$/s)", " (m/s)")
    for ax, (title, image) in zip(maps, psi_panels):
        im = ax.imshow(image, cmap="RdBu_r", vmin=-limit, vmax=limit, **extent)
        if title.startswith("posterior mean"):
            step = max(1, len(res.x) // 16)
            xx, yy = to_map(*np.meshgrid(res.x[::step], res.y[::step]))
            u, v = (res.fields[f"{c}_mean"][field, time_index][::step, ::step] for c in ("u", "v"))
            arrow_key(ax, ax.quiver(xx, yy, u, v, color="k", alpha=0.6), np.hypot(u, v),
                      "model units" if mapping is None else "m/s")
        ax.set_title(title)
    fig.colorbar(im, ax=maps[: len(psi_panels)], shrink=0.8, label=r"$\psi$ - spatial mean" + units[0])
    im = maps[-1].imshow(speed_std, cmap="viridis", **extent)
    fig.colorbar(im, ax=maps[-1], shrink=0.8, label="std of velocity" + units[1])
    maps[-1].set_title("total predictive std of velocity" if total else "posterior std of velocity")
    labels = ("x", "y") if mapping is None else (("longitude (degrees east)", "latitude (degrees north)")
                                                 if mapping.coordinates == "lonlat" else ("x (km)", "y (km)"))
    aspect = ("equal" if mapping is None or mapping.coordinates != "lonlat"
              else 1 / np.cos(np.deg2rad(mapping.centre[1])))
    for ax in maps:
        if mapping is not None and mapping.coordinates == "lonlat":
            draw_land(ax, (west, east), (south, north))
        _draw_tracks(ax, tracks, field, to_map)
        ax.set(xlabel=labels[0], ylabel=labels[1], xlim=(west, east), ylim=(south, north), aspect=aspect)
    when = f"t = {t:.4g} (model time)"
    if mapping is not None:
        when = np.datetime_as_string(result_dates(mapping, [t])[0], unit="m").replace("T", " ") + " UTC"
        if tracks is not None:
            _draw_timeline(axes[-1], tracks, field, mapping, t)
    which = f", field {field} of {n_field}" if n_field > 1 else ""
    fig.suptitle(f"lagda assimilation ({res.method}){which}, {when}")
    return fig


KEY_STEPS = (1.0, 2.0, 5.0)  # the arrow key's speed: one of these times a power of ten


def key_speed(speeds, percentile: float = 90.0) -> float:
    """Returns the arrow key's speed: the largest of KEY_STEPS x 10^n not above the `percentile` of the finite
    `speeds` (the typical long arrow), 1 when none is positive.

    Examples
    --------
    >>> key_speed(np.array([0.01, 0.03, 0.08, 0.12]))
    0.1
    """
    speeds = np.asarray(speeds, np.float64)
    speeds = speeds[np.isfinite(speeds) & (speeds > 0)]
    if not len(speeds):
        return 1.0
    typical = float(np.percentile(speeds, percentile))
    power = 10.0 ** np.floor(np.log10(typical))
    return float(max(step * power for step in KEY_STEPS if step * power <= typical * (1 + 1e-9)))


def arrow_key(ax, quiver, speeds, unit: str, percentile: float = 90.0):
    """Returns the scale key of the arrows `quiver` drawn on `ax` (matplotlib QuiverKey): an arrow of `key_speed`
    of the `speeds` shown (at most their `percentile`), labelled with it and `unit` ("0.1 m/s"), in the axes' top
    right corner on a white box (over the field, under nothing)."""
    from matplotlib.patches import FancyBboxPatch

    speed = key_speed(speeds, percentile)
    ax.add_patch(FancyBboxPatch((0.52, 0.905), 0.46, 0.075, boxstyle="round,pad=0.01", transform=ax.transAxes,
                                facecolor="w", edgecolor="0.4", linewidth=0.5, zorder=7))
    return ax.quiverkey(quiver, 0.9, 0.942, speed, f"{speed:g} {unit}", labelpos="W", coordinates="axes",
                        color="k", labelcolor="k", zorder=8, fontproperties={"size": 8})


def _map_coordinates(mapping):
    """Returns (x, y) -> map coordinates: lon/lat degrees, or km for projected tracks."""
    if mapping.coordinates == "lonlat":
        return mapping.from_model
    return lambda x, y: tuple(v / 1e3 for v in mapping.from_model(x, y))


MAX_LABELLED_DRIFTERS = 12  # the fixes panel names at most this many drifters


def _draw_timeline(ax, tracks: Tracks, field: int, mapping, t: float) -> None:
    """Draws each drifter's fixes of the field against the date (gaps show as breaks), a line at time t."""
    import matplotlib.dates as mdates

    rows = np.flatnonzero(np.asarray(tracks.field) == field)
    to_date = lambda model_t: (mapping.time_from_model(model_t) * 1e3).astype("datetime64[ms]")
    marker = max(0.5, min(6.0, 200.0 / max(len(rows), 1)))  # thinner rows for many drifters
    for row, i in enumerate(rows):
        ok = np.isfinite(tracks.times[i]) & np.all(np.isfinite(tracks.positions[i]), axis=-1)
        ax.plot(to_date(tracks.times[i][ok]), np.full(int(ok.sum()), row), "|", color="orange", ms=marker)
    ax.axvline(to_date(np.array(t)), color="k", lw=0.8)
    ids = np.asarray(tracks.trajectory_id)[rows]
    if len(rows) <= MAX_LABELLED_DRIFTERS:
        ax.set_yticks(range(len(rows)), [str(v) for v in ids])
    else:  # a few ids as labels: hundreds of them are unreadable
        ticks = np.linspace(0, len(rows) - 1, MAX_LABELLED_DRIFTERS).round().astype(int)
        ax.set_yticks(ticks, [str(ids[k]) for k in ticks], fontsize=6)
    locator = mdates.AutoDateLocator(maxticks=5)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set(xlabel="date (UTC)", ylabel=f"drifter ({len(rows)})", title="fixes per drifter (gaps)")


def _without_mean(image) -> np.ndarray:
    """Returns a gridded psi `(y, x)` minus its spatial mean (the k = (0, 0) term on a regular grid)."""
    image = np.asarray(image, np.float64)
    return image - image.mean()


def _draw_tracks(ax, tracks: Tracks | None, field: int, to_map=lambda x, y: (x, y)) -> None:
    """Draws the field's tracks, wrapped onto the torus, with their first observation marked."""
    if tracks is None:
        return
    for i in np.flatnonzero(np.asarray(tracks.field) == field):
        pieces = [to_map(x, y) for x, y in wrapped_segments(tracks.positions[i, :, 0], tracks.positions[i, :, 1])]
        for x, y in pieces:
            ax.plot(x, y, "-", color="orange", lw=1.2)
        if pieces:
            ax.plot(pieces[0][0][0], pieces[0][1][0], "o", color="orange", ms=4)
