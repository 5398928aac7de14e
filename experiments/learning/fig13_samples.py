"""Figure 13 of the paper: potential fields psi at t = 0 paired with their drifter trajectories.

The paper shows two samples of the prior (K = 49 modes, release at (0.75, 0.75), T = 0.1) on
the periodic domain [0, 1]^2. This script draws `--n` samples of a lagda dataset, tracks reduced
mod 1 and broken where they wrap, and writes results/fig13_samples.png.

Commands (from the repository root):
    python -m experiments.learning.fig13_samples --data data/example_small.nc    # about 5 s
    python -m experiments.learning.fig13_samples --quick    # makes a 4-field small dataset first, about 15 s
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")


from simulate import schema
from simulate.config import small
from simulate.generate import generate_dataset, wander_statistics
from simulate.plot import plot_samples


def main(argv=None) -> int:
    """Writes the figure; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a lagda dataset (netCDF)")
    parser.add_argument("--quick", action="store_true", help="generate a 4-field small dataset instead")
    parser.add_argument("--n", type=int, default=2, help="samples to draw (the paper shows 2)")
    parser.add_argument("--out", default="results/fig13_samples.png")
    args = parser.parse_args(argv)
    if (args.data is None) == (not args.quick):
        parser.error("give exactly one of --data FILE or --quick")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.data or generate_dataset(small(n_samples=max(args.n, 4), chunk_size=4), Path(tmp) / "quick.nc")
        with schema.open_dataset(path, load=True) as ds:
            fig = plot_samples(ds, range(min(args.n, ds.sizes["sample"])))
            stats = wander_statistics(ds)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"wrote {out} in {time.perf_counter() - start:.1f} s; over the dataset: median |z(T) - z(0)| = "
          f"{stats['median_displacement']:.3f}, tracks leaving the unit square: {100 * stats['fraction_leaving']:.0f}% "
          "(the paper gives no number; its Figure 13 shows two tracks crossing a good part of the domain)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
