"""Benchmark of the paper preset's training step: samples/s per precision and attention kernel.

Times `lagda.learning.train.make_train_step` of `--preset paper` (12 blocks, d = 128, one token per
observation, batch 128, L_cond, Adam) on the first batches of a dataset file, for each variant
(compute dtype / attention kernel): compilation once, then the best of `--repeats` timings of
`--steps` steps. Every rate is printed with its ratio to the first variant (float32 with XLA's
attention, the paper's setting) measured in the same run, and the variants' first-step losses
from the same parameters, so a kernel that changes the function shows. A variant that fails to
compile (cuDNN's fused attention on a machine without it) is reported and skipped.

    python -m benchmarks.bench_train --data paper_1.nc [--steps 20] [--json OUT]
    python -m benchmarks.bench_train --quick          # tiny model and data (a smoke test, CPU)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import jax
from flax import nnx

from lagda.learning.config import paper, tiny
from lagda.learning.data import load_paired
from lagda.learning.model import build_model
from lagda.learning.optimizer import make_optimizer
from lagda.learning.train import make_train_step
from lagda.testing import make_pairs

VARIANTS = (("float32", "xla"), ("bfloat16", "xla"), ("bfloat16", "cudnn"))


def time_variant(config, data, steps: int, repeats: int) -> dict:
    """Returns {"compile_s", "step_s", "samples_per_s", "first_loss"} of `steps` train steps of `config`."""
    model = build_model(config, data.positions.shape[2], data.k1, data.k2, data.meta())
    model.encoder.set_feature_stats(data.positions[:1024, 0])
    graphdef, params, buffers = nnx.split(model, nnx.Param, ...)
    tx = make_optimizer(config, steps)
    step = make_train_step(config, steps)
    batch = config.batch_size
    n_batches = max(1, min(steps, data.n_samples // batch))
    coef = [jax.device_put(data.coef[i * batch:(i + 1) * batch]) for i in range(n_batches)]
    positions = [jax.device_put(data.positions[i * batch:(i + 1) * batch]) for i in range(n_batches)]

    def run(n, params, opt_state):
        losses = []
        for i in range(n):
            params, opt_state, loss = step(graphdef, params, buffers, opt_state, coef[i % n_batches],
                                           positions[i % n_batches])
            losses.append(loss)
        return params, opt_state, [float(x) for x in jax.block_until_ready(losses)]

    start = time.perf_counter()
    params_, opt_state, losses = run(1, jax.tree.map(jax.numpy.copy, params), tx.init(params))
    compile_s = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        params_, opt_state, _ = run(steps, params_, opt_state)
        best = min(best, (time.perf_counter() - start) / steps)
    return {"compile_s": compile_s, "step_s": best, "samples_per_s": batch / best, "first_loss": losses[0]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a dataset file of the paper's shape (lagda simulate --preset paper)")
    parser.add_argument("--quick", action="store_true", help="the tiny preset on 64 small fields (CPU smoke test)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    if args.quick == bool(args.data):
        parser.error("give --data FILE or --quick")
    data = make_pairs(64, seed=1, n_obs=20) if args.quick else load_paired(args.data)
    preset = (lambda **kw: tiny(patch=1, **kw)) if args.quick else paper
    print(f"jax {jax.__version__}, devices {jax.devices()}, {data.n_samples} fields x "
          f"{data.positions.shape[2]} observations, K = {len(data.k1)}")
    rows = []
    for dtype, attention in VARIANTS:
        name = f"{dtype}, {attention} attention"
        try:
            row = time_variant(preset(compute_dtype=dtype, attention=attention), data, args.steps, args.repeats)
        except Exception as error:  # a kernel this machine lacks: reported, the others still run
            print(f"{name}: failed ({type(error).__name__}: {str(error).splitlines()[0][:200]})")
            continue
        rows.append({"compute_dtype": dtype, "attention": attention, **row})
        if args.json:  # after every variant: a run stopped at a deadline keeps what it measured
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if not rows:
        print("no variant ran")
        return 1
    base = rows[0]["samples_per_s"] if rows[0]["compute_dtype"] == "float32" else float("nan")
    print("\n| compute dtype | attention | compile s | step ms | samples/s | x float32 XLA | first loss |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['compute_dtype']} | {r['attention']} | {r['compile_s']:.1f} | {1e3 * r['step_s']:.1f} | "
              f"{r['samples_per_s']:.0f} | {r['samples_per_s'] / base:.2f} | {r['first_loss']:.5f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
