"""Benchmark of the drifter integrators: particle-steps per second (trajectories x RK4 steps / s).

Rows: (a) a plain vectorised numpy RK4 (float64, complex exponentials per mode, what a
scientist would write), (b) the reference `simulate_tracks` (jit, float32), (c)
`fast_tracks` in float32 and float64, on one and on two host devices. Every rate is also
given as a ratio to (a) measured in the same run, since the machine is shared. The model is
the paper's: 49 modes, spectrum(k1, k2, 1.5, 10), omega ~ U(-20 pi, 20 pi), dt = 1e-5.

    python3 benchmarks/bench_simulate.py [--quick | --full-paper] [--fast-batch N]

`--fast-batch` sets the trajectories of the fast-kernel rows (4096 fills a CPU; a GPU needs
tens of thousands of trajectories in flight).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")  # before jax starts
# A multithreaded OpenBLAS matvec spins badly on a shared 2-core machine (measured 30 ms for a
# 1024 x 49 zgemv under load); the baseline sums over modes with numpy ufuncs instead.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from simulate import draw_coefficients, draw_frequencies, rectangular_modes, simulate_tracks, spectrum  # noqa: E402
from simulate import kernels  # noqa: E402

PAPER_STEPS = 64_536 * 10_000  # train + test trajectories x RK4 steps


def numpy_rk4(coef, z, k1, k2, omega, dt, n_steps):
    """Returns positions after n_steps of a straightforward numpy RK4, z `(batch, 2)` float64."""
    kx, ky = 2j * np.pi * k1, 2j * np.pi * k2

    def velocity(z, t):
        terms = coef * np.exp(1j * (omega * t + 2 * np.pi * (np.outer(z[:, 0], k1) + np.outer(z[:, 1], k2))))
        return np.stack([-np.real(np.sum(terms * ky, axis=1)), np.real(np.sum(terms * kx, axis=1))], axis=1)

    for n in range(n_steps):
        t = n * dt
        a = velocity(z, t)
        b = velocity(z + 0.5 * dt * a, t + 0.5 * dt)
        c = velocity(z + 0.5 * dt * b, t + 0.5 * dt)
        d = velocity(z + dt * c, t + dt)
        z = z + dt * (a / 6 + b / 3 + c / 3 + d / 6)
    return z


def timed(fn, repeats):
    """Returns (best wall seconds, CPU seconds of that run) of fn() after one warm-up call."""
    fn()
    best = (np.inf, np.inf)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def problem(n_samples, dtype):
    """Returns (coef, release, k1, k2, omega) of the paper's prior, one drifter per field."""
    k1, k2 = rectangular_modes()
    coef = draw_coefficients(jax.random.key(0), spectrum(k1, k2, 1.5, 10.0), n_samples, jnp.complex128)
    omega = draw_frequencies(jax.random.key(1), len(k1), 20 * np.pi)
    release = jnp.full((n_samples, 1, 2), 0.75, jnp.float64)
    complex_dtype = jnp.complex64 if dtype == jnp.float32 else jnp.complex128
    return coef.astype(complex_dtype), release.astype(dtype), k1, k2, omega


def flops_per_step(n_modes_side=3):
    """Returns (arithmetic ops, sin/cos calls) per particle-step of the fast kernel, counted in its jaxpr."""
    k1, k2 = rectangular_modes((-n_modes_side, n_modes_side), (-n_modes_side, n_modes_side))
    modes = kernels.folded_modes(k1, k2)
    fold, batch = len(modes), 7  # an odd batch size tells per-trajectory ops from shared ones
    coefs = tuple(jnp.zeros((fold, batch), jnp.float32) for _ in range(4))
    rot = jnp.zeros((3, 4, fold), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda z: kernels._rk4_step((z, z), jnp.int32(0), jnp.float32(1e-5), coefs, rot, modes,
                                                        None, True))(jnp.zeros(batch, jnp.complex64))
    arith = {"add", "sub", "mul", "neg", "div", "round"}
    ops = trig = 0
    for eqn in jaxpr.jaxpr.eqns:
        if any(v.aval.shape == (batch,) for v in eqn.outvars):
            name = eqn.primitive.name
            per = 2 if jnp.issubdtype(eqn.outvars[0].aval.dtype, jnp.complexfloating) else 1  # complex add = 2 flops
            ops += per * (name in arith)
            trig += name in ("sin", "cos")
    return ops, trig


def matmul_peak(n=4096, repeats=3):
    """Returns the measured float32 matmul rate in GFLOP/s (jnp.dot of two n x n matrices)."""
    a = jnp.ones((n, n), jnp.float32)
    dot = jax.jit(jnp.dot)
    wall, _ = timed(lambda: dot(a, a).block_until_ready(), repeats)
    return 2 * n**3 / wall / 1e9


