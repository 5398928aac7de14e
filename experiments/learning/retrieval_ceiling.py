"""The retrieval ceiling: R@k of ranking a library with the flow model known, against what an encoder learns.

Two rankings of a library of fields (the first `--library` pairs of the test file, as `lagda evaluate` and the
`eval_library` of training define it; pessimistic ranks of lagda.learning.retrieval), in both directions:

* `likelihood`: the misfit of a track's finite-difference velocities v_i (lagda.learning.physics.design_matrix,
  every `stride`-th position, at the interval midpoints) to a candidate's velocity G_i theta_j along the track,

      misfit_ij = stride * sum_intervals |v_i - G_i theta_j|^2 = |v_i|^2 - 2 b_i.theta_j + theta_j^T A_i theta_j,

  with A_i = stride G_i^T G_i and b_i = stride G_i^T v_i. Under white Gaussian velocity errors of variance
  sigma^2 / stride per interval, -misfit_ij / (2 sigma^2) is the log-likelihood of track i given field j up to a
  constant, so a scalar sigma^2 does not change either ranking: traj->coef ranks the fields j of the library for
  track i (the exact posterior's ranking for a library drawn from the prior), coef->traj ranks the tracks i for
  field j with the same score matrix. The score is an inner product of a coefficient-side embedding
  (theta, theta theta^T, 1) and a track-side one (2 b, -A, -|v|^2), ranked by
  lagda.learning.retrieval.retrieval_metrics in float64.
* `posterior-mean`: the linear-Gaussian posterior mean of theta given the same velocities under the prior
  (lagda.learning.physics.posterior_mean, the `cpu` preset's physics estimate), ranked by the masked cosine of
  `lagda evaluate` (c_(0,0) left out). Once with the `cpu` preset's own noise and stride, and at each stride with
  the velocity-error variance estimated on the training file.

The velocity-error variance is estimated, not marginalised: sigma_v^2 is the mean square of v - G theta at the
true coefficients of the first `--noise-fields` fields of the training file (the finite-difference truncation
and the float32 rounding of the recorded positions), per stride; it enters the posterior mean's ridge as
stride * sigma_v^2 and is written beside every row.

    lagda simulate --preset small --n-samples 4096 --seed 2 --out test4096.nc
    lagda simulate --preset small --n-samples 1024 --seed 1 --out train1024.nc   # the training file's first fields
    nice -n 10 python -m experiments.learning.retrieval_ceiling --train train1024.nc --test test4096.nc

Results: docs/results/training-ceiling.md, results/retrieval_ceiling.csv.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import functools
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.common.paths import ROOT
from lagda.learning import config as train_config
from lagda.learning import losses, physics
from lagda.learning.data import PairedData, check_same_modes, load_paired
from lagda.learning.encoders import embed_coefficients, similarity_mask
from lagda.learning.evaluate import RECALL_KS
from lagda.learning.retrieval import retrieval_metrics
from simulate.atomic import write_atomic

CHUNK = 64  # tracks per design-matrix batch: 100 MB of float64 at stride 1, 1,000 observations and K = 49
DIRECTIONS = ("coef_to_traj", "traj_to_coef")
METRICS = tuple(f"{d}/R@{k}" for d in DIRECTIONS for k in RECALL_KS)
MARGINS = ("traj_to_coef/margin_min", "traj_to_coef/margin_median", "coef_to_traj/margin_min",
           "coef_to_traj/margin_median")
COLUMNS = ("method", "stride", "velocity_noise_std", "ridge_noise", "library", *METRICS, *MARGINS, "seconds")
_INNER = functools.partial(losses.similarity, kind="inner", tau=1.0)  # one object: retrieval caches by function
_COSINE = functools.partial(losses.similarity, kind="cosine", tau=1.0)


def _theta(coef) -> np.ndarray:
    """Returns theta = (Re c, Im c), float64 `(sample, 2 * mode)`."""
    return np.asarray(embed_coefficients(np.asarray(coef, np.complex128)), np.float64)


def _upper(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the upper-triangle indices `(pair,)` twice and the weights 1 (diagonal) or 2 (off it)."""
    row, col = np.triu_indices(n)
    return row, col, np.where(row == col, 1.0, 2.0)


def coefficient_features(coef) -> np.ndarray:
    """Returns the coefficient side of the misfit, float64 `(sample, 2K + 2K(2K + 1)/2 + 1)`: (theta, theta_m
    theta_n for m <= n, 1), so that `coefficient_features(c) @ track_features(...).T = -misfit`.

    Parameters
    ----------
    coef
        complex `(sample, mode)` coefficients c_k.
    """
    theta = _theta(coef)
    row, col, _ = _upper(theta.shape[1])
    return np.concatenate([theta, theta[:, row] * theta[:, col], np.ones((len(theta), 1))], axis=1)


def _chunked(fn, n: int, chunk: int) -> list:
    """Returns [fn(slice) for each slice of `chunk` of range(n)], run on a thread pool (numpy releases the GIL)."""
    slices = [slice(start, start + chunk) for start in range(0, n, chunk)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(slices), os.cpu_count() or 1)) as pool:
        return list(pool.map(fn, slices))


