"""Benchmark of QG truth generation: one turbulent flow, 256 drifters, a 60-day window (the `qg` preset).

Rows: (a) the pyqg-jax model alone, stepped through the same spin-up and window with no
drifters (jitted, its own stepper: what the flow costs), (b) `simulate.qg.write_qg_dataset`,
the whole `lagda simulate --flow qg --n-drifters 256` (spin-up, drifters, gridded truth,
projection, the netCDF file). Each is timed after a first call that compiles; (b) is also
given as a ratio to (a) measured in the same run, and against the aim of 5 minutes.

    python -m benchmarks.bench_qg_generate [--drifters 256] [--spin-up-days 1825]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import jax

from simulate import qg


def model_only(config: qg.QGConfig):
    """Returns a jitted run(key) stepping the pyqg-jax model through spin-up and window, no drifters."""
    stepped = qg.build_model(config)
    n_steps = int(round((config.spin_up_days + config.window_days) * qg.DAY / config.dt))

    @jax.jit
    def run(key):
        state = stepped.initialize_stepper_state(stepped.model.create_initial_state(key))
        return jax.lax.fori_loop(0, n_steps, lambda i, s: stepped.step_model(s), state).state.qh

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--drifters", type=int, default=256)
    parser.add_argument("--spin-up-days", type=float, default=1825.0)
    args = parser.parse_args(argv)
    config = qg.turbulence(n_drifters=args.drifters, spin_up_days=args.spin_up_days)
    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        run = model_only(config)
        run(jax.random.key(0)).block_until_ready()  # compile
        start = time.perf_counter()
        run(jax.random.key(1)).block_until_ready()
        flow_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        qg.write_qg_dataset(config, pathlib.Path(tmp) / "warm.nc")  # compile
        start = time.perf_counter()
        qg.write_qg_dataset(config, pathlib.Path(tmp) / "qg.nc")
        file_s = time.perf_counter() - start
    days = config.spin_up_days + config.window_days
    print(f"(a) pyqg-jax model alone, {days:g} days at dt = {config.dt:g} s: {flow_s:.1f} s")
    print(f"(b) lagda simulate --flow qg, {args.drifters} drifters, {config.window_days:g}-day window: {file_s:.1f} s "
          f"= {file_s / flow_s:.2f} x (a); aim 300 s: {'met' if file_s < 300 else 'missed'} ({file_s / 300:.2f} of it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
