"""A fast batched drifter integrator for dataset generation.

`fast_tracks` has the inputs and outputs of the reference `simulate.tracks.simulate_tracks`
for a rectangular mode set and computes the same RK4 tracks, restructured for speed on CPU:

* Batch-minor: every per-trajectory quantity is a `(batch,)` vector (batch = sample x
  drifter, fastest axis), and one whole RK4 step is written as explicit elementwise
  arithmetic on such vectors. XLA fuses it into one loop over the batch, vectorised by
  LLVM; nothing per-trajectory is broadcast against a mode axis, so no transcendental is
  recomputed per mode and no `lax.cond` trick is needed.
* Conjugate folding: psi = Re sum_k c_k e^{i omega_k t} e^{2 pi i k.z}, so the pair
  (k, -k) acts through the single coefficient D_k(t) = c_k e^{i omega_k t}
  + conj(c_{-k} e^{i omega_{-k} t}); the contraction runs over half the modes (24 of 49
  for the paper's set; k = 0 carries no velocity and is dropped).
* Separable exponentials: e^{2 pi i k1 x} are powers of one sincos of x (reduced mod 1,
  so float32 phases stay small); e^{i omega_k t} are scalars shared by the whole batch.
* Velocity as two small contractions per stage: for each k1,
  A_{k1} = sum_{k2} D Ey_{k2}, B_{k1} = sum_{k2} k2 D Ey_{k2}; then
  u = 2 pi Im sum_{k1} B_{k1} Ex_{k1}, v = -2 pi Im sum_{k1} k1 A_{k1} Ex_{k1}.
* Packed state z = x + i y (complex): with two real outputs XLA CPU emits two fusions that
  each recompute the whole step; one complex output computes it once.
* Compensated (Kahan) summation of the position update, so float32 tracks do not
  accumulate the rounding of O(1) positions plus O(1e-4) increments over 10^4 steps
  (`benchmarks/bench_simulate.py` prints the error against float64 with and without it).
* sin/cos by polynomials (`sincos_turns`): XLA CPU's jnp.sin / jnp.cos cost many
  multiply-adds each; 512-bit vectors (COMPILER_OPTIONS).
* Several cores: XLA splits one device's loop over threads with a barrier per step;
  `n_devices` splits the samples over host devices instead, one thread each
  (`use_host_cores` makes one device per core).

Brownian forcing (diffusivity > 0) uses exactly the reference's keys, so it costs two
threefry hashes per particle-step on top of the deterministic kernel.
"""

from __future__ import annotations

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

TWO_PI = 2.0 * np.pi


def rectangle_of(k1, k2):
    """Returns `((k1_min, k1_max), (k2_min, k2_max))` of a k1-major rectangular mode set.

    Raises
    ------
    ValueError
        if (k1, k2) is not `rectangular_modes` output for some ranges.
    """
    k1 = np.asarray(k1)
    k2 = np.asarray(k2)
    if k1.ndim != 1 or k1.shape != k2.shape or k1.size == 0:
        raise ValueError(f"expected k1, k2 of equal shape (mode,), got {k1.shape} and {k2.shape}")
    a1, b1, a2, b2 = int(k1.min()), int(k1.max()), int(k2.min()), int(k2.max())
    g1, g2 = np.meshgrid(np.arange(a1, b1 + 1), np.arange(a2, b2 + 1), indexing="ij")
    if g1.size != k1.size or np.any(g1.ravel() != k1) or np.any(g2.ravel() != k2):
        raise ValueError("fast_tracks needs a k1-major rectangular mode set (simulate.flow.rectangular_modes)")
    return (a1, b1), (a2, b2)


def folded_modes(k1, k2):
    """Returns the folded mode list: tuples `(k1, k2, m, m_partner)` with m_partner = -1 if none.

    Each wavevector k != 0 appears once: a pair {k, -k} both in the set is represented by
    the member with k1 > 0 or (k1 = 0, k2 > 0); k = 0 is dropped (it carries no velocity).
    """
    index = {(int(a), int(b)): m for m, (a, b) in enumerate(zip(k1, k2))}
    folded = []
    for (a, b), m in index.items():
        if a == 0 and b == 0:
            continue
        partner = index.get((-a, -b), -1)
        positive = a > 0 or (a == 0 and b > 0)
        if partner >= 0 and not positive:
            continue
        folded.append((a, b, m, partner))
    return tuple(folded)


