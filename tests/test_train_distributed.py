"""Training on several devices follows the single-process loss path: 2 (forced host) devices in one process, and
2 CPU processes under jax.distributed (gloo collectives, the coordinator on a free loopback port) that log once and
resume after a restart of both processes. Both compare with a one-device run of the same script
(one_device_losses), trained once for the two tests of this file.

Parameters are not compared element by element: Adam divides by sqrt(v), so gradient entries that are ~0 (sign
decided by summation order) move by up to lr either way; the losses, which depend on all parameters together, must
agree.

The processes run 2 epochs, stop, and are started again with --resume for a third; the losses of all 3 epochs must
equal one uninterrupted single-process run's on the same global batches (to the tolerance of the 1-vs-2-device
test). Also: training streamed from the dataset file equals training in memory.
"""

import dataclasses
import functools
import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import jax
    from lagda.testing import make_pairs
    from lagda.learning.config import tiny
    from lagda.learning.train import initialize_distributed, train
    initialize_distributed()  # before make_pairs' first JAX call
    data = make_pairs(16, seed=3)
    config = tiny(eval_library=0, epochs={epochs}, batch_size=8, negatives=4)
    train(config, data, None, {run_dir!r}, resume={resume}, progress=False)
    assert jax.process_count() == {n}, jax.process_count()
""")


DEVICES_SCRIPT = textwrap.dedent("""
    import json, jax, numpy as np
    from lagda.testing import make_pairs
    from lagda.learning.config import tiny
    from lagda.learning.train import train
    assert jax.local_device_count() == {devices} and jax.process_count() == 1
    data = make_pairs(16, seed=3)
    run = train(tiny(eval_library=0, epochs=3, batch_size=8, negatives=4), data, data, {run_dir!r}, progress=False)
    losses = [json.loads(line)["train_loss"] for line in open(run / "metrics.jsonl")]
    np.save({out!r}, np.asarray(losses))
""")

def _free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _start(n: int, run_dir: pathlib.Path, epochs: int, resume: bool) -> list:
    """Starts the training script in n processes (n > 1: under jax.distributed); returns them."""
    address, procs = _free_address(), []
    for pid in range(n):
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env.pop("XLA_FLAGS", None)  # one device per process
        # the restart reuses the first start's compiled programs
        env.update(JAX_COMPILATION_CACHE_DIR=str(run_dir.parent / "jax-cache"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
        if n > 1:
            env.update(JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES=str(n), JAX_PROCESS_ID=str(pid))
        script = SCRIPT.format(epochs=epochs, run_dir=str(run_dir), resume=resume, n=n)
        # cwd: the checkout comes first on the child's sys.path, as with `python -m`
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def _wait(procs: list) -> None:
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]


def _losses(run_dir: pathlib.Path) -> np.ndarray:
    return np.asarray([json.loads(line)["train_loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()])


def _start_on(devices: int, folder: pathlib.Path) -> tuple[subprocess.Popen, pathlib.Path]:
    """Starts DEVICES_SCRIPT in one process with `devices` forced host devices; returns it and where its losses
    `(3,)` will be."""
    out = folder / f"losses_{devices}.npy"
    script = DEVICES_SCRIPT.format(devices=devices, run_dir=str(folder / f"run_{devices}"), out=str(out))
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    # cwd: the checkout comes first on the child's sys.path, as with `python -m`
    child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    return child, out


def _losses_of(child: subprocess.Popen, out: pathlib.Path) -> np.ndarray:
    _, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-3000:]
    return np.load(out)


@pytest.fixture(scope="module")
def one_device_losses(tmp_path_factory):
    """Returns a function that returns the train losses `(3,)` of tiny(eval_library=0, epochs=3, batch_size=8,
    negatives=4) (the coefficient negatives: replicated, the same on every device and process) on
    make_pairs(16, seed=3) in a child process with one CPU device and JAX's default float32: the reference of both
    tests below, trained once. The child starts when a test first asks for the fixture and runs while that test
    starts its own processes; the function waits for it. The losses do not depend on the validation data given
    (every step's key is a function of seed, epoch and step)."""
    child, out = _start_on(1, tmp_path_factory.mktemp("one_device"))
    yield functools.cache(lambda: _losses_of(child, out))
    if child.poll() is None:  # no test waited for it
        child.kill()
        child.communicate()


def test_two_devices_train_like_one(tmp_path, one_device_losses):
    """The 2-device run against the one-device run of the same script (one_device_losses)."""
    two = _losses_of(*_start_on(2, tmp_path))
    one = one_device_losses()
    assert one.shape == two.shape == (3,)
    assert one[-1] < one[0]  # it trained
    np.testing.assert_allclose(two, one, rtol=1e-5)  # measured: agree to ~1e-7

def test_two_processes_train_like_one_and_resume_after_a_restart(tmp_path, one_device_losses):
    _wait(_start(2, tmp_path / "multi", epochs=2, resume=False))
    assert _losses(tmp_path / "multi").shape == (2,)  # one line per epoch: process 0 alone logs
    _wait(_start(2, tmp_path / "multi", epochs=3, resume=True))  # all processes restarted
    single, multi = one_device_losses(), _losses(tmp_path / "multi")  # the single-process run
    assert single.shape == multi.shape == (3,) and single[-1] < single[0]
    np.testing.assert_allclose(multi, single, rtol=1e-5)
    assert sorted(p.name for p in (tmp_path / "multi" / "checkpoints").iterdir() if p.name.isdigit()) == ["2", "3"]


def test_streamed_training_equals_in_memory_training(tmp_path):
    """config.stream reads the tracks from the dataset file batch by batch: the same losses, bit for bit."""
    from lagda.learning.config import learned
    from lagda.learning.data import DiskPositions, load_paired
    from lagda.learning.train import train
    from simulate import generate
    from simulate.config import small

    data_file = generate.generate_dataset(small(n_samples=48, k1_min=-1, k1_max=1, k2_min=-1, k2_max=1, t_final=0.02,
                                                seed=4), tmp_path / "data.nc")
    streamed = load_paired(data_file, stream=True)
    in_memory = load_paired(data_file)
    assert isinstance(streamed.positions, DiskPositions) and streamed.positions.shape == in_memory.positions.shape
    index = np.array([7, 3, 3, 40])
    np.testing.assert_array_equal(streamed.positions[index], in_memory.positions[index])
    np.testing.assert_array_equal(streamed.positions[2:5, 0], in_memory.positions[2:5, 0])
    config = learned(epochs=2, batch_size=16, eval_library=16, negatives=16)
    for name, stream in (("memory", False), ("stream", True)):
        train(dataclasses.replace(config, stream=stream), data_file, None, tmp_path / name, progress=False)
    memory, stream = (_metrics(tmp_path / name) for name in ("memory", "stream"))
    assert [r["train_loss"] for r in stream] == [r["train_loss"] for r in memory]
    assert [r["train/coef_to_traj/R@5"] for r in stream] == [r["train/coef_to_traj/R@5"] for r in memory]


def _metrics(run_dir: pathlib.Path) -> list:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
