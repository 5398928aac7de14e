"""Strict JAX numerics for every test: float64 available, no silent rank promotion; no persistent compilation
cache (the `lagda` command's, which tests/test_cli.py checks in a subprocess), so compilations stay countable.
Also the session's shared one-device training reference (one_device_losses)."""
import functools
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

os.environ["LAGDA_COMPILE_CACHE"] = "off"

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
# Start the backends now, with one CPU device: `lagda simulate` run in-process (cli.main) asks for
# one device per core when JAX has not started yet, which would change the whole session's devices.
jax.devices()


ONE_DEVICE_SCRIPT = """
import json, sys
import jax, numpy as np
from lagda.testing import make_pairs
from lagda.learning.config import tiny
from lagda.learning.train import train
assert jax.local_device_count() == 1 and jax.process_count() == 1
data = make_pairs(16, seed=3)
run = train(tiny(eval_library=0, epochs=3, batch_size=8, negatives=4), data, data, sys.argv[1], progress=False)
np.save(sys.argv[2], [json.loads(line)["train_loss"] for line in open(run / "metrics.jsonl")])
"""


@pytest.fixture(scope="session")
def one_device_losses(tmp_path_factory):
    """Returns a function that returns the train losses `(3,)` of tiny(eval_library=0, epochs=3, batch_size=8,
    negatives=4) (the coefficient negatives: replicated, the same on every device and process) on
    make_pairs(16, seed=3) in a child process with one CPU device and JAX's default float32: the reference of
    tests/test_train_distributed.py (2 devices in one process, and 2 processes), trained once per session (the two
    tests share one file, so one pytest-xdist worker trains it). The child starts when a test first asks for the
    fixture and runs while that test starts its own processes; the function waits for it. The losses do not depend
    on the validation data given (every step's key is a function of seed, epoch and step)."""
    folder = tmp_path_factory.mktemp("one_device")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    # cwd: the checkout comes first on the child's sys.path, as with `python -m`
    child = subprocess.Popen([sys.executable, "-c", ONE_DEVICE_SCRIPT, str(folder / "run"), str(folder / "losses.npy")],
                             env=env, cwd=pathlib.Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)

    @functools.cache
    def losses() -> np.ndarray:
        _, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        return np.load(folder / "losses.npy")

    yield losses
    if child.poll() is None:  # no test waited for it
        child.kill()
        child.communicate()


@pytest.fixture(scope="module")
def map_scheduler():
    """The address of a running Dask scheduler with one in-process worker thread, shared by a test file's maps
    (tests/test_map*.py) where the worker processes are not what is tested: `lagda map --scheduler ADDRESS`."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address
