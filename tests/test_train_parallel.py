"""Data parallelism: training on 2 (forced host) devices follows the same losses as on 1.

Parameters are not compared element by element: Adam divides by sqrt(v), so gradient
entries that are ~0 (sign decided by summation order) move by up to lr either way; the
losses, which depend on all parameters together, must agree.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, jax, numpy as np
    from lagda.testing import make_pairs
    from lagda.learning.config import tiny
    from lagda.learning.train import train
    assert jax.local_device_count() == {devices}
    data = make_pairs(16, seed=3)
    run = train(tiny(eval_library=0, epochs=3, batch_size=8, negatives=4), data, data, {run_dir!r}, progress=False)
    losses = [json.loads(line)["train_loss"] for line in open(run / "metrics.jsonl")]
    np.save({out!r}, np.asarray(losses))
""")


def _train_on(devices: int, tmp_path) -> np.ndarray:
    out = tmp_path / f"losses_{devices}.npy"
    script = SCRIPT.format(devices=devices,
                           run_dir=str(tmp_path / f"run_{devices}"), out=str(out))
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    # cwd: the checkout comes first on the child's sys.path, as with `python -m`
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out)


def test_two_devices_train_like_one(tmp_path, one_device_losses):
    """The 2-device run against the session's one-device run of the same script (conftest.one_device_losses)."""
    two = _train_on(2, tmp_path)
    one = one_device_losses()
    assert one.shape == two.shape == (3,)
    assert one[-1] < one[0]  # it trained
    np.testing.assert_allclose(two, one, rtol=1e-5)  # measured: agree to ~1e-7
