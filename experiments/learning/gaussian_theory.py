"""Section 5 (Gaussian setting): learned linear encoders vs the closed-form minimisers.

Trains linear encoders ``g_u = G u``, ``g_v = H v`` with lagda.learning.losses on fresh samples
of a centred Gaussian ``(u, v)`` and compares the learned ``A = G^T H`` (and
``B = G^T G``) with the paper's closed forms:

* ``cond``: L_cond (eq. 12 / (42), inner-product tilting (25), ``tau = 1``) ->
  Theorem 5.1, eq. (43); with ``n_e = r`` below full rank, eq. (44).
* ``joint``: L_joint (OP 3.7 / (52), off-diagonal product batch) -> Theorem 5.6,
  eq. (53); rank ``r``: eq. (54).
* ``one_sided_l2``: L_cond(.; 2, 0) with the L2 tilting (26)/(46) -> Theorem 5.3
  (49a, 49b) and Corollary 5.4 (51): the learned u|v conditional (48a) equals the
  true one (37a) in mean map and covariance.

Problems: the 2-D example of section 5.4 (``C = [[1.5, 1], [1, 1.5]]``, ``n_e = 1``;
the numbers behind Figs 2-4), and a d = 6 example (``n_u = n_v = 3``, canonical
correlations 0.6, 0.4, 0.2, random marginal covariances, seed 0) with ``n_e = 3``
and ``n_e = 2`` (rank-constrained forms).

Each row reports ``rel_err = |X_learned - X_theory|_F / |X_theory|_F`` and, so that a
small error means something, ``rel_gap``: the same distance from the theory of the
*other* loss (cond <-> joint; for one_sided_l2, what the two-sided ``cond`` model (41a)
at its A* gives: A*, B = 0, mean map ``C_uu A*`` (equal: Cor 5.2), covariance ``C_uu``).

Command:   python -m experiments.learning.gaussian_theory [--quick]
Writes:    results/gaussian_theory.csv, results/gaussian_theory.png
Runtime:   --quick (N = 256, 800 steps): 17 s CPU time; full (N = 1024, 3000 steps):
           ~5 min CPU time, 11.6 min wall measured on a shared, loaded 2-core machine.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagda.learning import gaussian, losses

jax.config.update("jax_enable_x64", True)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    steps: int  # optimiser steps, one fresh batch each
    batch: int  # samples per batch N
    lr: float  # peak Adam learning rate (cosine decay to 1% of it)
    average_from: float = 0.5  # fraction of steps after which A, B are averaged (Polyak-Ruppert)


def quick() -> RunConfig:
    return RunConfig(steps=800, batch=256, lr=0.03)


def full() -> RunConfig:
    return RunConfig(steps=3000, batch=1024, lr=0.03)


def paper_2d() -> tuple[np.ndarray, int]:
    """Section 5.4: ``mu = N(0, [[1.5, 1], [1, 1.5]])``, u and v scalars."""
    return np.array([[1.5, 1.0], [1.0, 1.5]]), 1


def random_6d(seed: int = 0, correlations=(0.6, 0.4, 0.2)) -> tuple[np.ndarray, int]:
    """A d = 6 Gaussian with prescribed canonical correlations (singular values of the whitened C_uv).

    Correlations are kept <= 0.6 so that at the joint optimum ``2 h(sigma) < 1``, i.e.
    the product-batch estimate of ``E exp(<u, A v>)`` has finite variance.
    """
    rng = np.random.default_rng(seed)
    n = len(correlations)

    def spd():
        m = rng.standard_normal((n, n))
        return m @ m.T / n + 0.5 * np.eye(n)

    c_uu, c_vv = spd(), spd()
    left, _ = np.linalg.qr(rng.standard_normal((n, n)))
    right, _ = np.linalg.qr(rng.standard_normal((n, n)))
    core = (left * np.asarray(correlations)) @ right.T
    c_uv = gaussian.sym_power(c_uu, 0.5) @ core @ gaussian.sym_power(c_vv, 0.5)
    return np.block([[c_uu, c_uv], [c_uv.T, c_vv]]), n


def _loss(kind: str, g, h, u, v):
    u_emb, v_emb = u @ g.T, v @ h.T
    if kind == "cond":
        return losses.conditional_loss(losses.inner_product_similarity(u_emb, v_emb))
    if kind == "joint":
        return losses.joint_loss(losses.inner_product_similarity(u_emb, v_emb))
    if kind == "one_sided_l2":
        return losses.conditional_loss(losses.negative_squared_distance(u_emb, v_emb), lambda_u=2.0, lambda_v=0.0)
    raise ValueError(f"unknown loss kind {kind!r}; valid values: cond, joint, one_sided_l2")


@functools.partial(jax.jit, static_argnames=("kind", "n_u", "n_e", "config"))
def train(key, chol, kind: str, n_u: int, n_e: int, config: RunConfig):
    """Returns Polyak-averaged ``(A, B)`` after ``config.steps`` Adam steps on fresh batches.

    ``chol``: Cholesky factor of the joint covariance, ``(d, d)``.
    """
    d = chol.shape[0]
    init_key, data_key = jax.random.split(key)
    g_key, h_key = jax.random.split(init_key)
    params = {
        "g": 0.3 * jax.random.normal(g_key, (n_e, n_u)),
        "h": 0.3 * jax.random.normal(h_key, (n_e, d - n_u)),
    }
    schedule = optax.cosine_decay_schedule(config.lr, config.steps, alpha=0.01)
    optimiser = optax.adam(schedule)
    start = int(config.average_from * config.steps)

    def step(carry, index):
        params, opt_state, a_sum, b_sum = carry
        z = jax.random.normal(jax.random.fold_in(data_key, index), (config.batch, d)) @ chol.T
        grads = jax.grad(lambda p: _loss(kind, p["g"], p["h"], z[:, :n_u], z[:, n_u:]))(params)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        weight = (index >= start).astype(chol.dtype)
        a_sum = a_sum + weight * (params["g"].T @ params["h"])
        b_sum = b_sum + weight * (params["g"].T @ params["g"])
        return (params, opt_state, a_sum, b_sum), None

    carry = (params, optimiser.init(params), jnp.zeros((n_u, d - n_u)), jnp.zeros((n_u, n_u)))
    (_, _, a_sum, b_sum), _ = jax.lax.scan(step, carry, jnp.arange(config.steps))
    count = config.steps - start
    return a_sum / count, b_sum / count


def _rel(x, ref) -> float:
    return float(np.linalg.norm(np.asarray(x) - ref) / np.linalg.norm(ref))


def cases(quick_run: bool):
    """Yields ``(problem, cov, n_u, n_e, kind)`` for every row of the table."""
    problems = [("paper_2d", *paper_2d())]
    problems.append(("gauss_6d", *random_6d()))
    for name, cov, n_u in problems:
        n_v = cov.shape[0] - n_u
        ranks = [min(n_u, n_v)] + ([min(n_u, n_v) - 1] if min(n_u, n_v) > 1 else [])
        for n_e in ranks:
            for kind in ("cond", "joint"):
                yield name, cov, n_u, n_e, kind
        yield name, cov, n_u, max(n_u, n_v), "one_sided_l2"


def compare(kind, cov, n_u, n_e, a, b) -> list[dict]:
    """Returns the table rows comparing learned ``(A, B)`` with the theorems."""
    full_rank = n_e >= min(n_u, cov.shape[0] - n_u)
    rank = None if full_rank else n_e
    rows = []
    if kind in ("cond", "joint"):
        theory = {"cond": gaussian.cond_minimizer(cov, n_u, rank), "joint": gaussian.joint_minimizer(cov, n_u, rank)}
        other = "joint" if kind == "cond" else "cond"
        label = {"cond": "Thm 5.1 eq. (43)" if full_rank else "Thm 5.1 eq. (44)",
                 "joint": "Thm 5.6 eq. (53)" if full_rank else "Thm 5.6 eq. (54)"}[kind]
        rows.append(dict(quantity="A", theory=label, rel_err=_rel(a, theory[kind]),
                         rel_gap=_rel(theory[other], theory[kind])))
        return rows
    a_star, b_star = gaussian.one_sided_minimizer(cov, n_u)
    a_cond = gaussian.cond_minimizer(cov, n_u)
    c_uu, _, _ = gaussian.split_covariance(cov, n_u)
    mean_map, cond_cov = gaussian.l2_model_conditional_u_given_v(a, b, c_uu)
    true_mean, true_cov = gaussian.conditional_u_given_v(cov, n_u)
    # Two-sided conditional model (41a) at A*_cond has covariance C_uu: the gap that
    # Corollary 5.4 closes.
    rows.append(dict(quantity="A", theory="Thm 5.3 eq. (49a)", rel_err=_rel(a, a_star), rel_gap=_rel(a_cond, a_star)))
    rows.append(dict(quantity="B", theory="Thm 5.3 eq. (49b)", rel_err=_rel(b, b_star), rel_gap=1.0))
    rows.append(dict(quantity="E[u|v] map", theory="Cor 5.4 eq. (51)", rel_err=_rel(mean_map, true_mean),
                     rel_gap=_rel(c_uu @ a_cond, true_mean)))
    rows.append(dict(quantity="Cov[u|v]", theory="Cor 5.4 eq. (51)", rel_err=_rel(cond_cov, true_cov),
                     rel_gap=_rel(c_uu, true_cov)))
    return rows


def run(quick_run: bool = False, seed: int = 0) -> list[dict]:
    """Trains every case and returns the table rows (also timing per case)."""
    config = quick() if quick_run else full()
    key = jax.random.PRNGKey(seed)
    table = []
    for index, (problem, cov, n_u, n_e, kind) in enumerate(cases(quick_run)):
        chol = jnp.asarray(np.linalg.cholesky(cov))
        start = time.perf_counter()
        a, b = train(jax.random.fold_in(key, index), chol, kind, n_u, n_e, config)
        a, b = np.asarray(a), np.asarray(b)
        seconds = time.perf_counter() - start
        for row in compare(kind, cov, n_u, n_e, a, b):
            table.append(dict(problem=problem, loss=kind, n_e=n_e, batch=config.batch, steps=config.steps,
                              seconds=round(seconds, 2), **row))
    return table


def write_outputs(table: list[dict], out_dir: str, stem: str = "gaussian_theory") -> None:
    """Writes ``<out_dir>/<stem>.csv`` and a bar chart ``<stem>.png`` (temporary name, then rename)."""
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, f"{stem}.csv")
    with open(csv_path + ".tmp", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    os.replace(csv_path + ".tmp", csv_path)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['problem']} {r['loss']} n_e={r['n_e']}\n{r['quantity']} vs {r['theory']}" for r in table]
    y = np.arange(len(table))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(table) + 1.5))
    ax.barh(y - 0.2, [r["rel_err"] for r in table], 0.4, label="learned vs theory")
    ax.barh(y + 0.2, [r["rel_gap"] for r in table], 0.4, label="competing theory vs theory")
    ax.set_yticks(y, labels, fontsize=6)
    ax.set_xscale("log")
    ax.set_xlim(left=1e-4)  # the E[u|v] gap is 0 (Cor 5.2: both losses match the mean)
    ax.set_xlabel("relative Frobenius error")
    ax.invert_yaxis()
    ax.legend(fontsize=7)
    fig.tight_layout()
    png_path = os.path.join(out_dir, f"{stem}.png")
    fig.savefig(png_path + ".tmp.png", dpi=120)
    plt.close(fig)
    os.replace(png_path + ".tmp.png", png_path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches/steps (tests; < 30 s)")
    parser.add_argument("--out", default="results", help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table = run(args.quick, args.seed)
    write_outputs(table, args.out)
    print(f"{'problem':9} {'loss':13} {'n_e':>3} {'quantity':11} {'theory':18} {'rel_err':>8} {'rel_gap':>8}")
    for r in table:
        print(f"{r['problem']:9} {r['loss']:13} {r['n_e']:>3} {r['quantity']:11} {r['theory']:18} "
              f"{r['rel_err']:8.4f} {r['rel_gap']:8.4f}")
    print(f"total {time.perf_counter() - start:.1f} s; wrote {args.out}/gaussian_theory.csv and .png")


if __name__ == "__main__":
    main()
