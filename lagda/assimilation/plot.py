"""Figure of an assimilation result: true and recovered psi on one colour scale, their error, the
velocity's uncertainty, the tracks; for physical results in degrees, m/s and dates."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from lagda.io.land import draw_land
from lagda.io.physical import iso_time
from lagda.io.results import Result, read_result
from lagda.io.tracks import Tracks
from simulate.atomic import write_atomic
from simulate.flow import grid_fields
from simulate.plot import wrapped_segments


def plot_assimilation(result, out_png, tracks: Tracks | None = None, truth=None, field: int = 0,
                      time_index: int = -1) -> str:
    """Returns `out_png` after drawing `assimilation_figure` of one field at one grid time.

    Args:
        result: a result file path or a `Result` from `read_result`.
        out_png: output image path (written via a temporary file + rename).
        tracks, truth, field, time_index: as in `assimilation_figure`.
    Raises:
        ValueError: if `field` or `time_index` is out of range.
    """
    res: Result = result if isinstance(result, Result) else read_result(result)
    fig = assimilation_figure(res, tracks, truth, field, time_index)
    # format given: the temporary name has no .png suffix
    write_atomic(out_png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    return str(out_png)


def assimilation_figure(res: Result, tracks: Tracks | None = None, truth=None, field: int = 0,
                        time_index: int = -1) -> Figure:
    """Returns the figure of one field of a result at one grid time.

    Panels: true psi, posterior-mean psi with the mean velocity as arrows and the error (posterior
    mean - true psi), all three on one colour scale, then the posterior std of the velocity (its
    total predictive std where the result has one). Without a known truth only the last two panels
    are drawn. psi is shown without its spatial mean: the constant mode k = (0, 0) moves no drifter,
    so no track can recover it. The field's tracks are overlaid on each panel, wrapped onto the
    torus. For a result in physical units (`res.mapping`) the maps are in longitude/latitude
    (degrees, the land drawn over them in grey; or km for projected tracks), psi in m^2/s and the
    spread in m/s, the title gives the date, and a last panel shows each drifter's fixes against the
    date (its gaps).

    Args:
        res: a `Result` from `read_result`.
        tracks: observed tracks; defaults to those stored in the result.
        truth: complex `(field, mode)` true coefficients; defaults to the result's.
        field, time_index: which field and grid time to draw.
    Raises:
        ValueError: if `field` or `time_index` is out of range.
    """
    n_field, n_time = res.fields["psi_mean"].shape[:2]
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
            ax.quiver(xx, yy, res.fields["u_mean"][field, time_index][::step, ::step],
                      res.fields["v_mean"][field, time_index][::step, ::step], color="k", alpha=0.6)
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
    when = f"t = {t:.4g}"
    if mapping is not None:
        when = iso_time(mapping.time_from_model(t)).replace("T", " ").replace(":00Z", " UTC")
        if tracks is not None:
            _draw_timeline(axes[-1], tracks, field, mapping, t)
    fig.suptitle(f"lagda assimilation ({res.method}), field {field}, {when}")
    return fig


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
