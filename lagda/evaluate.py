"""Retrieval evaluation of a trained run on a dataset: Recall@1 and @5 in both directions.

Keys are "<split>/<direction>/R@<k>" with direction coef_to_traj (query g_u(c), library of
trajectory embeddings) or traj_to_coef (query g_v(v), library of coefficient embeddings),
as in Figure 14. Similarities are computed in query batches (lagda.retrieval), so memory is
O(batch_size * library), not O(library^2).
"""

from __future__ import annotations

import json

from simulate.atomic import write_atomic
from lagda.data import check_same_modes, load_paired
from lagda.train import load_run, retrieval_scores


def evaluate(run_dir, data_path, split: str = "test", library_size: int | None = None,
             batch_size: int = 512, progress: bool = False) -> dict:
    """Returns {"<split>/<direction>/R@<k>": fraction} for k in (1, 5) on a dataset file.

    Args:
        run_dir: a training run directory (config.json, dataset.json, checkpoints/).
        data_path: a lagda dataset file with the run's modes, frequencies and obs times.
        split: the name used in the keys (e.g. "test", "train").
        library_size: use only the first this many pairs (None: all).
        batch_size: queries and embeddings per batch.
        progress: show a progress bar while embedding the tracks.
    Raises:
        FileNotFoundError: missing run dir or dataset.
        ValueError: corrupted files, or a dataset whose modes/frequencies differ from the run's.
    """
    model, config, meta = load_run(run_dir)
    data = load_paired(data_path)
    check_same_modes(meta, data, f"dataset {data_path}")
    config = type(config)(**{**vars(config), "eval_batch": batch_size}).validate()
    return retrieval_scores(model, data, config, library_size, split, progress=progress)


def format_table(metrics: dict) -> str:
    """Returns a small text table of R@k per split and direction (percent)."""
    rows = sorted({key.rsplit("/", 1)[0] for key in metrics})
    ks = sorted({key.rsplit("/", 1)[1] for key in metrics})
    lines = [f"{'split/direction':28s}" + "".join(f"{k:>8s}" for k in ks)]
    for row in rows:
        lines.append(f"{row:28s}" + "".join(f"{100 * metrics[f'{row}/{k}']:7.2f}%" for k in ks))
    return "\n".join(lines)


def write_metrics(metrics: dict, out) -> None:
    """Writes metrics as JSON to `out` via a temporary file and rename."""
    write_atomic(out, lambda tmp: tmp.write_text(json.dumps(metrics, indent=2) + "\n"))
