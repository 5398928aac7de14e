"""Compare set-encoder variants (learned preset): data simulated in memory, trained, scored per regime.

    python -m experiments.learning.set_encoder_explore --out results/set_explore --n-train 16384 \
        --variant ridge:dense:10 --variant mlp:dense:10 --variant ridge:mixture:10

Each variant is head:regime:epochs. Train data: `small` preset, seed 1 (the fixed-release
drifter first, then --random-drifters random-release drifters of the same fields); test:
seed 2. Writes <out>/<variant>/metrics.jsonl and prints test R@5 on dense exact tracks and
on a few fixed regimes (stride, noise, drifters).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from lagda.learning.config import learned
from lagda.learning.data import PairedData, merge_drifters
from lagda.learning.encoders import embed_coefficients, similarity_mask
from lagda.learning.model import embed_tracks, load_run
from lagda.learning.retrieval import retrieval_metrics
from lagda.learning.train import train
from simulate import small
from simulate.generate import _run_chunk, dataset_modes


def simulate(n: int, seed: int, n_drifters: int = 1, release: str = "fixed") -> PairedData:
    """Returns PairedData of the `small` preset (same fields as `lagda simulate --seed seed`)."""
    config = small(n_samples=n, seed=seed, n_drifters=n_drifters, release=release)
    k1, k2, omega, scale = dataset_modes(config)
    key, size, parts = jax.random.key(seed), min(config.chunk_size, n), []
    for start in range(0, n, size):
        samples = jnp.arange(start, start + size, dtype=jnp.int32)
        parts.append([np.asarray(a)[: n - start] for a in _run_chunk(key, samples, scale, k1, k2, omega, config)])
    coef, _, positions = (np.concatenate([p[i] for p in parts]) for i in range(3))
    time_grid = config.dt * config.stride * np.arange(1, config.n_obs + 1)
    return PairedData(coef=coef.astype(np.complex64), positions=positions.astype(np.float32), time=time_grid,
                      k1=np.asarray(k1, np.int32), k2=np.asarray(k2, np.int32), omega=np.asarray(omega, np.float64),
                      prior_scale=np.asarray(scale, np.float64), attrs={"release": release})


def regime_recall(encoder, data: PairedData, stride: int, noise: float, drifters: int, seed: int = 0) -> float:
    """Returns the mean of both test R@5 under one fixed regime (first `drifters` drifters)."""
    rng = np.random.default_rng(seed)
    pos = data.positions[:, :drifters]
    pos = pos + noise * rng.standard_normal(pos.shape).astype(np.float32)
    mask = np.zeros(pos.shape[:3], bool)
    mask[:, :, stride - 1::stride] = True
    emb = embed_tracks(encoder, pos, 512, mask=mask)
    keep = jnp.asarray(similarity_mask(data.k1, data.k2, True))
    scores = retrieval_metrics(embed_coefficients(jnp.asarray(data.coef)) * keep, jnp.asarray(emb) * keep, ks=(1, 5))
    return 0.5 * (float(scores["coef_to_traj/R@5"]) + float(scores["traj_to_coef/R@5"]))


REGIMES = [(1, 0.0, 1), (10, 0.0, 1), (100, 0.0, 1), (1, 1e-2, 1), (10, 1e-3, 1), (10, 0.0, 4), (100, 1e-2, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n-train", type=int, default=16384)
    parser.add_argument("--n-test", type=int, default=4096)
    parser.add_argument("--random-drifters", type=int, default=8)
    parser.add_argument("--variant", action="append", required=True, help="head:regime:epochs[:key=value,...]")
    parser.add_argument("--resume", action="store_true", help="continue each variant from its latest checkpoint")
    args = parser.parse_args()
    start = time.time()
    fixed = simulate(args.n_train, 1)
    test = simulate(args.n_test, 2)
    test_random = simulate(args.n_test, 2, args.random_drifters, "random") if args.random_drifters else None
    mixed = (merge_drifters([fixed, simulate(args.n_train, 1, args.random_drifters, "random")])
             if args.random_drifters else fixed)
    print(f"data {time.time() - start:.0f} s", flush=True)
    for variant in args.variant:
        head, regime, epochs, *extra = variant.split(":")
        overrides = dict(kv.split("=") for kv in extra[0].split(",")) if extra else {}
        overrides = {k: type(getattr(learned(), k))(v) for k, v in overrides.items()}
        config = learned(**{"set_head": head, "regime": regime, "epochs": int(epochs), **overrides})
        run = pathlib.Path(args.out) / variant.replace(":", "_").replace(",", "_").replace("=", "")
        t0 = time.time()
        train(config, mixed if regime == "mixture" else fixed, test, run, resume=args.resume and run.exists(),
              progress=False)
        seconds = time.time() - t0
        for line in (run / "metrics.jsonl").read_text().splitlines():
            r = json.loads(line)
            if "test/coef_to_traj/R@5" in r:  # evaluated epochs only (eval_every)
                print(f"{variant} epoch {r['epoch']} loss {r['train_loss']:.3f} {r['samples_per_s']:.0f}/s "
                      f"test R@5 {100 * r['test/coef_to_traj/R@5']:.1f} / {100 * r['test/traj_to_coef/R@5']:.1f} "
                      f"train R@5 {100 * r['train/coef_to_traj/R@5']:.1f}", flush=True)
        encoder, _, _ = load_run(run)
        cells = []
        for stride, noise, drifters in REGIMES:
            data = test if drifters == 1 else test_random
            if data is not None:
                cells.append(f"s{stride} n{noise:g} d{drifters}: "
                             f"{100 * regime_recall(encoder, data, stride, noise, drifters):.1f}")
        print(f"{variant} {seconds:.0f} s; regimes R@5: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
