"""Retrieval evaluation of a trained run on a dataset: Recall@1, @5 and @10 in both directions.

Keys are "<split>/<direction>/R@<k>" with direction coef_to_traj (query g_u(c), library of
trajectory embeddings) or traj_to_coef (query g_v(v), library of coefficient embeddings),
as in Figure 14. Similarities are computed in query batches (lagda.learning.retrieval), so memory is
O(batch_size * library), not O(library^2).
"""

from __future__ import annotations

import functools
import json

import jax.numpy as jnp

from lagda.learning import losses
from lagda.learning.config import TrainConfig
from lagda.learning.data import PairedData, check_same_modes, load_paired
from lagda.learning.encoders import embed_coefficients, similarity_mask
from lagda.learning.loss_registry import LOSSES
from lagda.learning.model import (
    Contrastive,
    embed_track_sets,
    embed_tracks,
    kernel_set_similarity,
    load_trained,
)
from lagda.learning.retrieval import blockwise_retrieval_metrics, retrieval_metrics
from lagda.report import format_table as table
from simulate.atomic import write_atomic

RECALL_KS = (1, 5, 10)  # the cut-offs k of every R@k written (Figure 14 shows 1 and 5)


# One function object per kind (retrieval caches its compiled kernels by function); tau = 1
# because a positive temperature does not change the ranking.
_RANKING_SIMILARITY = {kind: functools.partial(losses.similarity, kind=kind, tau=1.0)
                       for kind in ("cosine", "inner", "l2")}


def retrieval_scores(model, data: PairedData, config: TrainConfig, library: int | None,
                     prefix: str, estimates=None, progress: bool = False, blocks: bool = False) -> dict:
    """Returns {"<prefix>/<direction>/R@<k>": fraction} over the first `library` pairs of `data`.

    `blocks`: instead, the mean over every disjoint library of `library` consecutive pairs of `data`
    (`retrieval.blockwise_retrieval_metrics`).

    `model`: the trained Contrastive model, or its encoder alone (not for kernel_set runs, whose
    similarity also needs the stored random-feature draw). `estimates`: optional precomputed
    `track_estimates` of `data` (physics models).
    """
    n = data.n_samples if not library or blocks else min(library, data.n_samples)
    estimates = None if estimates is None else estimates[:n]
    coef = jnp.asarray(data.coef[:n])
    if LOSSES[config.loss].set_kernel:
        if not isinstance(model, Contrastive):
            raise ValueError("kernel_set retrieval needs the whole trained model (load_trained), not the encoder")
        v_emb = jnp.asarray(embed_track_sets(model, config, data.positions[:n], config.eval_batch, estimates, progress))
        u_emb = kernel_set_similarity(model, config).coefficient_embedding(embed_coefficients(coef).astype(jnp.float32))
        similarity = _RANKING_SIMILARITY["inner"]
    else:
        encoder = model.encoder if isinstance(model, Contrastive) else model
        scale = data.prior_scale if config.similarity_weights == "prior" else None
        mask = jnp.asarray(similarity_mask(data.k1, data.k2, config.mask_mean_mode, scale, config.coef_embedding))
        v_emb = jnp.asarray(embed_tracks(encoder, data.positions[:n], config.eval_batch, estimates,
                                         progress)) * mask[None]
        u_emb = embed_coefficients(coef, config.coef_embedding) * mask[None]
        similarity = _RANKING_SIMILARITY[config.similarity]
    if blocks and library:
        scores = blockwise_retrieval_metrics(u_emb, v_emb, library, similarity, ks=RECALL_KS,
                                             batch_size=config.eval_batch)
    else:
        scores = retrieval_metrics(u_emb, v_emb, similarity, ks=RECALL_KS, batch_size=config.eval_batch)
    return {f"{prefix}/{key}": float(value) for key, value in scores.items()}


def evaluate(run_dir, data_path, split: str = "test", library_size: int | None = None,
             batch_size: int = 512, progress: bool = False, blocks: bool = False) -> dict:
    """Returns {"<split>/<direction>/R@<k>": fraction} for k in RECALL_KS (1, 5, 10) on a dataset file,
    with "<split>/library" (pairs per library) and "<split>/libraries" (libraries averaged over).

    Parameters
    ----------
    run_dir
        a training run directory (config.json, dataset.json, checkpoints/).
    data_path
        a lagda dataset file with the run's modes, frequencies and obs times.
    split
        the name used in the keys (e.g. "test", "train").
    library_size
        use only the first this many pairs (None: all).
    blocks
        average over every disjoint library of `library_size` pairs instead of the first.
    batch_size
        queries and embeddings per batch.
    progress
        show a progress bar while embedding the tracks.

    Raises
    ------
    FileNotFoundError
        missing run dir or dataset.
    ValueError
        corrupted files, a dataset whose modes/frequencies differ from the run's, or blocks without
        a library size.
    """
    if blocks and not library_size:
        raise ValueError("blocks needs a library size (the pairs per library)")
    model, config, meta = load_trained(run_dir)
    data = load_paired(data_path)
    check_same_modes(meta, data, f"dataset {data_path}")
    config = type(config)(**{**vars(config), "eval_batch": batch_size}).validate()
    size = min(library_size or data.n_samples, data.n_samples)
    scores = retrieval_scores(model, data, config, size, split, progress=progress, blocks=blocks)
    return {f"{split}/library": size, f"{split}/libraries": data.n_samples // size if blocks else 1, **scores}


def format_table(metrics: dict) -> str:
    """Returns a markdown table of R@k (percent), one row per split/direction, after a line naming the libraries."""

    rows: dict[str, dict] = {}
    for key, value in metrics.items():
        if "/R@" in key:
            row, k = key.rsplit("/", 1)
            rows.setdefault(row, {})[k] = value
    ks = sorted({k for row in rows.values() for k in row}, key=lambda k: int(k.split("@")[1]))
    splits = [key.split("/")[0] for key in metrics if key.endswith("/library")]
    libraries = [f"{split}: {int(metrics[f'{split}/library']):,} pairs x {int(metrics.get(f'{split}/libraries', 1))}"
                 for split in splits]
    head = f"libraries ({', '.join(libraries)})\n\n" if libraries else ""
    return head + table(dict(sorted(rows.items())), [(k, k) for k in ks], first="split/direction", number="{:.2%}")


def write_metrics(metrics: dict, out) -> None:
    """Writes metrics as JSON to `out` via a temporary file and rename."""
    write_atomic(out, lambda tmp: tmp.write_text(json.dumps(metrics, indent=2) + "\n"))
