"""Benchmark of the drifter integrators and of dataset generation end to end.

Speed is in particle-steps per second (trajectories x RK4 steps / wall second). Rows: (a) a plain
vectorised numpy RK4 (float64, complex exponentials per mode, what a scientist would write; one
core), (b) the reference `simulate_tracks` (jit, float32), (c) `fast_tracks` in float32 and
float64 on one device and on one device per core. Every rate is also a ratio to (a) measured in
the same run, since the machine is shared. The model is the paper's: 49 modes,
spectrum(k1, k2, 1.5, 10), omega ~ U(-20 pi, 20 pi), dt = 1e-5.

Then, in the same run: the float32 kernel's largest deviation from float64 over the paper's 10^4
steps; the machine's limit, the float32 matmul rate, against the kernel's floating-point
operations per particle-step counted in its optimised HLO (after XLA's simplification, an FMA
counted as two); and the paper dataset end to end, `lagda simulate --preset paper --seed 1`
in a fresh process (start-up, compilation, generation and the netCDF file), set against what
the numpy RK4 of row (a) would take for the same particle-steps.

    python -m benchmarks.bench_simulate [--quick] [--e2e-samples N] [--fast-batch N]

--quick: tiny sizes and a 2,048-field end-to-end run (a smoke test; the full-dataset time is
then an extrapolation, marked as such). The load average is printed beside every timing.
`--fast-batch` sets the trajectories of the fast-kernel rows (4096 fills a CPU; a GPU needs
tens of thousands of trajectories in flight).
"""

from __future__ import annotations

import os

# A multithreaded OpenBLAS matvec spins badly on a shared 2-core machine (measured 30 ms for a
# 1024 x 49 zgemv under load); the baseline sums over modes with numpy ufuncs instead.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from simulate import kernels

kernels.use_host_cores()  # one CPU device per core, as `lagda simulate` does (before JAX starts)
jax.config.update("jax_enable_x64", True)

from simulate import (  # noqa: E402
    draw_coefficients,
    draw_frequencies,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)
from simulate.config import paper  # noqa: E402

PAPER = paper()
PAPER_STEPS = PAPER.n_samples * PAPER.n_steps  # one file (train): 32,268 fields x 10,000 RK4 steps
ROOT = Path(__file__).resolve().parents[1]


def load():
    """Returns the 1-minute load average as text."""
    return f"load {os.getloadavg()[0]:.1f}"


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


def kernel_flops(dtype=jnp.float32, batch=1031):
    """Returns floating-point operations per particle-step of the compiled fast kernel.

    Counted in the optimised HLO of the innermost loop (one RK4 step), after XLA's common
    subexpression elimination: add, subtract, multiply, divide on per-trajectory arrays (an odd
    batch size tells them from shared ones), complex add = 2, complex multiply = 6. LLVM
    contracts many pairs into FMAs; those count two, as the matmul's 2 n^3 does.
    """
    k1, k2 = rectangular_modes()
    real = jnp.dtype(dtype)
    run = kernels._compiled(kernels.folded_modes(k1, k2), 1, 2, 10, False, True, 1, 1)
    args = (jax.ShapeDtypeStruct((batch, len(k1)), jnp.complex64 if real == jnp.float32 else jnp.complex128),
            jax.ShapeDtypeStruct((batch, 1, 2), real), jax.ShapeDtypeStruct((len(k1),), real),
            jax.ShapeDtypeStruct((), real), jax.ShapeDtypeStruct((), real), jax.random.split(jax.random.key(0), batch))
    text = run.lower(*args).compile().as_text()
    bodies, calls, ops = {}, {}, {}
    name = None
    for line in text.splitlines():
        header = re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line)
        if header:
            name = header.group(1)
            calls[name], ops[name] = set(), 0
            continue
        if name is None or not line.startswith("  "):
            continue
        calls[name].update(re.findall(r"(?:calls|body|to_apply)=%([\w.\-]+)", line))
        if " while(" in line:
            bodies[name] = re.search(r"body=%([\w.\-]+)", line).group(1)
        op = re.match(r"\s*(?:ROOT )?%[\w.\-]+ = (f32|f64|c64|c128)\[([\d,]+)\]\S* "
                      r"(add|subtract|multiply|divide)\(", line)
        if op and op.group(2).split(",")[-1] == str(batch):
            per = (6 if op.group(3) == "multiply" else 2) if op.group(1).startswith("c") else 1
            ops[name] += per * int(np.prod([int(d) for d in op.group(2).split(",")])) // batch
    step = next(body for body in bodies.values() if body not in bodies)  # the loop body with no loop inside

    def count(comp):
        return ops.get(comp, 0) + sum(count(c) for c in calls.get(comp, ()))

    return count(step)