def measure_rows(quick, repeats, fast_batch=4096):
    """Returns the benchmark rows: (name, batch, steps, wall s, cpu s); `fast_batch`: trajectories of rows (c)."""
    n_np, s_np = (64, 20) if quick else (1024, 200)
    n_ref, s_ref = (64, 20) if quick else (1024, 200)
    n_fast, s_fast = (256, 100) if quick else (fast_batch, 1000)
    rows = []
    coef, release, k1, k2, omega = problem(n_np, jnp.float64)
    c, z = np.asarray(coef), np.asarray(release[:, 0])
    rows.append(("(a) numpy RK4, vectorised, f64", n_np, s_np,
                 *timed(lambda: numpy_rk4(c, z, k1, k2, omega, 1e-5, s_np), repeats)))
    coef, release, k1, k2, omega = problem(n_ref, jnp.float32)
    k1j, k2j, omj = (jnp.asarray(a, jnp.float32) for a in (k1, k2, omega))  # keeps x64 from promoting to f64
    ref = jax.jit(lambda c, r: simulate_tracks(c, r, k1j, k2j, omj, jnp.float32(1e-5), s_ref // 10, 10))
    rows.append(("(b) reference simulate_tracks, jit, f32", n_ref, s_ref,
                 *timed(lambda: ref(coef, release).block_until_ready(), repeats)))
    for dtype, steps, devices in ((jnp.float32, s_fast, 1), (jnp.float64, s_fast // 2, 1),
                                  (jnp.float32, s_fast, jax.local_device_count())):
        coef, release, k1, k2, omega = problem(n_fast, dtype)
        name = f"(c) fast_tracks, {jnp.dtype(dtype).name[:1]}{jnp.dtype(dtype).itemsize * 8}, {devices} device(s)"
        fn = lambda: kernels.fast_tracks(coef, release, k1, k2, omega, 1e-5, steps // 10, 10, dtype=dtype,
                                         n_devices=devices).block_until_ready()
        rows.append((name, n_fast, steps, *timed(fn, repeats)))
    return rows


def full_paper(chunk=4096):
    """Returns (seconds, trajectories) to integrate the paper's 64,536 x 10,000 steps, end to end."""
    total = 64_536
    k1, k2 = rectangular_modes()
    scale = spectrum(k1, k2, 1.5, 10.0)
    omega = draw_frequencies(jax.random.key(1), len(k1), 20 * np.pi)
    release = jnp.full((chunk, 1, 2), 0.75, jnp.float32)
    out = np.empty((total, 1, 1000, 2), np.float32)
    start = time.perf_counter()
    for i, first in enumerate(range(0, total, chunk)):
        coef = draw_coefficients(jax.random.fold_in(jax.random.key(0), i), scale, chunk)  # padded last chunk
        tracks = kernels.fast_tracks(coef, release, k1, k2, omega, 1e-5, 1000, 10)
        n = min(chunk, total - first)
        out[first:first + n] = np.asarray(tracks[:n])
        print(f"  chunk {i}: {first + n} trajectories, {time.perf_counter() - start:.1f} s", flush=True)
    return time.perf_counter() - start, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument("--full-paper", action="store_true", help="also integrate the whole paper dataset")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fast-batch", type=int, default=4096, help="trajectories of the fast-kernel rows")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, devices {jax.devices()}, load average {os.getloadavg()[0]:.1f}")
    rows = measure_rows(args.quick, args.repeats, args.fast_batch)
    peak = matmul_peak(1024 if args.quick else 4096)
    ops, trig = flops_per_step()
    base = rows[0][1] * rows[0][2] / rows[0][3]
    print(f"\nfast kernel: {ops} flops + {trig} sin/cos per particle-step (counted in its jaxpr; complex add = 2)")
    print(f"float32 matmul peak measured now: {peak:.0f} GFLOP/s\n")
    print("| implementation | batch | steps | particle-steps/s (wall) | per CPU-second | x numpy | paper dataset | GFLOP/s (% of matmul peak) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, batch, steps, wall, cpu in rows:
        rate = batch * steps / wall
        gflops = f"{ops * rate / 1e9:.1f} ({100 * ops * rate / 1e9 / peak:.1f}%)" if name.startswith("(c)") else ""
        print(f"| {name} | {batch} | {steps} | {rate:.3g} | {batch * steps / cpu:.3g} | {rate / base:.1f} | "
              f"{PAPER_STEPS / rate / 60:.1f} min | {gflops} |")
    if args.full_paper:
        seconds, total = full_paper()
        print(f"\nfull paper dataset: {total} trajectories x 10,000 steps in {seconds:.1f} s "
              f"({total * 10_000 / seconds:.3g} particle-steps/s, {jax.local_device_count()} device(s), incl. compile)")


if __name__ == "__main__":
    main()
