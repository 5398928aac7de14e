"""Figure of an assimilation result: true psi, recovered psi with velocity, its uncertainty, tracks."""

from __future__ import annotations


import numpy as np

from simulate.atomic import write_atomic
from lagda.io.results import Result, read_result
from lagda.io.tracks import Tracks
from simulate.flow import grid_fields


def wrapped_segments(positions) -> tuple[np.ndarray, np.ndarray]:
    """Returns x, y `(n,)` of an unwrapped track `(obs, 2)` reduced mod 1, NaN-separated where it wraps.

    A NaN is inserted between consecutive points whose wrapped positions jump by more than half
    the domain, so a line plot does not draw across the torus.
    """
    p = np.asarray(positions, np.float64)
    p = p[np.all(np.isfinite(p), axis=-1)]
    w = np.mod(p, 1.0)
    breaks = np.flatnonzero(np.any(np.abs(np.diff(w, axis=0)) > 0.5, axis=1)) + 1
    w = np.insert(w, breaks, np.nan, axis=0)
    return w[:, 0], w[:, 1]


def plot_assimilation(result, out_png, tracks: Tracks | None = None, truth=None, field: int = 0, time_index: int = -1) -> str:
    """Returns `out_png` after drawing the result of one field at one grid time.

    Panels: true psi (when `truth` or the result's stored truth is known), posterior-mean psi
    with the mean velocity as arrows, posterior std of the velocity; the field's tracks are overlaid on
    each panel, wrapped onto the torus.

    Args:
        result: a result file path or a `Result` from `read_result`.
        out_png: output image path (written via a temporary file + rename).
        tracks: observed tracks; defaults to those stored in the result.
        truth: complex `(field, mode)` true coefficients; defaults to the result's.
        field, time_index: which field and grid time to draw.
    Raises:
        ValueError: if `field` or `time_index` is out of range.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res: Result = result if isinstance(result, Result) else read_result(result)
    n_field, n_time = res.fields["psi_mean"].shape[:2]
    if not 0 <= field < n_field or not -n_time <= time_index < n_time:
        raise ValueError(f"field {field} / time index {time_index} out of range: the result has {n_field} fields, {n_time} times")
    tracks = res.tracks if tracks is None else tracks
    truth = res.true_coef if truth is None else truth
    t = float(res.time[time_index])
    panels = []
    if truth is not None:
        psi_true = np.asarray(grid_fields(np.asarray(truth)[field : field + 1], res.k1, res.k2, res.omega, res.time[[time_index]], len(res.x))[0])
        panels.append(("true psi", psi_true[0, 0], "RdBu_r"))
    panels.append(("posterior mean psi and velocity", res.fields["psi_mean"][field, time_index], "RdBu_r"))
    # The std of psi is dominated by the constant c_(0,0), which no track can see; the
    # velocity's spread is the uncertainty a user can act on.
    speed_std = np.hypot(res.fields["u_std"][field, time_index], res.fields["v_std"][field, time_index])
    panels.append(("posterior std of velocity", speed_std, "viridis"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), constrained_layout=True)
    extent = (0.0, 1.0, 0.0, 1.0)
    for ax, (title, image, cmap) in zip(np.atleast_1d(axes), panels):
        im = ax.imshow(image, origin="lower", extent=extent, cmap=cmap, interpolation="bilinear")
        fig.colorbar(im, ax=ax, shrink=0.8)
        if title.startswith("posterior mean"):
            step = max(1, len(res.x) // 16)
            xx, yy = np.meshgrid(res.x[::step], res.y[::step])
            ax.quiver(xx, yy, res.fields["u_mean"][field, time_index][::step, ::step],
                      res.fields["v_mean"][field, time_index][::step, ::step], color="k", alpha=0.6)
        _draw_tracks(ax, tracks, field)
        ax.set(title=title, xlabel="x", ylabel="y", xlim=(0, 1), ylim=(0, 1), aspect="equal")
    fig.suptitle(f"lagda assimilation ({res.method}), field {field}, t = {t:.4g}")
    try:  # format given: the temporary name has no .png suffix
        write_atomic(out_png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)
    return str(out_png)


def _draw_tracks(ax, tracks: Tracks | None, field: int) -> None:
    """Draws the field's tracks, wrapped, with their start marked."""
    if tracks is None:
        return
    for i in np.flatnonzero(np.asarray(tracks.field) == field):
        x, y = wrapped_segments(tracks.positions[i])
        if len(x):
            ax.plot(x, y, "-", color="orange", lw=1.2)
            ax.plot(x[0], y[0], "o", color="orange", ms=4)
