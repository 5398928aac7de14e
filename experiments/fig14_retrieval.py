"""Figure 14: retrieval R@k during training, train and test, both directions.

Reads a run's metrics.jsonl and draws a grid as the paper's Figure 14 does (rows: trajectory
-> coefficient, then coefficient -> trajectory; one column per k of R@1, R@5 and, where the
run has it, R@10), writing a .png and a .csv (one row per evaluated epoch, with its library size).
`--final FILE` adds the retrieval of the last epoch against larger libraries (the JSON of
`lagda evaluate`, with "<split>/library" sizes), drawn as stars and written as a last row.

    python3 experiments/fig14_retrieval.py --run RUN_DIR          # seconds
    python3 experiments/fig14_retrieval.py --quick                # trains a tiny run first (~1 min)

The paper preset on one H200 (results/paper_gpu: the run's metrics.jsonl and config.json, the
full-library final_eval.json, the device logs). Two device calls ran, from a copy of this
library, what follows; the first stopped training at its deadline after epoch 12 (SIGTERM by
`timeout`), the second (`--resume`, the same machine still warm) after epoch 14:

    lagda simulate --preset paper --seed 1 --out paper_1.nc --chunk-size 32768
    lagda simulate --preset paper --seed 2 --out paper_2.nc --chunk-size 32768
    timeout SECONDS lagda train --preset paper --epochs 20 --train paper_1.nc --test paper_2.nc --run-dir run \
        --eval-library 4096 --keep-checkpoints 1 --no-progress        # then the same with --resume
    lagda evaluate --model run --data paper_2.nc --split test         # and paper_1.nc --split train
    python3 benchmarks/bench_simulate.py --fast-batch 65536 --repeats 2
    python3 experiments/fig14_retrieval.py --run results/paper_gpu --final results/paper_gpu/final_eval.json \
        --out docs/figures/fig14_paper.png --csv results/fig14_paper.csv --paper
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import matplotlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout without installing
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DIRECTIONS = ("traj_to_coef", "coef_to_traj")  # the paper's rows: top, bottom
SPLITS = ("train", "test")
NAMES = {"traj": "trajectory", "coef": "coefficients"}
# The paper's Figure 14 as its text describes it (section 6.3); it gives no numbers, so these are qualitative.
PAPER = {"R@5": "approaches 100% on train and test by epoch 20",
         "R@1": "below R@5, rising over the 20 epochs",
         "direction": "generally higher for coef -> traj (trajectories from potentials) than traj -> coef",
         "library": "the whole 32,268-field test set"}


def read_metrics(run_dir) -> list[dict]:
    """Returns the per-epoch records of run_dir/metrics.jsonl that hold retrieval metrics."""
    path = pathlib.Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir}")
    return [r for r in map(json.loads, path.read_text().splitlines()) if "train/coef_to_traj/R@1" in r]


def recall_ks(records: list[dict]) -> list[int]:
    """Returns the sorted k of every R@k key in the records."""
    return sorted({int(key.rsplit("@", 1)[1]) for r in records for key in r if "/R@" in key})


def run_config(run_dir) -> dict:
    """Returns the run's config.json as a dict ({} if it has none)."""
    path = pathlib.Path(run_dir) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def csv_rows(records: list[dict], ks: list[int], library, final: dict | None) -> list[str]:
    """Returns the CSV lines: a header, one row per evaluated epoch, and the final full-library row."""
    keys = [f"{s}/{d}/R@{k}" for d in DIRECTIONS for k in ks for s in SPLITS]
    rows = ["epoch,train_library,test_library," + ",".join(keys)]
    for r in records:
        rows.append(f"{r['epoch']},{library or ''},{library or ''}," + ",".join(str(r.get(k, "")) for k in keys))
    if final:
        sizes = ",".join(str(final.get(f"{s}/library", "")) for s in SPLITS)
        rows.append(f"{records[-1]['epoch']},{sizes}," + ",".join(str(final.get(k, "")) for k in keys))
    return rows