def _cmul(p, q):
    """Returns the complex product of (re, im) pairs p and q."""
    return p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]


# Taylor coefficients of sin a / a and cos a in powers of a^2, truncated where the next term,
# at |a| <= pi/4, is below the dtype's rounding: float32 to a^9 / a^10 (next term < 2e-9),
# float64 to a^17 / a^18 (next term < 1e-19).
_SIN_TAYLOR = {4: [(-1) ** n / math.factorial(2 * n + 1) for n in range(5)],
               8: [(-1) ** n / math.factorial(2 * n + 1) for n in range(9)]}
_COS_TAYLOR = {4: [(-1) ** n / math.factorial(2 * n) for n in range(6)],
               8: [(-1) ** n / math.factorial(2 * n) for n in range(10)]}


def _horner(coefficients, a2):
    """Returns sum_n coefficients[n] a2^n by Horner's rule."""
    out = coefficients[-1]
    for c in coefficients[-2::-1]:
        out = out * a2 + c
    return out


def sincos_turns(x):
    """Returns (cos 2 pi x, sin 2 pi x), each like x, by quadrant reduction and Taylor polynomials.

    4x = q + r with q = round(4x), |r| <= 1/2 (both exact), so 2 pi x = q pi / 2 + a with
    a = (pi / 2) r, |a| <= pi / 4: cos a and sin a are the polynomials above, and q mod 4 swaps
    and negates them. Why not jnp.cos / jnp.sin: on XLA CPU these plain multiply-adds evaluate
    several times as many pairs per second, and the kernel needs 8 pairs per particle-step.
    Reducing x in turns also keeps float32 phases small.
    """
    size = jnp.dtype(x.dtype).itemsize
    quarter = jnp.round(4 * x)
    a = (0.5 * np.pi) * (4 * x - quarter)
    a2 = a * a
    sin_a = a * _horner(_SIN_TAYLOR[size], a2)
    cos_a = _horner(_COS_TAYLOR[size], a2)
    n = quarter.astype(jnp.int32) & 3
    odd = (n & 1) == 1
    c = jnp.where(odd, sin_a, cos_a)
    s = jnp.where(odd, cos_a, sin_a)
    return jnp.where((n == 1) | (n == 2), -c, c), jnp.where(n >= 2, -s, s)


