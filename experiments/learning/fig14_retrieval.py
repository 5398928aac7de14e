"""Figure 14: retrieval R@k during training, train and test, both directions.

Reads a run's metrics.jsonl and draws a grid as the paper's Figure 14 does (rows: trajectory
-> coefficient, then coefficient -> trajectory; one column per k of R@1, R@5 and, where the
run has it, R@10), writing a .png and a .csv (one row per evaluated epoch, with its library size).
`--final FILE ...` adds the last checkpoint's retrieval against other libraries (the JSON of
`lagda evaluate`: the whole set, or with `--library-size 128 --blocks` the mean over the disjoint
libraries of one training batch; one file per split at the same library size is joined into one), one
marker each and a last CSV row each; `--baseline RUN`
draws another run's curves dashed.

    python -m experiments.learning.fig14_retrieval --run RUN_DIR          # seconds
    python -m experiments.learning.fig14_retrieval --quick                # trains a tiny run first (~1 min)

The paper preset's 20 epochs on one lent H200 (results/paper_gpu20: the run's metrics.jsonl and
config.json, the final evaluations, the step benchmark and the device log) ran in one device call:

    OUT=DIR LIMIT=555 bash experiments/learning/paper_gpu.sh    # data, bench_train.py, train, evaluations
    python -m experiments.learning.fig14_retrieval --run results/paper_gpu20 --paper \
        --final results/paper_gpu20/final_eval.json results/paper_gpu20/final_eval_library128.json \
        --baseline results/paper_gpu --baseline-label "float32 run" \
        --out docs/figures/fig14_paper.png --csv results/fig14_paper.csv

results/paper_gpu holds the earlier float32 run of the same preset (14 epochs in two device calls;
its log_call*.txt give the commands).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

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


def csv_rows(records: list[dict], ks: list[int], library, finals: list[dict]) -> list[str]:
    """Returns the CSV lines: a header, one row per evaluated epoch, and one row per final evaluation."""
    keys = [f"{s}/{d}/R@{k}" for d in DIRECTIONS for k in ks for s in SPLITS]
    rows = ["epoch,train_library,test_library," + ",".join(keys)]
    for r in records:
        rows.append(f"{r['epoch']},{library or ''},{library or ''}," + ",".join(str(r.get(k, "")) for k in keys))
    for final in finals:
        sizes = ",".join(_library_label(final, s) for s in SPLITS)
        rows.append(f"{records[-1]['epoch']},{sizes}," + ",".join(str(final.get(k, "")) for k in keys))
    return rows


def merge_splits(finals: list[dict]) -> list[dict]:
    """Returns the evaluations with one split's JSON joined to the other split's at the same library size (the
    final_test.json and final_train.json of experiments/learning/evaluate_whole_sets.sh make one final evaluation)."""
    def libraries(final):
        return {(final[f"{s}/library"], final.get(f"{s}/libraries", 1)) for s in SPLITS if f"{s}/library" in final}

    merged = []
    for final in finals:
        partner = next((m for m in merged if libraries(m) == libraries(final) and not m.keys() & final.keys()), None)
        if partner is None:
            merged.append(dict(final))
        else:
            partner.update(final)
    return merged


def _library_label(final: dict, split: str) -> str:
    """Returns "32268", or "128x252" for R@k averaged over 252 disjoint libraries of 128 pairs."""
    size, count = final.get(f"{split}/library", ""), final.get(f"{split}/libraries", 1)
    return f"{size}x{count}" if count != 1 else str(size)


def plot(records: list[dict], out: pathlib.Path, csv: pathlib.Path | None = None, library=None,
         finals: list[dict] = (), epochs_planned: int | None = None, baseline: tuple | None = None) -> None:
    """Draws the Figure-14 grid from the records (and one marker per final evaluation); writes out and csv.

    `epochs_planned`: the run's configured epochs, the x range (a run stopped early shows how far it got).
    `baseline`: (label, records) of another run, drawn dashed (e.g. the same preset in another precision).
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
                if baseline:
                    name, others = baseline
                    ax.plot([r["epoch"] for r in others], [r.get(key, float("nan")) for r in others], "--",
                            color=color, lw=1, alpha=0.7, label=f"{split}, {name}")
                for final, marker in zip(finals, "*Ds^"):
                    if key in final:
                        size, count = final[f"{split}/library"], final.get(f"{split}/libraries", 1)
                        where = f"{size:,} library" if count == 1 else f"mean of {count} libraries of {size}"
                        ax.plot(epochs[-1], final[key], marker, color=color, ms=12 if marker == "*" else 7, mec="k",
                                label=f"{split}, {where}")
            source, target = (NAMES[side] for side in direction.split("_to_"))
            ax.set_title(f"{source} -> {target}  R@{k}", fontsize=10)
            ax.set_ylim(0, 1)
            last = max([epochs_planned or 0, epochs[-1]] + [r["epoch"] for r in (baseline[1] if baseline else ())])
            ax.set_xlim(0.5, last + 0.5)  # the baseline's whole run, when it ran longer
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
    csv.write_text("\n".join(csv_rows(records, ks, library, finals)) + "\n")


def compare_with_paper(records: list[dict], library, finals: list[dict]) -> str:
    """Returns lines of our last-epoch R@k (per-epoch and final libraries) beside the paper's Figure 14."""
    last, ks = records[-1], recall_ks(records)
    lines = [f"epoch {last['epoch']}: R@k in % (train / test)"]
    for direction in DIRECTIONS:
        for k in ks:
            ours = " / ".join(f"{100 * last[f'{s}/{direction}/R@{k}']:.1f}" for s in SPLITS)
            line = f"  {direction} R@{k}: {ours} ({library or '?'} library)"
            for final in finals:
                if f"test/{direction}/R@{k}" in final:
                    full = " / ".join(f"{100 * final[f'{s}/{direction}/R@{k}']:.1f}" for s in SPLITS)
                    line += f"; {full} ({' / '.join(_library_label(final, s) for s in SPLITS)} library)"
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
    parser.add_argument("--final", nargs="+", default=[], metavar="JSON",
                        help="JSON files of `lagda evaluate` on the last checkpoint (other library sizes)")
    parser.add_argument("--baseline", default=None, metavar="RUN_DIR", help="another run's metrics, drawn dashed")
    parser.add_argument("--baseline-label", default="baseline run")
    parser.add_argument("--paper", action="store_true", help="print the last epoch beside the paper's Figure 14")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = _quick_run(pathlib.Path(tmp)) if args.quick else args.run
        if run is None:
            parser.error("give --run RUN_DIR or --quick")
        records, config = read_metrics(run), run_config(run)
        library = config.get("eval_library")
        finals = merge_splits([json.loads(pathlib.Path(path).read_text()) for path in args.final])
        baseline = (args.baseline_label, read_metrics(args.baseline)) if args.baseline else None
        plot(records, pathlib.Path(args.out), None if args.csv is None else pathlib.Path(args.csv), library, finals,
             config.get("epochs"), baseline)
    if args.paper:
        print(compare_with_paper(records, library, finals))
    else:
        print(" ".join(f"{k}={100 * v:.1f}%" for k, v in records[-1].items() if "/R@" in k))


if __name__ == "__main__":
    main()
