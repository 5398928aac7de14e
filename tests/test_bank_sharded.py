"""The retrieval bank split over devices and processes gives one device's answer.

One subprocess with 2 forced host devices (scan_bank_sharded against scan_bank on the same
inputs), and 2 processes under jax.distributed on localhost (gloo collectives on CPU, one
device each: the mesh spans both processes) against the one-device answer of the first.
"""

import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

COMMON = """
    import jax, jax.numpy as jnp, numpy as np
    from lagda.assimilation.methods.config import EmbedConfig
    from lagda.assimilation.methods.bank import bank_search
    from lagda.assimilation.methods.learned import Scorer
    from simulate import spectrum, rectangular_modes
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    scale = np.asarray(spectrum(k1, k2, 1.5, 10.0), np.float32)
    queries = np.random.default_rng(0).normal(size=(3, 18)).astype(np.float32)
    given = (np.random.default_rng(1).normal(size=(1003, 9)) + 1j * np.random.default_rng(2).normal(size=(1003, 9)))
    config = EmbedConfig(bank_size=1000, bank_batch=96, top_k=5, bank_cache_mb=0)  # drawn inside the scan
    out = {{}}
    for name, bank in (("prior", None), ("given", given)):
        res = bank_search(queries, scale, config, Scorer(None, "cosine", 0.1), jax.random.key(7), bank)
        out.update({{f"{{name}}_{{i}}": a for i, a in enumerate(res)}})
"""

TWO_DEVICES = COMMON + """
    from lagda.assimilation.methods import bank as B
    assert jax.device_count() == 2 and B.bank_mesh().size == 2
    one = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("bank",))
    B.bank_mesh = lambda: one  # the same call on one device
    for name, bank in (("prior", None), ("given", given)):
        res = bank_search(queries, scale, config, Scorer(None, "cosine", 0.1), jax.random.key(7), bank)
        out.update({{f"one_{{name}}_{{i}}": a for i, a in enumerate(res)}})
    np.savez({out!r}, **out)
"""

PROCESS = """
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address={address!r}, num_processes={n}, process_id={pid})
""" + COMMON + """
    assert jax.process_count() == {n} and jax.device_count() == {n}
    np.savez({out!r}, **out)
"""


def _run(script: str, env_extra: dict) -> subprocess.Popen:
    env = dict(os.environ, JAX_PLATFORMS="cpu", **env_extra)
    # cwd: the checkout comes first on the child's sys.path, as with `python -m`
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]


def _assert_same(a: dict, b: dict, prefix_b: str = "") -> None:
    for name in ("prior", "given"):
        np.testing.assert_array_equal(a[f"{name}_0"], b[f"{prefix_b}{name}_0"])  # the same top-k coefficients
        np.testing.assert_allclose(a[f"{name}_1"], b[f"{prefix_b}{name}_1"], rtol=1e-6)  # their scores
        for i in (2, 3):  # softmax mean and variance: other summation order only
            np.testing.assert_allclose(a[f"{name}_{i}"], b[f"{prefix_b}{name}_{i}"], rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> dict:
    """The TWO_DEVICES child's answers: 2 devices (`NAME_I`), and one device on the same inputs (`one_NAME_I`)."""
    out = tmp_path_factory.mktemp("two_devices") / "two.npz"
    _wait(_run(TWO_DEVICES.format(out=str(out)),
               {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}))
    return dict(np.load(out))


def test_bank_over_two_devices_equals_one_device(two_devices):
    _assert_same(two_devices, two_devices, prefix_b="one_")
    assert two_devices["prior_0"].shape == (3, 5, 9)


def test_bank_over_two_processes_equals_one_process(tmp_path, two_devices):
    """Against the one-device answer of the TWO_DEVICES child: one process's answer (the bank over a mesh of one
    device), without a third process to start."""
    with socket.socket() as s:  # a free loopback port for the coordinator
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    procs = [_run(PROCESS.format(address=address, n=2, pid=i, out=str(tmp_path / f"p{i}.npz")), {})
             for i in range(2)]
    for proc in procs:
        _wait(proc)
    reference = {name.removeprefix("one_"): a for name, a in two_devices.items() if name.startswith("one_")}
    for i in range(2):  # every process holds the whole answer
        _assert_same(reference, dict(np.load(tmp_path / f"p{i}.npz")))
