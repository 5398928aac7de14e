"""fast_tracks (simulate/kernels.py) against the reference simulate_tracks, in float64 and float32."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.testing import count_compiles
from simulate import (
    draw_coefficients,
    draw_frequencies,
    kernels,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)
from simulate.kernels import fast_tracks

DT, N_OBS, STRIDE = 1e-3, 20, 5  # 100 RK4 steps, T = 0.1 (the paper's window at 100x dt)


def _problem(k1, k2, n_samples=8, n_drifters=2, seed=0):
    keys = jax.random.split(jax.random.key(seed), 3)
    coef = draw_coefficients(keys[0], spectrum(k1, k2, 1.5, 10.0), n_samples, jnp.complex128)
    omega = draw_frequencies(keys[1], len(k1), 20 * np.pi)
    release = jax.random.uniform(keys[2], (n_samples, n_drifters, 2), jnp.float64)
    return coef, release, omega


@pytest.fixture(scope="module")
def square():
    """K = 9 modes {-1..1}^2, 8 fields, 2 drifters each, and the float64 reference tracks."""
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    coef, release, omega = _problem(k1, k2)
    reference = simulate_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE)
    return k1, k2, coef, release, omega, reference


def test_float64_matches_reference(square):
    k1, k2, coef, release, omega, reference = square
    tracks = fast_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE, dtype=jnp.float64)
    assert tracks.shape == reference.shape == (8, 2, N_OBS, 2) and tracks.dtype == jnp.float64
    assert float(jnp.abs(reference[:, :, -1] - release).max()) > 0.05  # drifters really move
    np.testing.assert_allclose(tracks, reference, rtol=0, atol=1e-10)


def test_float32_within_rounding_tolerance(square):
    # Measured (benchmarks, paper setting, 1e4 steps): compensated f32 stays within 1.3e-6 of
    # f64 over 512 tracks; here 100 steps give ~1e-6. 2e-5 is far below any modelling bug
    # (a wrong sign or mode moves tracks by > 1e-2) yet safe against rounding.
    k1, k2, coef, release, omega, reference = square
    tracks = fast_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE)
    assert tracks.dtype == jnp.float32
    np.testing.assert_allclose(tracks, reference, rtol=0, atol=2e-5)


def test_uncompensated_float64_is_the_same_scheme(square):
    k1, k2, coef, release, omega, reference = square
    tracks = fast_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE, dtype=jnp.float64, compensated=False)
    np.testing.assert_allclose(tracks, reference, rtol=0, atol=1e-10)


def test_non_default_rectangle_with_unpaired_modes():
    # k1 in -2..1, k2 in 0..2: most modes have no partner -k in the set.
    k1, k2 = rectangular_modes((-2, 1), (0, 2))
    coef, release, omega = _problem(k1, k2, n_samples=4, n_drifters=3, seed=1)
    reference = simulate_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE)
    tracks = fast_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE, dtype=jnp.float64)
    np.testing.assert_allclose(tracks, reference, rtol=0, atol=1e-10)


def test_brownian_increments_are_the_reference_stream(square):
    k1, k2, coef, release, omega, _ = square
    key, kappa = jax.random.key(3), 1e-3
    reference = simulate_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE, diffusivity=kappa, key=key)
    tracks = fast_tracks(coef, release, k1, k2, omega, DT, N_OBS, STRIDE, diffusivity=kappa, key=key,
                         dtype=jnp.float64)
    np.testing.assert_allclose(tracks, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_pure_noise_is_sum_of_keyed_normals(square, dtype):
    # Zero flow: z_n = z_0 + sqrt(2 kappa dt) sum_m N(fold_in(keys[s * drifter + d], m)), in either dtype.
    k1, k2, coef, release, omega, _ = square
    key, kappa, n_obs, stride = jax.random.key(4), 0.5, 3, 2
    tracks = fast_tracks(jnp.zeros_like(coef), release, k1, k2, omega, DT, n_obs, stride, diffusivity=kappa,
                         key=key, dtype=dtype)
    keys = jax.random.split(key, release.shape[0] * release.shape[1])
    steps = jnp.arange(n_obs * stride)
    draws = jax.vmap(lambda k: jax.vmap(lambda n: jax.random.normal(jax.random.fold_in(k, n), (2,), dtype))(steps))(
        keys)
    sigma = np.sqrt(2 * kappa * DT)
    expected = (release.reshape(-1, 1, 2)
                + sigma * np.cumsum(np.asarray(draws, np.float64), axis=1)[:, stride - 1::stride])
    atol = 1e-12 if dtype == jnp.float64 else 1e-6
    np.testing.assert_allclose(tracks.reshape(-1, n_obs, 2), expected, rtol=0, atol=atol)


def test_traces_once_for_repeated_shapes(square):
    k1, k2, coef, release, omega, _ = square
    args = (k1, k2, omega, DT, 4, 3)
    fast_tracks(coef, release, *args)
    with count_compiles("integrate_chunk") as compiled:
        fast_tracks(2.0 * coef, release + 0.1, *args)
        fast_tracks(coef, release, k1, k2, omega + 1.0, 2 * DT, 4, 3)
    assert compiled["count"] == 0


@pytest.mark.parametrize("dtype, atol", [(jnp.float32, 2e-7), (jnp.float64, 1e-14)], ids=["float32", "float64"])
def test_sincos_turns_matches_numpy(dtype, atol):
    # quadrant edges (x = q / 8 + 1/16 and q / 8 exactly), negative and unwrapped positions
    x = np.concatenate([np.linspace(-3.0, 3.0, 100_001), np.arange(-24, 25) / 8, np.arange(-24, 24) / 8 + 1 / 16])
    x = np.asarray(jnp.asarray(x, dtype), np.float64)  # the values the kernel sees
    cos, sin = kernels.sincos_turns(jnp.asarray(x, dtype))
    assert cos.dtype == dtype
    np.testing.assert_allclose(cos, np.cos(2 * np.pi * x), rtol=0, atol=atol)
    np.testing.assert_allclose(sin, np.sin(2 * np.pi * x), rtol=0, atol=atol)


def test_folded_modes_of_paper_set():
    k1, k2 = rectangular_modes()
    modes = kernels.folded_modes(k1, k2)
    assert len(modes) == 24 and all(partner >= 0 for *_, partner in modes)
    assert kernels.rectangle_of(k1, k2) == ((-3, 3), (-3, 3))


@pytest.mark.parametrize("bad, message", [
    (dict(k1=np.array([0, 1, 0]), k2=np.array([0, 0, 1])), "rectangular"),
    (dict(diffusivity=1e-3), "PRNG key"),
    (dict(release=np.zeros((3, 1, 2))), "expected coef"),
    (dict(dtype=jnp.int32), "float32 or float64"),
    (dict(n_devices=99), "n_devices"),
])
def test_bad_input_raises_one_line(square, bad, message):
    k1, k2, coef, release, omega, _ = square
    kwargs = dict(coef=coef, release=release, k1=k1, k2=k2, omega=omega, dt=DT, n_obs=2, stride=1)
    kwargs.update(bad)
    if "k1" in bad:
        kwargs["coef"], kwargs["omega"] = coef[:, :3], omega[:3]
    with pytest.raises(ValueError, match=message):
        fast_tracks(**kwargs)


def test_two_host_devices_with_padding_match_one():
    # 3 samples on 2 devices pads to 4; results must not depend on the split.
    script = (
        "import jax, jax.numpy as jnp, numpy as np\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "from simulate import rectangular_modes\n"
        "from simulate.kernels import fast_tracks\n"
        "k1, k2 = rectangular_modes((-1, 1), (-1, 1))\n"
        "c = jax.random.normal(jax.random.key(0), (3, 9), jnp.complex128)\n"
        "r = jax.random.uniform(jax.random.key(1), (3, 2, 2), jnp.float64)\n"
        "w = np.linspace(-5.0, 5.0, 9)\n"
        "a = fast_tracks(c, r, k1, k2, w, 1e-3, 5, 4, 1e-3, jax.random.key(2), jnp.float64, n_devices=2)\n"
        "b = fast_tracks(c, r, k1, k2, w, 1e-3, 5, 4, 1e-3, jax.random.key(2), jnp.float64, n_devices=1)\n"
        "assert jax.device_count() == 2 and a.shape == (3, 2, 5, 2)\n"
        "print(float(jnp.abs(a - b).max()))\n"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip().splitlines()[-1]) < 1e-13


def test_use_host_cores_gives_one_cpu_device_per_core():
    script = (
        "import os\n"
        "from simulate.kernels import use_host_cores\n"
        "use_host_cores()\n"
        "import jax\n"
        "assert jax.local_device_count() == len(os.sched_getaffinity(0)), jax.devices()\n"
        "use_host_cores()  # after the backends started: changes nothing, raises nothing\n"
        "print(jax.local_device_count())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script], env=dict(env, JAX_PLATFORMS="cpu"), cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
