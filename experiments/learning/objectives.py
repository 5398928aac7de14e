"""Training objectives compared: L_cond (CLIP), joint, sigmoid, kernel_set, SogCLR and NUCLR.

Two studies (docs/results/training-objectives.md):

1. The drifter problem. Every objective (`lagda train --loss ...`) trains the same encoder (the
   `--preset`, default `learned`: the set encoder trained on the mixture of observation regimes,
   which reads sparse tracks too) on the same training fields for the same number of steps,
   with 3 seeds each (seed = parameter init, shuffling, regimes and random features). Reported:
   wall and CPU time of training, R@1 / R@5 in both directions on a held-out library of
   `--library` fields (4,096), and the downstream relative L2 velocity-field error of `embed` and
   `hybrid` (lagda.assimilation) on `--fields` held-out flows in the dense regime (every
   observation, exact) and a sparse one (every 10th observation, noise 1e-3). With a set encoder
   `kernel_set` compares singleton sets (the encoder pools its tokens); `--preset cpu` (the
   transformer, whose tokens form the sets) reads dense tracks only, so there sparse `embed` is
   reported as nan.
2. The Gaussian setting of section 5 of the main paper (lagda.learning.gaussian): linear encoders
   g_u = G u, g_v = H v with the inner-product similarity (tau = 1) on a fixed sample of n pairs
   of the 6-d Gaussian of experiments/learning/gaussian_theory.py; per-batch L_cond, SogCLR and NUCLR
   (lagda.learning.nuclr) from the same start with the same batches. Reported: the distance of the
   learned A = G^T H to Theorem 5.1's minimiser A* (eq. 43), and whether NUCLR's learned zeta is
   Theorem 2's fixed point for the final A (so: does learning zeta move A towards A* or away?).

Command (measured: about 30 CPU minutes, 28 wall minutes on the shared 2-core machine; README):
    lagda simulate --preset small --n-samples 4096 --seed 2 --out /tmp/obj/test4096.nc
    nice -n 10 python -m experiments.learning.objectives --train small_train.nc --test /tmp/obj/test4096.nc
    python -m experiments.learning.objectives --quick      # tiny synthetic smoke run (about a minute)
Writes results/objectives.csv (one row per objective and seed), results/objectives_summary.csv
(mean and std over seeds), results/objectives_gaussian.csv and docs/figures/objectives.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from experiments.common.paths import ROOT
from lagda.learning import gaussian, losses, nuclr  # noqa: E402
from lagda.learning.config import PRESETS, tiny  # noqa: E402

OBJECTIVES = {  # name -> TrainConfig overrides (everything else is the preset's)
    "cond": dict(loss="cond"),
    "joint": dict(loss="joint"),
    "sigmoid": dict(loss="sigmoid", learn_tau=True, tau=0.1),  # SigLIP: learned scale and bias
    "kernel_set": dict(loss="kernel_set"),  # Gaussian k~, sigma 0.3, alpha = (0.5, 0.5), D = 512
    "sogclr": dict(loss="sogclr"),
    "nuclr": dict(loss="nuclr"),
}


# ----------------------------------------------------------------------------- Gaussian setting


def _gaussian_run(kind: str, z, n_u: int, steps: int, batch: int, lr: float, key, config):
    """Returns (Polyak-averaged A, final zeta of the u-anchored direction, final A) after `steps` Adam steps.

    z: `(n, d)` the fixed sample; kind: "cond" (per-batch L_cond), "sogclr" or "nuclr".
    """
    n, d = z.shape
    steps_per_epoch = n // batch
    g_key, h_key, data_key = jax.random.split(key, 3)
    params = {"g": 0.3 * jax.random.normal(g_key, (n_u, n_u)), "h": 0.3 * jax.random.normal(h_key, (n_u, d - n_u))}
    optimiser = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.01))
    state = nuclr.init_state(n, config) if kind != "cond" else None
    if state is not None:
        state = jax.tree.map(lambda x: x.astype(jnp.float64) if x.dtype == jnp.float32 else x, state)

    def similarity(p, index):
        u, v = z[index, :n_u], z[index, n_u:]
        return losses.inner_product_similarity(u @ p["g"].T, v @ p["h"].T)

    def step(carry, t):
        params, opt_state, state, a_sum = carry
        perm = jax.random.permutation(jax.random.fold_in(data_key, t // steps_per_epoch), n)
        index = jax.lax.dynamic_slice_in_dim(perm, (t % steps_per_epoch) * batch, batch)
        if kind == "cond":
            grads = jax.grad(lambda p: losses.conditional_loss(similarity(p, index)))(params)
        else:
            grads, (_, state) = jax.grad(lambda p: nuclr.nuclr_objective(
                similarity(p, index), state, index, 1.0, n, config, steps, steps_per_epoch), has_aux=True)(params)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        a_sum = a_sum + (t >= steps // 2) * (params["g"].T @ params["h"])
        return (params, opt_state, state, a_sum), None

    carry = (params, optimiser.init(params), state, jnp.zeros((n_u, d - n_u)))
    (params, _, state, a_sum), _ = jax.lax.scan(step, carry, jnp.arange(steps))
    zeta = None if state is None else state["coef_anchor"]["zeta"]
    return a_sum / (steps - steps // 2), zeta, params["g"].T @ params["h"]


def gaussian_study(seeds=(0, 1, 2), n: int = 512, steps: int = 3000, batch: int = 64, lr: float = 0.03) -> list[dict]:
    """Returns one row per (objective, seed): |A - A*| / |A*| (Theorem 5.1) and the zeta diagnostics."""
    jax.config.update("jax_enable_x64", True)
    from experiments.learning.gaussian_theory import random_6d

    cov, n_u = random_6d()
    a_star = gaussian.cond_minimizer(cov, n_u)
    chol = np.linalg.cholesky(cov)
    rows = []
    for seed in seeds:
        z = jnp.asarray(np.random.default_rng(seed).standard_normal((n, cov.shape[0])) @ chol.T)
        for kind in ("cond", "sogclr", "nuclr"):
            config = tiny(loss="cond" if kind == "cond" else kind, tau=1.0, batch_size=batch)
            start = time.process_time()
            run = jax.jit(_gaussian_run, static_argnums=(0, 2, 3, 4, 5, 7))
            a, zeta, a_last = run(kind, z, n_u, steps, batch, lr, jax.random.key(seed), config)
            row = dict(objective=kind, seed=seed, n=n, steps=steps, batch=batch,
                       rel_err_A=float(np.linalg.norm(np.asarray(a) - a_star) / np.linalg.norm(a_star)),
                       cpu_seconds=round(time.process_time() - start, 2))
            if zeta is not None and kind == "nuclr":
                # Theorem 2's zeta* for the final model, full batch: is the learned zeta near it?
                sim = (z[:, :n_u] @ a_last) @ z[:, n_u:].T
                star = _solve_zeta(sim, 1.0)
                row["zeta_std"] = float(jnp.std(zeta))
                row["zeta_star_std"] = float(jnp.std(star))
                row["corr_zeta_zeta_star"] = float(np.corrcoef(np.asarray(zeta), np.asarray(star))[0, 1])
            rows.append(row)
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return rows


@jax.jit
def _solve_zeta(sim, tau):
    """Returns a minimiser of Phi (eq. 8) by gradient descent with step tau n (Theorem 2's fixed point)."""
    n = sim.shape[0]
    grad = jax.grad(nuclr.zeta_objective, argnums=1)

    def body(carry):
        zeta = carry[0] - tau * n * carry[1]
        return zeta, grad(sim, zeta, tau), carry[2] + 1

    zeta0 = jnp.zeros(n)
    out = jax.lax.while_loop(lambda c: (jnp.max(jnp.abs(c[1])) > 1e-12) & (c[2] < 20_000), body,
                             (zeta0, grad(sim, zeta0, tau), 0))
    return out[0]


# ----------------------------------------------------------------------------- drifter problem

REGIMES = {"dense": (1, 0.0), "sparse": (10, 1e-3)}  # (observation stride, position noise std)


def regime_tracks(test, n_fields: int, stride: int, noise: float, seed: int = 0):
    """Returns Tracks of the first n_fields test flows, every stride-th observation, with Gaussian noise."""
    from lagda.io.tracks import Tracks

    positions = np.asarray(test.positions[:n_fields, :, stride - 1::stride], np.float64)  # (field, drifter, obs, 2)
    positions = positions + noise * np.random.default_rng(seed).normal(size=positions.shape)
    n_drifters, n_obs = positions.shape[1:3]
    times = np.tile(np.asarray(test.time)[stride - 1::stride], (n_fields * n_drifters, 1))
    release = np.tile([float(test.attrs.get("release_x", 0.75)), float(test.attrs.get("release_y", 0.75))],
                      (n_fields * n_drifters, 1))
    return Tracks(positions=positions.reshape(-1, n_obs, 2), times=times,
                  field=np.repeat(np.arange(n_fields), n_drifters), trajectory_id=np.arange(n_fields * n_drifters),
                  true_coef=np.asarray(test.coef[:n_fields], np.complex128),
                  k1=test.k1, k2=test.k2, omega=test.omega, release=release)


def downstream(run_dir, test, tracks_by_regime: dict, bank_size: int) -> dict:
    """Returns {"<method>/<regime>": mean relative L2 velocity-field error} of embed and hybrid."""
    from lagda.assimilation.methods.learned import scorer_from_run
    from lagda.assimilation.methods.registry import Embed, Hybrid
    from lagda.assimilation.model import flow_model
    from lagda.assimilation.scores import velocity_field_error, window_times

    scorer = scorer_from_run(run_dir)[0]
    methods = {"embed": Embed(scorer, bank_size=bank_size), "hybrid": Hybrid(scorer, bank_size=bank_size)}
    model = flow_model(test.k1, test.k2, test.omega, test.prior_scale, float(test.attrs.get("dt", 1e-4)))
    out = {}
    for regime, tracks in tracks_by_regime.items():
        for method in ("embed", "hybrid"):
            try:
                post = methods[method](tracks, model, jax.random.key(0))
            except ValueError:  # a dense-only encoder cannot read sparse tracks: embed is not available
                out[f"{method}/{regime}"] = float("nan")
                continue
            errors = velocity_field_error(tracks.true_coef, post.mean, test.k1, test.k2, test.omega,
                                          window_times(tracks, 4), 32)
            out[f"{method}/{regime}"] = float(np.mean(errors))
    return out


def drifter_study(args) -> list[dict]:
    """Returns one row per (objective, seed): training time, test R@k both ways, downstream errors."""
    from lagda.learning.data import load_paired
    from lagda.learning.evaluate import retrieval_scores
    from lagda.learning.model import load_trained
    from lagda.learning.train import train

    train_data = load_paired(args.train).subset(slice(0, args.n_train))
    test = load_paired(args.test)
    library = test.subset(slice(0, args.library))
    tracks = {name: regime_tracks(test, args.fields, *spec) for name, spec in REGIMES.items()} if args.fields else {}
    steps_per_epoch = args.n_train // args.batch
    done = args.out_dir / "objectives.csv"
    rows = _read_rows(done) if args.resume and done.is_file() else []
    for seed in args.seeds:
        for name in args.objectives:
            if any(r["objective"] == name and r["seed"] == seed for r in rows):
                continue  # --resume: measured before
            base = dict(batch_size=args.batch, epochs=max(1, round(args.steps / steps_per_epoch)), eval_library=0,
                        seed=seed)
            if args.preset == "learned" or args.quick:  # the set encoder, trained on every observation regime
                base.update(encoder="set", regime="mixture", set_head="ridge")  # the 2K-vector head assimilation reads
            config = PRESETS[args.preset](**{**base, **OBJECTIVES[name]})
            run_dir = pathlib.Path(args.work) / f"{name}_seed{seed}"
            resumed = args.resume and (run_dir / "checkpoints").is_dir()  # then the times are of the rest only
            wall, cpu = time.perf_counter(), time.process_time()
            train(config, train_data, None, run_dir, resume=args.resume, progress=False)
            row = dict(objective=name, seed=seed, steps=steps_per_epoch * config.epochs, n_train=args.n_train,
                       resumed=int(resumed), train_wall_s=round(time.perf_counter() - wall, 1),
                       train_cpu_s=round(time.process_time() - cpu, 1), load=round(os.getloadavg()[0], 2))
            epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            row["epochs_s"] = round(sum(e["epoch_seconds"] for e in epochs), 1)  # kept across a resume
            model, config, _ = load_trained(run_dir)
            row.update({k.split("/", 1)[1]: v for k, v in
                        retrieval_scores(model, library, config, args.library, "test").items()})
            row.update(downstream(run_dir, test, tracks, args.bank_size))
            rows.append(row)
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
            write_csv(rows, args.out_dir / "objectives.csv")
    return rows


# ----------------------------------------------------------------------------- outputs


def write_csv(rows: list[dict], path: pathlib.Path) -> None:
    """Writes rows (dicts, the union of their keys as columns) to a CSV file via a temporary name."""
    from simulate.atomic import write_atomic

    columns = list(dict.fromkeys(k for row in rows for k in row))

    def write(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, columns)
            writer.writeheader()
            writer.writerows(rows)

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, write)


