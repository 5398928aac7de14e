"""Data parallelism: training on 2 (forced host) devices equals training on 1."""

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import sys, jax, numpy as np
    sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
    from flax import nnx
    from test_train import make_pairs
    from lagda.config import tiny
    from lagda.train import load_run, train
    assert jax.local_device_count() == {devices}
    data = make_pairs(16, seed=3)
    run = train(tiny(eval_library=0, epochs=1, batch_size=8), data, data, {run_dir!r}, progress=False)
    model, _, _ = load_run(run)
    leaves = jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))
    np.savez({out!r}, *[np.asarray(leaf) for leaf in leaves])
""")


def _train_on(devices: int, tmp_path) -> list[np.ndarray]:
    out = tmp_path / f"params_{devices}.npz"
    script = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), devices=devices,
                           run_dir=str(tmp_path / f"run_{devices}"), out=str(out))
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as params:
        return [params[name] for name in params.files]


def test_two_devices_train_like_one(tmp_path):
    one, two = _train_on(1, tmp_path), _train_on(2, tmp_path)
    assert len(one) == len(two) > 0
    for a, b in zip(one, two):
        # the same updates; only the order of the cross-device gradient sum differs (float32)
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