def _phase_powers(x, orders):
    """Returns {k: (cos 2 pi k x, sin 2 pi k x)} for k in `orders`, from one sincos of x."""
    base = sincos_turns(x)
    top = max(abs(k) for k in orders)
    powers = {1: base}
    for k in range(2, top + 1):
        powers[k] = _cmul(powers[k - 1], base) if k % 2 else _cmul(powers[k // 2], powers[k // 2])
    out = {}
    for k in orders:
        if k != 0:
            c, s = powers[abs(k)]
            out[k] = (c, s if k > 0 else -s)
    return out


def stage_velocity(x, y, coefs, rotation, modes):
    """Returns (u, v), each `(batch,)`, the velocity of the folded spectral flow at (x, y).

    coefs = (a_re, a_im, b_re, b_im), each `(fold, batch)`: a = c_k, b = conj(c_{-k}).
    rotation = (T_re, T_im, S_re, S_im), each `(fold,)`: T = e^{i omega_k t},
    S = conj(e^{i omega_{-k} t}), so D_k = a T + b S.
    """
    a_re, a_im, b_re, b_im = coefs
    t_re, t_im, s_re, s_im = rotation
    ex = _phase_powers(x, sorted({m[0] for m in modes} - {0}) or [1])
    ey = _phase_powers(y, sorted({m[1] for m in modes} - {0}) or [1])
    row_a, row_b = {}, {}  # A_{k1} = sum D Ey, B_{k1} = sum k2 D Ey
    for j, (k1, k2, _, partner) in enumerate(modes):
        d = _cmul((a_re[j], a_im[j]), (t_re[j], t_im[j]))
        if partner >= 0:
            e = _cmul((b_re[j], b_im[j]), (s_re[j], s_im[j]))
            d = (d[0] + e[0], d[1] + e[1])
        p = _cmul(d, ey[k2]) if k2 != 0 else d
        if k1 != 0:
            old = row_a.get(k1)
            row_a[k1] = p if old is None else (old[0] + p[0], old[1] + p[1])
        if k2 != 0:
            q = (k2 * p[0], k2 * p[1]) if k2 != 1 else p
            old = row_b.get(k1)
            row_b[k1] = q if old is None else (old[0] + q[0], old[1] + q[1])
    u = jnp.zeros_like(x)
    v = jnp.zeros_like(x)
    for k1, q in row_b.items():  # u = 2 pi sum k2 Im(D e^{i theta})
        u = u + (_cmul(q, ex[k1])[1] if k1 != 0 else q[1])
    for k1, p in row_a.items():  # v = -2 pi sum k1 Im(D e^{i theta})
        v = v - k1 * _cmul(p, ex[k1])[1]
    return TWO_PI * u, TWO_PI * v


def _rotations(omegas, times):
    """Returns e^{i omega t} factors `(time, 4, fold)`: rows T_re, T_im, S_re, S_im.

    T = e^{i omega_a t} rotates c_k and S = e^{-i omega_b t} rotates conj(c_{-k}); one
    array for many times keeps the per-step work to a single fused loop.
    """
    omega_a, omega_b = omegas
    phase_a = times[:, None] * omega_a[None, :]
    phase_b = times[:, None] * omega_b[None, :]
    return jnp.stack([jnp.cos(phase_a), jnp.sin(phase_a), jnp.cos(phase_b), -jnp.sin(phase_b)], axis=1)


def _rk4_increment(z, n, dt, coefs, rotations, modes, noise_fn):
    """Returns the complex increment dx + i dy of one RK4 step from z = x + i y at step n.

    The increment is the reference's dt (k1/6 + k2/3 + k3/3 + k4/6), plus
    sqrt(2 kappa dt) xi when noise_fn is given. It is returned as one complex array so
    that XLA computes x and y in a single fused loop (with two real outputs XLA CPU
    emits two fusions that each recompute the whole step).
    """
    x, y = jnp.real(z), jnp.imag(z)
    half = 0.5 * dt
    r0, r1, r2 = (tuple(rotations[s, part] for part in range(4)) for s in range(3))
    u1, v1 = stage_velocity(x, y, coefs, r0, modes)
    u2, v2 = stage_velocity(x + half * u1, y + half * v1, coefs, r1, modes)
    u3, v3 = stage_velocity(x + half * u2, y + half * v2, coefs, r1, modes)
    u4, v4 = stage_velocity(x + dt * u3, y + dt * v3, coefs, r2, modes)
    sixth, third = 1.0 / 6.0, 1.0 / 3.0
    dx = dt * (sixth * u1 + third * u2 + third * u3 + sixth * u4)
    dy = dt * (sixth * v1 + third * v2 + third * v3 + sixth * v4)
    if noise_fn is not None:
        nx, ny = noise_fn(n)
        dx = dx + nx
        dy = dy + ny
    return jax.lax.complex(dx, dy)


def _rk4_step(state, n, dt, coefs, rotations, modes, noise_fn, compensated):
    """Returns (z, err) after one RK4 step, with Kahan-compensated position sums if asked.

    z = x + i y, `(batch,)` complex; err holds what the previous sum lost to rounding.
    """
    z, err = state
    dz = _rk4_increment(z, n, dt, coefs, rotations, modes, noise_fn)
    dz = jax.lax.optimization_barrier(dz)  # materialise: keeps the Kahan ops from duplicating the step
    if not compensated:
        return z + dz, err
    dz = dz - err
    z_new = z + dz
    return z_new, (z_new - z) - dz


# 512-bit vectors on CPU: fewer instructions for the same work than XLA's default 256 on an AVX-512
# machine; CPUs without AVX-512 use their widest.
COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}


@functools.lru_cache(maxsize=None)
def _compiled(modes, n_drifters: int, n_obs: int, stride: int, noisy: bool, compensated: bool, unroll: int,
              n_devices: int):
    """Returns the jitted `(coef, release, omega, dt, sigma, keys) -> (batch, obs, 2)` kernel.

    With n_devices > 1 the sample axis is split over that many local devices (shard_map):
    XLA runs one device per thread, so on CPU this is how the kernel uses several cores
    (start the process with XLA_FLAGS=--xla_force_host_platform_device_count=N).
    """
    index_a = np.array([m[2] for m in modes])
    index_b = np.array([max(m[3], 0) for m in modes])
    has_b = np.array([m[3] >= 0 for m in modes])

    def integrate_chunk(coef, release, omega, dt, sigma, keys):
        dtype = release.dtype
        coef = jnp.repeat(coef, n_drifters, axis=0).T  # (mode, batch), batch = sample-major
        a = coef[index_a]
        b = jnp.where(has_b[:, None], jnp.conj(coef[index_b]), 0)
        coefs = tuple(part.astype(dtype) for part in (a.real, a.imag, b.real, b.imag))
        omegas = (omega[index_a].astype(dtype), jnp.where(has_b, omega[index_b], 0).astype(dtype))
        x0, y0 = release.reshape(-1, 2).T
        noise_fn = None
        if noisy:
            def noise_fn(n):
                draw = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, n), (2,), dtype))(keys)
                return sigma * draw[:, 0], sigma * draw[:, 1]

        stage = jnp.asarray([0.0, 0.5, 1.0], dtype)

        def one_obs(state, j):
            steps = j * stride + jnp.arange(stride)
            times = (steps[:, None].astype(dtype) + stage[None, :]) * dt  # t_n + c_i dt (RK4 nodes)
            rotations = _rotations(omegas, times.reshape(-1)).reshape(stride, 3, 4, len(modes))

            def body(i, s):
                return _rk4_step(s, j * stride + i, dt, coefs, rotations[i], modes, noise_fn, compensated)

            state = jax.lax.fori_loop(0, stride, body, state, unroll=min(unroll, stride))
            return state, state[0]

        z0 = jax.lax.complex(x0, y0)
        _, out = jax.lax.scan(one_obs, (z0, jnp.zeros_like(z0)), jnp.arange(n_obs))
        return jnp.stack([out.real.T, out.imag.T], axis=-1)  # (batch, obs, 2)

    options = COMPILER_OPTIONS if jax.default_backend() == "cpu" else None
    if n_devices == 1:
        return jax.jit(integrate_chunk, compiler_options=options)
    mesh = jax.sharding.Mesh(np.array(jax.local_devices()[:n_devices]), ("batch",))
    split, whole = jax.sharding.PartitionSpec("batch"), jax.sharding.PartitionSpec()
    return jax.jit(jax.shard_map(integrate_chunk, mesh=mesh, in_specs=(split, split, whole, whole, whole, split),
                                 out_specs=split),
                   compiler_options=options)


