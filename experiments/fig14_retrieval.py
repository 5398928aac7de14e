"""Figure 14: retrieval R@1 / R@5 during training, train and test, both directions.

Reads a run's metrics.jsonl and draws a 2x2 grid (rows: coef_to_traj, traj_to_coef;
columns: R@1, R@5), writing results/fig14_retrieval.png and results/fig14_retrieval.csv.

    python3 experiments/fig14_retrieval.py --run RUN_DIR          # seconds
    python3 experiments/fig14_retrieval.py --quick                # trains a tiny run first (~1 min)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile

import sys

import matplotlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout without installing
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DIRECTIONS = ("coef_to_traj", "traj_to_coef")
KS = (1, 5)


def read_metrics(run_dir) -> list[dict]:
    """Returns the per-epoch records of run_dir/metrics.jsonl that hold retrieval metrics."""
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir}")
    return [r for r in map(json.loads, path.read_text().splitlines()) if "train/coef_to_traj/R@1" in r]


def plot(records: list[dict], out: pathlib.Path) -> None:
    """Draws the 2x2 Figure-14 grid from the records and writes out (.png) and its .csv."""
    fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True, sharey=True)
    epochs = [r["epoch"] for r in records]
    rows = ["epoch," + ",".join(f"{s}/{d}/R@{k}" for d in DIRECTIONS for k in KS for s in ("train", "test"))]
    for r in records:
        rows.append(f"{r['epoch']}," + ",".join(str(r.get(f"{s}/{d}/R@{k}", "")) for d in DIRECTIONS for k in KS
                                               for s in ("train", "test")))
    for i, direction in enumerate(DIRECTIONS):
        for j, k in enumerate(KS):
            ax = axes[i, j]
            for split in ("train", "test"):
                key = f"{split}/{direction}/R@{k}"
                ax.plot(epochs, [r.get(key, float("nan")) for r in records], "o-", label=split)
            ax.set_title(f"{direction.replace('_', ' ')}  R@{k}")
            ax.set_ylim(0, 1)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    for ax in axes[1]:
        ax.set_xlabel("epoch")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    out.with_suffix(".csv").write_text("\n".join(rows) + "\n")


def _quick_run(root: pathlib.Path) -> pathlib.Path:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
    from test_train import make_pairs
    from lagda.learning.config import tiny
    from lagda.learning.train import train
    return train(tiny(epochs=3, eval_library=16), make_pairs(32, 1), make_pairs(16, 2), root / "run", progress=False)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="run directory with metrics.jsonl")
    parser.add_argument("--quick", action="store_true", help="train a tiny run and plot it (smoke test)")
    parser.add_argument("--out", default="results/fig14_retrieval.png")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = _quick_run(pathlib.Path(tmp)) if args.quick else args.run
        if run is None:
            parser.error("give --run RUN_DIR or --quick")
        records = read_metrics(run)
        plot(records, pathlib.Path(args.out))
    last = records[-1]
    print(" ".join(f"{k}={100 * v:.1f}%" for k, v in last.items() if "/R@" in k))


if __name__ == "__main__":
    main()