def plot(records: list[dict], out: pathlib.Path, csv: pathlib.Path | None = None, library=None,
         final: dict | None = None, epochs_planned: int | None = None) -> None:
    """Draws the Figure-14 grid from the records (and the final full-library stars); writes out and csv.

    `epochs_planned`: the run's configured epochs, the x range (a run stopped early shows how far it got).
    """
    ks = recall_ks(records)
    fig, axes = plt.subplots(2, len(ks), figsize=(3.6 * len(ks) + 1, 6), sharex=True, sharey=True, squeeze=False)
    epochs = [r["epoch"] for r in records]
    for i, direction in enumerate(DIRECTIONS):
        for j, k in enumerate(ks):
            ax = axes[i, j]
            for split, color in zip(SPLITS, ("C0", "C1")):
                key = f"{split}/{direction}/R@{k}"
                label = split if library is None else f"{split} ({library:,} library)"
                ax.plot(epochs, [r.get(key, float("nan")) for r in records], "o-", color=color, ms=3, label=label)
                if final and key in final:
                    ax.plot(epochs[-1], final[key], "*", color=color, ms=12, mec="k",
                            label=f"{split}, {final[f'{split}/library']:,} library")
            source, target = (NAMES[side] for side in direction.split("_to_"))
            ax.set_title(f"{source} -> {target}  R@{k}", fontsize=10)
            ax.set_ylim(0, 1)
            ax.set_xlim(0.5, max(epochs_planned or 0, epochs[-1]) + 0.5)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("epoch")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    csv = out.with_suffix(".csv") if csv is None else csv
    csv.parent.mkdir(parents=True, exist_ok=True)
    csv.write_text("\n".join(csv_rows(records, ks, library, final)) + "\n")


def compare_with_paper(records: list[dict], library, final: dict | None) -> str:
    """Returns lines of our last-epoch R@k (per-epoch and full libraries) beside the paper's Figure 14."""
    last, ks = records[-1], recall_ks(records)
    lines = [f"epoch {last['epoch']}: R@k in % (train / test)"]
    for direction in DIRECTIONS:
        for k in ks:
            ours = " / ".join(f"{100 * last[f'{s}/{direction}/R@{k}']:.1f}" for s in SPLITS)
            line = f"  {direction} R@{k}: {ours} ({library or '?'} library)"
            if final and f"test/{direction}/R@{k}" in final:
                full = " / ".join(f"{100 * final[f'{s}/{direction}/R@{k}']:.1f}" for s in SPLITS)
                line += f"; {full} ({final['train/library']:,} / {final['test/library']:,} library)"
            lines.append(line)
    lines.append("the paper's Figure 14 (qualitative, from its text):")
    lines += [f"  {key}: {value}" for key, value in PAPER.items()]
    return "\n".join(lines)


def _quick_run(root: pathlib.Path) -> pathlib.Path:
    from lagda.learning.config import tiny
    from lagda.learning.train import train
    from lagda.testing import make_pairs
    return train(tiny(epochs=3, eval_library=16), make_pairs(32, 1), make_pairs(16, 2), root / "run", progress=False)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="run directory with metrics.jsonl")
    parser.add_argument("--quick", action="store_true", help="train a tiny run and plot it (smoke test)")
    parser.add_argument("--out", default="results/fig14_retrieval.png")
    parser.add_argument("--csv", default=None, help="CSV path (default: --out with .csv)")
    parser.add_argument("--final", default=None, help="JSON of the last epoch's R@k against larger libraries")
    parser.add_argument("--paper", action="store_true", help="print the last epoch beside the paper's Figure 14")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = _quick_run(pathlib.Path(tmp)) if args.quick else args.run
        if run is None:
            parser.error("give --run RUN_DIR or --quick")
        records, config = read_metrics(run), run_config(run)
        library = config.get("eval_library")
        final = json.loads(pathlib.Path(args.final).read_text()) if args.final else None
        plot(records, pathlib.Path(args.out), None if args.csv is None else pathlib.Path(args.csv), library, final,
             config.get("epochs"))
    if args.paper:
        print(compare_with_paper(records, library, final))
    else:
        print(" ".join(f"{k}={100 * v:.1f}%" for k, v in records[-1].items() if "/R@" in k))


if __name__ == "__main__":
    main()