def use_host_cores() -> None:
    """Asks JAX for one CPU device per core this process may use, so `fast_tracks` splits over them.

    Only possible before JAX starts its backends (call it first thing, as `lagda simulate`
    does); afterwards, or when XLA_FLAGS already sets a host device count, it changes nothing.
    """
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    if jax.config.jax_num_cpu_devices > 0:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        jax.config.update("jax_num_cpu_devices", cores)
    except RuntimeError:  # the backends have started: the device count is fixed for this process
        pass


def fast_tracks(coef, release, k1, k2, omega, dt, n_obs: int, stride: int, diffusivity: float = 0.0,
                key=None, dtype=jnp.float32, compensated: bool = True, unroll: int = 1, n_devices=None,
                trajectory_keys=None):
    """Returns unwrapped drifter positions `(sample, drifter, obs, 2)`, as `simulate_tracks`.

    Observation j = 1..n_obs is the RK4 position at t_j = j * stride * dt (release at
    t = 0), computed by the fused batch-minor kernel described in the module docstring.
    With diffusivity kappa > 0 the Brownian increment of step n of trajectory (s, d) is
    sqrt(2 kappa dt) N(fold_in(keys[s * drifter + d], n)), keys = split(key, sample * drifter):
    the reference's random stream, so results depend only on (key, sample, drifter).

    Parameters
    ----------
    coef : array_like
        Complex `(sample, mode)`.
    release : array_like
        `(sample, drifter, 2)` release points, domain lengths.
    k1, k2 : array_like
        Integer `(mode,)`, a k1-major rectangular set (`rectangular_modes`); concrete arrays, they fix the
        compiled kernel.
    omega : array_like
        `(mode,)` frequencies, radians per model time unit.
    dt : float
        RK4 time step, model time units.
    n_obs, stride : int
        Number of observations and RK4 steps between two of them (static).
    diffusivity : float, default 0
        Brownian forcing kappa, domain lengths^2 per model time unit; 0 gives plain RK4.
    key : jax.Array, optional
        PRNG key of the Brownian increments (required when `diffusivity` > 0).
    dtype : {jnp.float32, jnp.float64}
        Arithmetic precision (float64 needs jax_enable_x64).
    compensated : bool, default True
        Kahan-compensated position sums; False adds increments plainly, as the reference does (kept to
        measure what compensation buys).
    unroll : int, default 1
        RK4 steps unrolled per loop iteration (a speed knob; results identical).
    n_devices : int, optional
        Local devices to split the samples over; None uses all of them (samples are padded to a multiple;
        results do not depend on it).
    trajectory_keys : jax.Array, optional
        PRNG keys `(sample * drifter,)` used instead of split(key, sample * drifter), so a caller can tie each
        track's noise to its own sample (dataset generation does, to be independent of chunking).

    Returns
    -------
    jax.Array
        Positions `(sample, drifter, obs, 2)` in `dtype`, unwrapped, domain lengths.

    Raises
    ------
    ValueError
        On mismatched shapes, a non-rectangular mode set, a missing key, or float64 without jax_enable_x64.
    """
    if coef.ndim != 2 or release.ndim != 3 or release.shape[0] != coef.shape[0] or release.shape[2] != 2:
        raise ValueError(f"expected coef (sample, mode) and release (sample, drifter, 2), got {coef.shape} and "
                         f"{release.shape}")
    if coef.shape[1] != np.size(k1) or np.shape(omega) != np.shape(k1):
        raise ValueError(f"coef has {coef.shape[1]} modes but k1 {np.shape(k1)} and omega {np.shape(omega)}")
    if diffusivity < 0:
        raise ValueError(f"diffusivity must be >= 0, got {diffusivity}")
    if diffusivity > 0 and key is None and trajectory_keys is None:
        raise ValueError("a PRNG key is required when diffusivity > 0")
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype float64 needs jax.config.update('jax_enable_x64', True)")
    rectangle_of(k1, k2)
    modes = folded_modes(np.asarray(k1), np.asarray(k2))
    n_samples, n_drifters = release.shape[:2]
    key = jax.random.key(0) if key is None else key
    keys = jax.random.split(key, n_samples * n_drifters) if trajectory_keys is None else trajectory_keys
    if keys.shape != (n_samples * n_drifters,):
        raise ValueError(f"trajectory_keys must have shape ({n_samples * n_drifters},), got {keys.shape}")
    complex_dtype = jnp.complex64 if dtype == jnp.float32 else jnp.complex128
    dt = jnp.asarray(dt, dtype)
    sigma = jnp.sqrt(2.0 * diffusivity * dt).astype(dtype)
    n_devices = jax.local_device_count() if n_devices is None else int(n_devices)
    if not 1 <= n_devices <= jax.local_device_count():
        raise ValueError(f"n_devices must be in 1..{jax.local_device_count()}, got {n_devices}")
    coef, release = jnp.asarray(coef, complex_dtype), jnp.asarray(release, dtype)
    pad = -n_samples % n_devices  # padded samples: zero flow, discarded below
    if pad:
        coef = jnp.concatenate([coef, jnp.zeros((pad, coef.shape[1]), coef.dtype)])
        release = jnp.concatenate([release, jnp.zeros((pad, n_drifters, 2), dtype)])
        keys = jnp.concatenate([keys, jax.random.split(key, pad * n_drifters)])
    run = _compiled(modes, n_drifters, int(n_obs), int(stride), diffusivity > 0, bool(compensated), int(unroll),
                    n_devices)
    out = run(coef, release, jnp.asarray(omega, dtype), dt, sigma, keys)
    return out[: n_samples * n_drifters].reshape(n_samples, n_drifters, n_obs, 2)
