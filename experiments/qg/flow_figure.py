"""README figure "Ocean turbulence from a QG model": one turbulent pyqg-jax flow's vorticity with its drifters.

Simulates one flow of the `qg` preset (pyqg's default two-layer model on 64^2, five years of
spin-up, then 64 drifters released uniformly and followed hourly for 60 days), and draws the
upper-layer relative vorticity zeta = laplacian(psi), in units of f0 = 1e-4 1/s, at the release
and at day 60, with the drifter tracks over the first 10 days and over the whole window. Prints
the RMS speed and the drifters' median displacement.

    python -m experiments.qg.flow_figure            # ~35 s on the 2-core CPU -> docs/figures/qg_flow.png
    python -m experiments.qg.flow_figure --quick    # the tiny preset, a few seconds -> results/qg_flow_quick.png
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from simulate import qg

F0 = 1e-4  # a mid-latitude Coriolis parameter, 1/s (the vorticity scale of the colour bar)


def vorticity(psi: np.ndarray, L: float) -> np.ndarray:
    """Returns laplacian(psi) `(ny, nx)` of a periodic psi `(ny, nx)` on a square of side L, spectrally."""
    n = psi.shape[-1]
    k = 2 * np.pi / L * np.fft.fftfreq(n, 1.0 / n)
    return np.real(np.fft.ifft2(-(k[None, :] ** 2 + k[:, None] ** 2) * np.fft.fft2(psi)))


def wrapped(track: np.ndarray, L: float) -> np.ndarray:
    """Returns a track `(obs, 2)` reduced into [0, L)^2 (km), NaN where it jumps across the periodic boundary."""
    z = np.mod(track, L) / 1e3
    jump = np.any(np.abs(np.diff(z, axis=0)) > 0.5 * L / 1e3, axis=1)
    out = np.insert(z, np.flatnonzero(jump) + 1, np.nan, axis=0)
    return out


def draw(config: qg.QGConfig, flows: qg.QGFlows, out: Path) -> None:
    L, days = config.L, config.window_days
    n_early = int(round(10 * 86400 / config.obs_interval))
    zeta = [vorticity(flows.psi[0, i], L) / F0 for i in (0, -1)]
    scale = np.percentile(np.abs(np.concatenate([z.ravel() for z in zeta])), 99)
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), constrained_layout=True)
    titles = ("vorticity at the release, tracks over days 0-10",
              f"vorticity at day {days:g}, tracks over days 0-{days:g}")
    for ax, z, title, n in zip(axes, zeta, titles, (n_early, config.n_obs)):
        image = ax.imshow(z, origin="lower", extent=(0, L / 1e3, 0, L / 1e3), cmap="RdBu_r", vmin=-scale, vmax=scale)
        for d in range(config.n_drifters):
            track = np.concatenate([flows.release[0, d][None], flows.positions[0, d, :n]])
            xy = wrapped(track, L)
            ax.plot(xy[:, 0], xy[:, 1], color="k", lw=0.7)
            ax.plot(*(flows.release[0, d] % L / 1e3), "o", color="gold", ms=2.5, mec="k", mew=0.3)
        ax.set(title=title, xlabel="x (km)", ylabel="y (km)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="upper-layer relative vorticity / f0 (f0 = 1e-4 1/s)")
    fig.suptitle(f"pyqg-jax two-layer QG turbulence, {config.nx}^2, after {config.spin_up_days / 365:g} years of "
                 f"spin-up: {config.n_drifters} drifters, hourly positions")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tiny preset (16^2, 4 days) for a smoke run")
    parser.add_argument("--out", type=Path,
                        help="figure path (default docs/figures/qg_flow.png, or results/ with --quick)")
    args = parser.parse_args(argv)
    config = qg.tiny("turbulence") if args.quick else qg.turbulence(n_drifters=64, seed=0)
    out = args.out or (Path("results/qg_flow_quick.png") if args.quick else Path("docs/figures/qg_flow.png"))
    start = time.perf_counter()
    flows = qg.simulate_qg(config)
    seconds = time.perf_counter() - start
    speed = np.sqrt(np.mean(flows.u[0] ** 2 + flows.v[0] ** 2))
    moved = np.median(np.linalg.norm(flows.positions[0, :, -1] - flows.release[0], axis=-1)) / 1e3
    print(f"simulated in {seconds:.1f} s: upper-layer RMS speed {speed:.3f} m/s over the window, "
          f"median drifter displacement after {config.window_days:g} days {moved:.0f} km")
    draw(config, flows, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