def _read_rows(path: pathlib.Path) -> list[dict]:
    """Returns the rows of a CSV written by write_csv, numbers parsed."""
    def parse(value):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return value

    with open(path, newline="") as f:
        return [{k: parse(v) for k, v in row.items()} for row in csv.DictReader(f)]


def summarise(rows: list[dict], key: str = "objective") -> list[dict]:
    """Returns per objective the mean and std over seeds of every numeric column."""
    out = []
    for name in dict.fromkeys(r[key] for r in rows):
        group = [r for r in rows if r[key] == name]
        summary = {key: name, "seeds": len(group)}
        for column in group[0]:
            values = [r.get(column) for r in group]
            if column in (key, "seed") or not all(isinstance(v, (int, float)) for v in values):
                continue
            summary[f"{column}_mean"] = float(np.mean(values))
            summary[f"{column}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        out.append(summary)
    return out


def plot(summary: list[dict], gaussian_summary: list[dict], path: pathlib.Path) -> None:
    """Draws test R@1 (both directions), downstream field errors and the Gaussian A error, mean +- std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["objective"] for s in summary]
    x = np.arange(len(names))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for offset, column, label in ((-0.2, "coef_to_traj/R@1", "coef -> traj"),
                                  (0.2, "traj_to_coef/R@1", "traj -> coef")):
        axes[0].bar(x + offset, [s[f"{column}_mean"] for s in summary], 0.4, yerr=[s[f"{column}_std"] for s in summary],
                    label=label, capsize=3)
    axes[0].set(title="held-out retrieval R@1", xticks=x, ylim=(0, 1))
    axes[0].set_xticklabels(names, rotation=30)
    axes[0].legend()
    columns = [c[:-5] for c in summary[0] if c.endswith("_mean") and c.split("/")[0] in ("embed", "hybrid")]
    width = 0.8 / max(len(columns), 1)
    for i, column in enumerate(columns):
        axes[1].bar(x - 0.4 + (i + 0.5) * width, [s[f"{column}_mean"] for s in summary], width,
                    yerr=[s[f"{column}_std"] for s in summary], label=column, capsize=2)
    axes[1].set(title="downstream velocity-field error (rel. L2)", xticks=x)
    axes[1].set_xticklabels(names, rotation=30)
    axes[1].legend(fontsize=7)
    if gaussian_summary:
        gx = np.arange(len(gaussian_summary))
        axes[2].bar(gx, [s["rel_err_A_mean"] for s in gaussian_summary],
                    yerr=[s["rel_err_A_std"] for s in gaussian_summary], capsize=3)
        axes[2].set(title="Gaussian setting: |A - A*| / |A*| (Thm 5.1)", xticks=gx)
        axes[2].set_xticklabels([s["objective"] for s in gaussian_summary])
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", help="training dataset (.nc); the first --n-train fields are used")
    p.add_argument("--test", help="held-out dataset (.nc): retrieval library and downstream flows")
    p.add_argument("--preset", default="learned", choices=sorted(PRESETS),
                   help="encoder and optimiser (default learned)")
    p.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=list(OBJECTIVES))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--n-train", type=int, default=4096, help="training fields")
    p.add_argument("--steps", type=int, default=224, help="training steps (rounded to whole epochs)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--library", type=int, default=4096, help="held-out retrieval library")
    p.add_argument("--fields", type=int, default=8, help="held-out flows per downstream regime (0: no downstream "
                   "errors)")
    p.add_argument("--bank-size", type=int, default=100_000, help="prior draws ranked by embed / hybrid")
    p.add_argument("--gaussian-steps", type=int, default=3000)
    p.add_argument("--skip-gaussian", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny synthetic data and model: a smoke run")
    p.add_argument("--resume", action="store_true", help="keep the rows already in OUT_DIR/objectives.csv and "
                   "continue a run stopped in --work from its last checkpoint (its row says resumed)")
    p.add_argument("--work", default=None, help="run directories (default: a temporary directory)")
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "results")
    p.add_argument("--figure", type=pathlib.Path, default=ROOT / "docs" / "figures" / "objectives.png")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.out_dir, args.figure = pathlib.Path(tempfile.mkdtemp()), None
    with tempfile.TemporaryDirectory() as scratch:
        args.work = args.work or scratch
        if args.quick:
            _quick_data(args, pathlib.Path(scratch))
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        rows = drifter_study(args)
        summary = summarise(rows)
        write_csv(summary, args.out_dir / "objectives_summary.csv")
        gaussian_rows = [] if args.skip_gaussian else gaussian_study(
            steps=200 if args.quick else args.gaussian_steps, seeds=(0,) if args.quick else (0, 1, 2))
        gaussian_summary = summarise(gaussian_rows) if gaussian_rows else []
        if gaussian_rows:
            write_csv(gaussian_rows, args.out_dir / "objectives_gaussian.csv")
        if args.figure is not None:
            plot(summary, gaussian_summary, args.figure)
        print(f"total: {time.perf_counter() - start_wall:.0f} s wall, {time.process_time() - start_cpu:.0f} s CPU "
              f"(this process), load average {os.getloadavg()}")
    return 0


def _quick_data(args, scratch: pathlib.Path) -> None:
    """Writes tiny train/test .npz pairs (K = 9, 100 observations) and shrinks every setting."""
    from lagda.testing import make_pairs

    for name, n, seed in (("train", 32, 1), ("test", 16, 2)):
        pairs = make_pairs(n, seed=seed)
        np.savez(scratch / f"{name}.npz", coef=pairs.coef, positions=pairs.positions, time=pairs.time, k1=pairs.k1,
                 k2=pairs.k2, omega=pairs.omega, prior_scale=pairs.prior_scale, attrs=json.dumps({"dt": 1e-3}))
    args.train, args.test = str(scratch / "train.npz"), str(scratch / "test.npz")
    args.preset, args.n_train, args.batch, args.steps, args.library, args.fields = "tiny", 32, 8, 8, 16, 2
    args.bank_size, args.seeds = 256, [0]


if __name__ == "__main__":
    raise SystemExit(main())