def track_features(positions, time_, k1, k2, omega, stride: int, chunk: int = CHUNK) -> np.ndarray:
    """Returns the track side of the misfit, float64 `(sample, 2K + 2K(2K + 1)/2 + 1)`: (2 b, -A_mn for m <= n
    (weighted 2 off the diagonal), -|v|^2) with A = stride G^T G, b = stride G^T v of the finite-difference
    velocities v of physics.design_matrix.

    Parameters
    ----------
    positions
        unwrapped `(sample, obs, 2)`
    time_
        `(obs,)`.
    k1, k2, omega
        `(mode,)` wavevectors and frequencies.
    stride
        observations per finite-difference interval.
    chunk
        tracks per design-matrix batch (memory per worker thread: `chunk * obs / stride * 4K` float64).
    """
    n = 2 * len(k1)
    row, col, weight = _upper(n)

    def features(part):
        g, v = physics.design_matrix(positions[part], time_, k1, k2, omega, stride)
        g, v = g.reshape(len(g), -1, n), v.reshape(len(v), -1)  # (track, 2 * interval, 2K), (track, 2 * interval)
        gram = stride * np.matmul(g.transpose(0, 2, 1), g)
        b = stride * np.einsum("tim,ti->tm", g, v)
        return np.concatenate([2 * b, -weight * gram[:, row, col], -stride * np.sum(v**2, 1, keepdims=True)], 1)

    return np.concatenate(_chunked(features, len(positions), chunk))


def velocity_noise(data: PairedData, stride: int, n_fields: int, chunk: int = CHUNK) -> tuple[float, float, float]:
    """Returns (sigma_v, lag-1 correlation, v_rms): the rms of the finite-difference velocity error v - G theta at
    the true coefficients, per component, over the first `n_fields` fields' first drifter, the correlation of
    consecutive intervals' errors, and the rms of v itself per component."""
    theta = _theta(data.coef[:n_fields])

    def sums(part):
        g, v = physics.design_matrix(data.positions[:n_fields][part, 0], data.time, data.k1, data.k2, data.omega,
                                     stride)
        residual = v - np.einsum("tjcm,tm->tjc", g, theta[part])
        return (np.sum(residual**2), np.sum(residual[:, 1:] * residual[:, :-1]), residual.size,
                residual[:, 1:].size, np.sum(v**2))

    square, lagged, size, lagged_size, speed = np.sum(_chunked(sums, len(theta), chunk), axis=0)
    variance = square / size
    return float(np.sqrt(variance)), float(lagged / lagged_size / variance), float(np.sqrt(speed / size))


def misfit_margins(u: np.ndarray, v: np.ndarray, chunk: int = 1024) -> dict[str, float]:
    """Returns the min and median over queries of (smallest misfit of a wrong candidate) / (misfit of the true
    one), per direction: above 1 the true candidate ranks first, and by how much.

    Parameters
    ----------
    u
        `(sample, n)` coefficient_features
    v
        `(sample, n)` track_features, row i paired with u[i].
    """
    n = len(u)
    library = jnp.asarray(u)
    track_best, true, coef_best = [], [], jnp.full(n, jnp.inf)
    for start in range(0, n, chunk):
        misfit = -(jnp.asarray(v[start:start + chunk]) @ library.T)  # (track, field), on the accelerator if any
        rows = jnp.arange(misfit.shape[0])
        true.append(misfit[rows, start + rows])
        misfit = misfit.at[rows, start + rows].set(jnp.inf)
        track_best.append(misfit.min(axis=1))
        coef_best = jnp.minimum(coef_best, misfit.min(axis=0))
    track_best, true, coef_best = (np.asarray(x) for x in (jnp.concatenate(track_best), jnp.concatenate(true),
                                                             coef_best))
    ratios = {"traj_to_coef": track_best / true, "coef_to_traj": coef_best / true}
    return {f"{d}/margin_{name}": float(fn(r)) for d, r in ratios.items()
            for name, fn in (("min", np.min), ("median", np.median))}


def likelihood_recall(data: PairedData, stride: int, batch: int = 1024) -> dict[str, float]:
    """Returns `{"<direction>/R@k": fraction}` of the misfit ranking over all pairs of `data` (first drifter),
    with misfit_margins.

    Raises
    ------
    ValueError
        if JAX computes in float32 (the misfit's terms cancel to its value: float64 is needed).
    """
    if not jax.config.jax_enable_x64:
        raise ValueError("the misfit ranking needs float64: set jax_enable_x64 (main() does)")
    u = coefficient_features(data.coef)
    v = track_features(data.positions[:, 0], data.time, data.k1, data.k2, data.omega, stride)
    return retrieval_metrics(u, v, _INNER, ks=RECALL_KS, batch_size=batch) | misfit_margins(u, v, batch)


