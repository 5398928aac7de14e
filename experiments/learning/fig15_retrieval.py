"""Figure 15: one trajectory, its true psi at t = 0, and the top-3 retrieved potentials.

Embeds the query track with a trained run's g_v, retrieves the 3 most similar coefficient
vectors of the test library (Algorithm 1 with the masked cosine similarity of the run) and
draws them with their softmax weights (eq. 28, at the run's temperature). Writes
results/fig15_retrieval.png.

    python -m experiments.learning.fig15_retrieval --run RUN_DIR --data TEST.nc [--index 0]
    python -m experiments.learning.fig15_retrieval --quick       # tiny run on data/example_small.nc (~1 min)
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from experiments.common.paths import ROOT
from lagda.learning.data import check_same_modes, load_paired  # noqa: E402
from lagda.learning.encoders import embed_coefficients, similarity_mask  # noqa: E402
from lagda.learning.model import embed_tracks, load_run  # noqa: E402
from lagda.learning.retrieval import softmax_weights, top_k  # noqa: E402
from simulate.flow import grid_fields  # noqa: E402


def retrieve(run_dir, data_path, index: int, k: int = 3):
    """Returns (data, library indices `(k,)`, similarities `(k,)`, weights `(k,)`) for one query track."""
    encoder, config, meta = load_run(run_dir)
    data = load_paired(data_path)
    check_same_modes(meta, data, f"dataset {data_path}")
    if not 0 <= index < data.n_samples:
        raise ValueError(f"--index must be in [0, {data.n_samples}), got {index}")
    mask = jnp.asarray(similarity_mask(data.k1, data.k2, config.mask_mean_mode))
    query = jnp.asarray(embed_tracks(encoder, data.positions[index:index + 1])) * mask[None]
    bank = embed_coefficients(jnp.asarray(data.coef)) * mask[None]
    idx, scores = top_k(query, bank, k)
    weights = softmax_weights(scores[0] / config.tau)
    return data, np.asarray(idx[0]), np.asarray(scores[0]), np.asarray(weights)


def plot(data, index: int, idx, scores, weights, out: pathlib.Path, n_grid: int = 64) -> None:
    """Draws the track over its true psi(t=0) and the retrieved psi(t=0) panels; writes out."""
    coef = jnp.asarray(np.concatenate([data.coef[index:index + 1], data.coef[idx]]))
    psi = np.asarray(grid_fields(coef, jnp.asarray(data.k1), jnp.asarray(data.k2), jnp.asarray(data.omega),
                                 jnp.zeros(1), n_grid)[0])[:, 0]
    fig, axes = plt.subplots(1, 1 + len(idx), figsize=(3.2 * (1 + len(idx)), 3.3))
    lim = float(np.abs(psi).max())
    track = np.mod(data.positions[index, 0], 1.0)
    for i, ax in enumerate(axes):
        ax.imshow(psi[i], origin="lower", extent=(0, 1, 0, 1), cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.plot(track[:, 0], track[:, 1], ".", ms=0.6, color="k")
        ax.set_xticks([]), ax.set_yticks([])
        if i == 0:
            ax.set_title(f"true psi (field {index})")
        else:
            hit = " = truth" if idx[i - 1] == index else ""
            ax.set_title(f"#{i}: field {idx[i - 1]}{hit}\ncos {scores[i - 1]:.3f}, weight {weights[i - 1]:.2f}",
                         fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _quick_run(root: pathlib.Path) -> pathlib.Path:
    from lagda.learning.config import tiny
    from lagda.learning.train import train

    data = ROOT / "data" / "example_small.nc"
    train(tiny(physics=True, epochs=2, eval_library=0), data, None, root / "run", progress=False)
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="trained run directory")
    parser.add_argument("--data", help="test dataset (.nc) with the run's modes")
    parser.add_argument("--index", type=int, default=0, help="query field")
    parser.add_argument("--out", default=str(ROOT / "results" / "fig15_retrieval.png"))
    parser.add_argument("--quick", action="store_true", help="train a tiny physics run on data/example_small.nc")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:
            args.data = _quick_run(pathlib.Path(tmp))
            args.run = pathlib.Path(tmp) / "run"
        if not args.run or not args.data:
            parser.error("--run and --data are required without --quick")
        data, idx, scores, weights = retrieve(args.run, args.data, args.index)
        plot(data, args.index, idx, scores, weights, pathlib.Path(args.out))
    print(f"wrote {args.out}: top-3 {idx.tolist()} cos {np.round(scores, 3).tolist()} weights "
          f"{np.round(weights, 2).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
