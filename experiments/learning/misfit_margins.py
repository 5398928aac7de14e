"""How exact is a trained misfit head? Its misfit of a track to the track's own field, against the nearest wrong one.

For the first `--queries` tracks of a test file and a library of its first `--library` fields, computes in
float64 the misfit sum_j dt_j |dz_j / dt_j - phi_j W x|^2 / T of every (track, field) pair (the misfit head's
score, lagda/learning/set_encoder.py; x without c_(0,0) when the run masks it, as its similarity does) with the
run's learned design W and with the velocity's own design (`velocity_design`, the exact misfit), and prints
per design: the median misfit of each track to its own field, to a wrong field, and to the nearest wrong field
of the library, the smallest and the 5th-percentile gap (nearest wrong minus own), and the traj->coef R@1 it
implies: a track is retrieved wrongly where its gap is negative.

    python -m experiments.learning.misfit_margins --run RUN --data test.nc [--queries 256 --library 4096]

Results: docs/results/training-learned.md ("Coefficient negatives").
"""

from __future__ import annotations

import argparse
import json

import jax

jax.config.update("jax_enable_x64", True)  # the misfits in float64: true and nearest wrong differ by ~1e-7 of E

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lagda.learning.data import load_paired  # noqa: E402
from lagda.learning.encoders import similarity_mask  # noqa: E402
from lagda.learning.model import load_trained  # noqa: E402
from lagda.learning.set_encoder import design_moments, velocity_design  # noqa: E402


def misfits(design, p, gram, energy, x):
    """Returns the misfit `(query, field)` of tracks with pooled P `(query, 2K, 2)`, Phi `(query, 2K, 2K)`, E
    `(query,)` to fields x `(field, 2K)` under the design W `(2K, 2, 2K)`: E - 2 b.x + x^T S x with the head's
    own (S, b) (`design_moments`), in float64."""
    s, b = (np.asarray(a) for a in design_moments(design, p, gram))
    quadratic = np.stack([np.sum((x @ track) * x, axis=1) for track in s])  # (query, field)
    return energy[:, None] - 2 * b @ x.T + quadratic


def margins(misfit) -> dict:
    """Returns the summary of a misfit matrix whose first rows' true fields are on the diagonal."""
    n = misfit.shape[0]
    true = misfit[np.arange(n), np.arange(n)]
    wrong = misfit.copy()
    wrong[np.arange(n), np.arange(n)] = np.inf
    gap = wrong.min(axis=1) - true
    return {"true_median": float(np.median(true)), "wrong_median": float(np.median(wrong[np.isfinite(wrong)])),
            "nearest_wrong_median": float(np.median(wrong.min(axis=1))),
            "gap_min": float(gap.min()), "gap_p5": float(np.percentile(gap, 5)),
            "traj_to_coef_R@1": float(np.mean(gap > 0))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run of the learned preset (misfit head)")
    p.add_argument("--data", required=True, help="test pairs: the queries and the library are its first fields")
    p.add_argument("--queries", type=int, default=256)
    p.add_argument("--library", type=int, default=4096)
    args = p.parse_args(argv)
    model, config, meta = load_trained(args.run)
    if config.set_head != "misfit":
        p.error(f"{args.run} has set_head {config.set_head!r}: a misfit head is needed")
    data = load_paired(args.data)
    stats = jax.jit(lambda positions: model.encoder.statistics(positions))
    p_, gram, _, energy = (np.asarray(a, np.float64) for a in stats(jnp.asarray(data.positions[:args.queries])))
    coef = np.asarray(data.coef[:args.library])
    keep = similarity_mask(meta["k1"], meta["k2"], config.mask_mean_mode).astype(np.float64)  # as training scores
    x = np.concatenate([coef.real, coef.imag], axis=-1).astype(np.float64) * keep
    designs = {"learned": np.asarray(model.encoder.design[...], np.float64),
               "exact": velocity_design(meta["k1"], meta["k2"])}
    for name, design in designs.items():
        row = {"design": name, "queries": args.queries, "library": args.library,
               **margins(misfits(design, p_, gram, energy, x))}
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