def posterior_mean_recall(data: PairedData, noise: float, stride: int, batch: int = 1024) -> dict[str, float]:
    """Returns `{"<direction>/R@k": fraction}` of the posterior mean's masked cosine ranking (first drifter).

    `noise`: physics.posterior_mean's sigma^2 (the error variance of sqrt(stride) v, prior-whitened units).
    """
    prior_sd = physics.prior_sd_of(data.prior_scale)
    theta_hat = np.concatenate(_chunked(
        lambda part: physics.posterior_mean(data.positions[part, 0], data.time, data.k1, data.k2, data.omega,
                                            prior_sd, noise, stride), data.n_samples, CHUNK))
    mask = similarity_mask(data.k1, data.k2, mask_mean_mode=True)
    u = np.asarray(embed_coefficients(data.coef), np.float32) * mask
    return retrieval_metrics(u, theta_hat * mask, _COSINE, ks=RECALL_KS, batch_size=batch)


def load_library(train_path, test_path, library: int) -> tuple[PairedData, PairedData]:
    """Returns (training pairs, the library: the first `library` test pairs; 0: all).

    Raises
    ------
    FileNotFoundError
        a missing file.
    ValueError
        unreadable files, modes, frequencies or times that differ, more than one drifter, or a
        library larger than the test file.
    """
    train, test = load_paired(train_path), load_paired(test_path)
    check_same_modes(train.meta(), test, f"test file {test_path}")
    if train.positions.shape[1] != 1 or test.positions.shape[1] != 1:
        raise ValueError(f"one drifter per field expected; got {train.positions.shape[1]} (train) and "
                         f"{test.positions.shape[1]} (test)")
    if library > test.n_samples:
        raise ValueError(f"--library {library} is larger than the test file's {test.n_samples} fields")
    return train, test.subset(slice(0, library or test.n_samples))


def measure(train: PairedData, test: PairedData, strides, noise_fields: int, batch: int) -> list[dict]:
    """Returns one row per (method, stride) with R@k in both directions, the noise used and the seconds taken."""
    cpu = train_config.cpu()
    rows = []

    def run(method, stride, sigma_v, ridge, fn):
        start = time.perf_counter()
        scores = fn()
        rows.append({"method": method, "stride": stride, "velocity_noise_std": sigma_v, "ridge_noise": ridge,
                     "library": test.n_samples, **scores, "seconds": round(time.perf_counter() - start, 1)})
        print(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rows[-1].items()),
              flush=True)

    sigma_cpu, _, _ = velocity_noise(train, cpu.physics_stride, noise_fields)
    run("posterior-mean:cpu-preset", cpu.physics_stride, sigma_cpu, cpu.physics_noise,
        lambda: posterior_mean_recall(test, cpu.physics_noise, cpu.physics_stride, batch))
    for stride in strides:
        sigma_v, lag1, v_rms = velocity_noise(train, stride, noise_fields)
        print(f"stride {stride}: velocity error rms {sigma_v:.3g} at the true coefficients (first {noise_fields} "
              f"training fields; the velocity's rms {v_rms:.3g}), lag-1 correlation {lag1:.2f}", flush=True)
        run("likelihood", stride, sigma_v, "", lambda: likelihood_recall(test, stride, batch))
        ridge = stride * sigma_v**2
        run("posterior-mean:estimated-noise", stride, sigma_v, ridge,
            lambda: posterior_mean_recall(test, ridge, stride, batch))
    return rows


def write_rows(rows: list[dict], out: pathlib.Path) -> None:
    """Writes the rows as CSV (COLUMNS) via a temporary file and rename."""
    def write(tmp):
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    write_atomic(out, write)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="a lagda dataset with the library's modes (noise estimate)")
    p.add_argument("--test", required=True, help="the library's dataset (its first --library fields)")
    p.add_argument("--library", type=int, default=4096, help="fields in the library (0: the whole test file)")
    p.add_argument("--strides", default="1,2,4,8", help="comma list of finite-difference strides")
    p.add_argument("--noise-fields", type=int, default=1024, help="training fields for the velocity-error estimate")
    p.add_argument("--batch", type=int, default=1024, help="queries per similarity chunk")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "results" / "retrieval_ceiling.csv")
    args = p.parse_args(argv)
    try:
        strides = [int(s) for s in args.strides.split(",")]
    except ValueError:
        p.error(f"--strides must be a comma list of integers; got {args.strides!r}")
    if min(strides) < 1 or args.library < 0 or args.noise_fields < 1 or args.batch < 1:
        p.error("--strides, --noise-fields and --batch must be >= 1 and --library >= 0")
    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    try:
        train, test = load_library(args.train, args.test, args.library)
    except (FileNotFoundError, ValueError) as error:
        p.error(str(error))
    print(f"library: the first {test.n_samples} fields of {args.test}; noise from the first "
          f"{min(args.noise_fields, train.n_samples)} of {args.train}", flush=True)
    rows = measure(train, test, strides, args.noise_fields, args.batch)
    write_rows(rows, args.out)
    print(f"wrote {args.out}: {time.perf_counter() - start:.0f} s wall, {time.process_time():.0f} s CPU "
          f"(this process), load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