def matmul_peak(n=4096, repeats=3):
    """Returns the measured float32 matmul rate, GFLOP/s per wall second and per CPU-second.

    jnp.dot of two n x n matrices on all cores: the machine's limit for float32 arithmetic.
    """
    a = jnp.ones((n, n), jnp.float32)
    dot = jax.jit(jnp.dot)
    wall, cpu = timed(lambda: dot(a, a).block_until_ready(), repeats)
    return 2 * n**3 / wall / 1e9, 2 * n**3 / cpu / 1e9


def measure_rows(quick, repeats, fast_batch=4096):
    """Returns the benchmark rows: (name, batch, steps, wall s, cpu s, load); `fast_batch`: trajectories of rows (c)."""
    n_np, s_np = (64, 20) if quick else (1024, 200)
    n_ref, s_ref = (64, 20) if quick else (1024, 200)
    n_fast, s_fast = (256, 100) if quick else (fast_batch, 1000)
    rows = []
    coef, release, k1, k2, omega = problem(n_np, jnp.float64)
    c, z = np.asarray(coef), np.asarray(release[:, 0])
    rows.append(("(a) numpy RK4, vectorised, f64", n_np, s_np,
                 *timed(lambda: numpy_rk4(c, z, k1, k2, omega, 1e-5, s_np), repeats), load()))
    coef, release, k1, k2, omega = problem(n_ref, jnp.float32)
    k1j, k2j, omj = (jnp.asarray(a, jnp.float32) for a in (k1, k2, omega))  # keeps x64 from promoting to f64
    ref = jax.jit(lambda c, r: simulate_tracks(c, r, k1j, k2j, omj, jnp.float32(1e-5), s_ref // 10, 10))
    rows.append(("(b) reference simulate_tracks, jit, f32", n_ref, s_ref,
                 *timed(lambda: ref(coef, release).block_until_ready(), repeats), load()))
    cores = jax.local_device_count()
    for dtype, steps, devices in ((jnp.float32, s_fast, 1), (jnp.float64, s_fast // 2, 1),
                                  (jnp.float32, s_fast, cores), (jnp.float64, s_fast // 2, cores)):
        coef, release, k1, k2, omega = problem(n_fast, dtype)
        name = f"(c) fast_tracks, {jnp.dtype(dtype).name[:1]}{jnp.dtype(dtype).itemsize * 8}, {devices} device(s)"
        args = (coef, release, k1, k2, omega, 1e-5, steps // 10, 10)
        fn = functools.partial(lambda a, d, n: kernels.fast_tracks(*a, dtype=d, n_devices=n).block_until_ready(),
                               args, dtype, devices)
        rows.append((name, n_fast, steps, *timed(fn, repeats), load()))
    return rows


def float32_error(quick):
    """Returns |float32 - float64| of fast_tracks (max, median over tracks of each track's max) with
    Kahan-compensated and with plain position sums, and the tracks and steps: 512 x 10^4."""
    n, n_obs = (64, 100) if quick else (512, 1000)
    coef, release, k1, k2, omega = problem(n, jnp.float64)
    f64 = np.asarray(kernels.fast_tracks(coef, release, k1, k2, omega, 1e-5, n_obs, 10, dtype=jnp.float64))
    errors = []
    for compensated in (True, False):
        f32 = kernels.fast_tracks(coef, release, k1, k2, omega, 1e-5, n_obs, 10, compensated=compensated)
        error = np.abs(np.asarray(f32, np.float64) - f64).max(axis=(1, 2, 3))
        errors += [float(error.max()), float(np.median(error))]
    return (*errors, n, n_obs * 10)


def end_to_end(n_samples, out_dir):
    """Returns (wall s, CPU s, the CLI's summary line, load before, load after) of one `lagda simulate` process."""
    out = Path(out_dir) / "train.nc"
    command = [sys.executable, "-m", "lagda", "simulate", "--preset", "paper", "--seed", "1", "--out", str(out)]
    if n_samples != PAPER.n_samples:
        command += ["--n-samples", str(n_samples)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("XLA_FLAGS", None)  # the CLI chooses its devices itself
    before, cpu0 = load(), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=out_dir, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"lagda simulate failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    return wall, cpu, done.stdout.strip(), before, load()


def paper_file_seconds(n_samples, kernel_rate):
    """Returns the wall seconds of one paper file end to end, printing the CLI run.

    With n_samples below the paper's, the rest of the paper's fields are added at `kernel_rate`
    (particle-steps/s of the kernel measured in this run), which the output says.
    """
    with tempfile.TemporaryDirectory() as out_dir:
        wall, cpu, summary, before, after = end_to_end(n_samples, out_dir)
    flag = f" --n-samples {n_samples}" if n_samples != PAPER.n_samples else ""
    print(f"\nend to end: lagda simulate --preset paper --seed 1{flag} ({n_samples:,} fields x {PAPER.n_steps:,} "
          f"steps, file written): {wall:.1f} s wall, {cpu:.1f} s CPU ({before} before, {after} after)\n  {summary}")
    if n_samples == PAPER.n_samples:
        return wall
    wall += (PAPER.n_samples - n_samples) * PAPER.n_steps / kernel_rate
    print(f"  a subset: the paper's {PAPER.n_samples:,} fields would take about {wall:.0f} s (this run plus the "
          f"other fields at the kernel rate of row (c), f32, all devices; not measured)")
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--e2e-samples", type=int, default=None,
                        help=f"fields in the end-to-end run (default {PAPER.n_samples:,}, the paper; "
                             "2,048 with --quick)")
    parser.add_argument("--fast-batch", type=int, default=4096, help="trajectories of the fast-kernel rows")
    args = parser.parse_args()
    e2e_samples = args.e2e_samples or (2048 if args.quick else PAPER.n_samples)
    print(f"jax {jax.__version__}, {jax.local_device_count()} CPU device(s), {os.cpu_count()} cores, {load()}")
    rows = measure_rows(args.quick, args.repeats, args.fast_batch)
    peak, peak_cpu = matmul_peak(1024 if args.quick else 4096)
    print(f"float32 matmul rate measured now (all cores): {peak:.0f} GFLOP/s, {peak_cpu:.0f} per CPU-second, {load()}")
    flops = {jnp.float32: kernel_flops(jnp.float32), jnp.float64: kernel_flops(jnp.float64)}
    print(f"fast kernel: {flops[jnp.float32]} flops per particle-step (float32), {flops[jnp.float64]} (float64), "
          "counted in the optimised HLO\n")
    base = rows[0][1] * rows[0][2] / rows[0][3]
    print("| implementation | batch | steps | particle-steps/s (wall) | per CPU-second | x numpy | "
          "one paper file (3.2e8 steps) | GFLOP/s (% of the f32 matmul rate) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, steps, wall, cpu, where in rows:
        rate = batch * steps / wall
        gflops = ""
        if name.startswith("(c)"):
            per = flops[jnp.float64 if "f64" in name else jnp.float32] * rate / 1e9
            gflops = f"{per:.1f} ({100 * per / peak:.0f}%)"
        print(f"| {name} | {batch} | {steps} | {rate:.3g} | {batch * steps / cpu:.3g} | {rate / base:.1f} | "
              f"{PAPER_STEPS / rate / 60:.2g} min | {gflops} | {where[5:]} |")
    kernel = next(row for row in rows if row[0].startswith("(c)") and "f32" in row[0] and "1 device" not in row[0])
    per_cpu = flops[jnp.float32] * kernel[1] * kernel[2] / kernel[4] / 1e9
    print(f"\nper CPU-second (less sensitive to other jobs): the f32 kernel on all devices {per_cpu:.1f} GFLOP, "
          f"the matmul {peak_cpu:.0f}: {100 * per_cpu / peak_cpu:.0f}%")
    worst, median, plain_worst, plain_median, n, steps = float32_error(args.quick)
    print(f"\nfloat32 against float64, {n} tracks x {steps} steps: Kahan-compensated sums max {worst:.2g} "
          f"(median {median:.2g}), plain sums max {plain_worst:.2g} (median {plain_median:.2g})")

    wall = paper_file_seconds(e2e_samples, kernel[1] * kernel[2] / kernel[3])
    rate = PAPER_STEPS / wall
    print(f"  one paper file: {wall:.1f} s, {rate:.3g} particle-steps/s end to end = {rate / base:.0f}x the numpy RK4 "
          f"of row (a) (which would take {PAPER_STEPS / base / 60:.0f} min); {flops[jnp.float32] * rate / 1e9:.1f} "
          f"GFLOP/s = {100 * flops[jnp.float32] * rate / 1e9 / peak:.0f}% of the float32 matmul rate")


if __name__ == "__main__":
    main()
