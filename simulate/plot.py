"""Figures of datasets: the potential psi at t = 0 with its drifter track (paper, Figure 13).

Only matplotlib's object API is used (no pyplot state), so callers choose the backend; the
experiment scripts use Agg.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from simulate.flow import grid_fields


def wrapped_segments(x, y) -> list[tuple[np.ndarray, np.ndarray]]:
    """Returns a track reduced mod 1 as pieces that never jump across the domain.

    Parameters
    ----------
    x, y
        positions `(obs,)`, unwrapped or already reduced mod 1; points with a NaN
        coordinate (missing observations, padding) are dropped.

    Returns
    -------
    list[tuple[np.ndarray, np.ndarray]]
        A list of (x, y) pairs of `(n,)` arrays in [0, 1); a new piece starts wherever the
        periodic cell `floor(x), floor(y)` changes (an unwrapped track wraps) or the reduced
        positions jump by more than half the domain (a track given already reduced mod 1).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if not len(x):
        return []
    cell = np.stack([np.floor(x), np.floor(y)], -1)
    wrapped = np.stack([np.mod(x, 1.0), np.mod(y, 1.0)], -1)
    jumps = np.any(cell[1:] != cell[:-1], axis=-1) | np.any(np.abs(np.diff(wrapped, axis=0)) > 0.5, axis=-1)
    breaks = np.flatnonzero(jumps) + 1
    return [(xs, ys) for xs, ys in zip(np.split(wrapped[:, 0], breaks), np.split(wrapped[:, 1], breaks))]


def potential_at_release(ds, samples, n_grid: int = 128) -> np.ndarray:
    """Returns psi at t = 0 on the grid x_i = i / n_grid, `(sample, y, x)`, for the chosen samples."""
    coef = (ds["coef_re"].values[samples] + 1j * ds["coef_im"].values[samples]).astype(np.complex64)  # plotting
    psi, _, _ = grid_fields(jnp.asarray(coef), jnp.asarray(ds["k1"].values), jnp.asarray(ds["k2"].values),
                            jnp.asarray(ds["omega"].values, jnp.float32), jnp.zeros(1, jnp.float32), n_grid)
    return np.asarray(psi[:, 0])


def plot_samples(ds, samples=(0, 1), n_grid: int = 128) -> Figure:
    """Returns a figure with, per sample, psi(., t = 0) and that sample's drifter tracks.

    Tracks are drawn on the periodic domain [0, 1)^2 (reduced mod 1, broken where they wrap);
    a dot marks each release point.

    Parameters
    ----------
    ds
        a lagda dataset (`simulate.schema.open_dataset`).
    samples
        indices along `sample`.
    n_grid
        grid points per side for psi.

    Raises
    ------
    ValueError
        if a sample index is out of range.
    """
    samples = list(samples)
    if not samples or min(samples) < 0 or max(samples) >= ds.sizes["sample"]:
        raise ValueError(f"samples {samples} out of range for a dataset of {ds.sizes['sample']} fields")
    psi = potential_at_release(ds, samples, n_grid)
    fig = Figure(figsize=(4.2 * len(samples), 3.8), layout="constrained")
    axes = fig.subplots(1, len(samples), squeeze=False)[0]
    extent = (0.0, 1.0, 0.0, 1.0)
    for ax, sample, field in zip(axes, samples, psi):
        image = ax.imshow(field, origin="lower", extent=extent, cmap="RdBu_r", interpolation="bilinear")
        fig.colorbar(image, ax=ax, shrink=0.85, label=r"$\psi(z, 0)$")
        for drifter in range(ds.sizes["drifter"]):
            x, y = ds["x"].values[sample, drifter], ds["y"].values[sample, drifter]
            x0, y0 = ds["x0"].values[sample, drifter], ds["y0"].values[sample, drifter]
            for xs, ys in wrapped_segments(np.concatenate([[x0], x]), np.concatenate([[y0], y])):
                ax.plot(xs, ys, color="k", lw=1.2)
            ax.plot(np.mod(x0, 1), np.mod(y0, 1), "o", color="gold", mec="k", ms=6)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="x", ylabel="y", title=f"sample {sample}", aspect="equal")
    return fig
