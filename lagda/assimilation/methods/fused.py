"""The observation operator of sparse tracks and its sensitivity, fused for speed on CPU.

`fused_positions` and `fused_tangent` return what lagda.assimilation.methods.observations.simulate_observed
and simulate_observed_tangent return (the RK4 positions at the observed slots, and their exact derivative in
x = (Re c, Im c): the derivative of the discrete RK4 map, not of the flow), for tracks observed every
`stride` >= FUSED_MIN_STRIDE steps in a model without a time basis. Restructured:

* Trajectory: one RK4 step is explicit arithmetic on `(drifter,)` vectors, with the conjugate folding
  (k, -k) and the separable exponentials of simulate.kernels, so XLA runs it as a few fused loops; the
  positions of its four stages are kept for the sensitivity.
* Sensitivity, blocked in time. The RK4 step z' = F(z, x) has F_z (2 x 2) and F_x = sum_l M_l G_l, with
  G_l = dw/dx `(2, 2K)` at stage l and M_l (2 x 2) from the stage velocity gradients W_l = dw/dz:
  k_l = w(z_l), z_l = z + h_l k_{l-1} (h = 0, dt/2, dt/2, dt) give dk_l = W_l h_l dk_{l-1} + G_l, so
  M_l = dt/6 R_l with R_4 = b_4 I, R_l = b_l I + h_{l+1} R_{l+1} W_{l+1} (b = 1, 2, 2, 1). The
  sensitivity S = dz/dx obeys S' = F_z S + F_x, so over the `stride` steps between two records
      S_end = Phi S_start + sum_n Psi_n F_x(n),   Psi_n = F_z(last) ... F_z(n + 1),   Phi = Psi_first F_z(first).
  Once a block's stage positions are known every term is: the 2 x 2 products by a doubling scan, the sum
  as one contraction over the block's steps and stages against the per-mode e^{i theta}. This replaces
  2K tangent columns stepped one RK4 step at a time (`simulate_observed_tangent`); the result is the
  same derivative to rounding.
* Exponentials: e^{i theta_k} = e^{i omega_k t} e^{2 pi i k.z} with t = t0 + (j stride + n + c) dt for
  record block j; e^{i omega_k (t0 + j stride dt)} (each drifter's start, each block) goes into the
  coefficients, so one table of e^{i omega_k (n + c) dt} serves every block and drifter; e^{2 pi i k.z} and
  the table are polynomial sin / cos in turns (simulate.kernels), several times faster than jnp.sin on CPU.

The number of records is an argument (a traced integer), so one compilation serves every stage of a
continuation: `jit` keys on the operator (modes, dt, stride) and the shapes of the tracks only.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.model import to_complex

# the fused trajectory kernel's pieces: folded modes, RK4-stage velocity on (batch,) vectors, sin/cos in turns
from simulate.kernels import folded_modes, sincos_turns, stage_velocity

TWO_PI = 2.0 * np.pi
FUSED_MIN_STRIDE = 8  # below this spacing the blocks are too short to pay (simulate_observed_tangent is used)
_STAGE_NODES = (0.0, 0.5, 0.5, 1.0)  # RK4 stage times in steps
_STAGE_SHIFTS = (0.0, 0.5, 0.5, 1.0)  # h_l / dt: stage l sits at z + h_l k_{l-1}
_STAGE_WEIGHTS = (1.0, 2.0, 2.0, 1.0)  # RK4 weights times 6


@dataclasses.dataclass(frozen=True)
class FusedOperator:
    """The static plan of the fused operator: the folded modes, dt and the record spacing.

    Fold f stands for the wavevector k_f = (folds[f][0], folds[f][1]) with k_f1 > 0, or k_f1 = 0 and k_f2 > 0:
    mode folds[f][2] has wavevector k_f, mode folds[f][3] has -k_f (-1 where the model has none).
    """

    folds: tuple  # simulate.kernels.folded_modes: (k1, k2, m, m_partner) per folded wavevector
    n_modes: int
    dt: float
    stride: int


def fused_operator(k1, k2, dt: float, stride: int, time=None) -> FusedOperator | None:
    """Returns the `FusedOperator` of a model and record spacing, or None where the fused path does not apply.

    It applies to observations every `stride` >= FUSED_MIN_STRIDE RK4 steps, in a model without a time
    basis whose wavevectors are distinct (a time basis repeats them with different temporal factors).

    Parameters
    ----------
    k1, k2
        integer wavevectors `(mode,)`
    dt
        RK4 step
    stride
        steps between records
    time
        the model's TimeBasis or None.
    """
    k1, k2 = np.asarray(k1, np.int64), np.asarray(k2, np.int64)
    if time is not None or stride < FUSED_MIN_STRIDE or len(set(zip(k1.tolist(), k2.tolist()))) != len(k1):
        return None
    folds = folded_modes(k1, k2)
    return FusedOperator(folds, len(k1), float(dt), int(stride)) if folds else None


def _mat(a, b):
    """Returns the product of 2 x 2 matrices stored as (m00, m01, m10, m11) tuples of arrays."""
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


def _cmul(p, q):
    """Returns the complex product of (re, im) pairs."""
    return p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]


def _suffix_products(a):
    """Returns Psi `(batch, n, 4)` with Psi[:, m] = a[:, n-1] ... a[:, m+1] (identity for m = n - 1).

    a: 2 x 2 matrices `(batch, n, 4)` (row-major). Hillis-Steele doubling: log2(n) fused passes.
    """
    eye = jnp.broadcast_to(jnp.asarray([1.0, 0.0, 0.0, 1.0], a.dtype), a[:, :1].shape)
    out = jnp.concatenate([a[:, 1:], eye], axis=1)  # out[m] = a[m + 1]: the later product starts there
    shift = 1
    while shift < a.shape[1]:
        later = jnp.concatenate([out[:, shift:], jnp.broadcast_to(eye, (a.shape[0], shift, 4))], axis=1)
        out = jnp.stack(_mat(tuple(later[..., i] for i in range(4)), tuple(out[..., i] for i in range(4))), -1)
        shift *= 2
    return out


class _Arrays:
    """The operator's constant arrays (numpy, so jit embeds them): fold wavevectors and members, stage offsets."""

    def __init__(self, op: FusedOperator):
        self.k1 = np.asarray([f[0] for f in op.folds], np.float64)
        self.k2 = np.asarray([f[1] for f in op.folds], np.float64)
        self.member_a = np.asarray([f[2] for f in op.folds])
        self.member_b = np.asarray([f[3] for f in op.folds])
        self.has_b = self.member_b >= 0
        self.index_b = np.maximum(self.member_b, 0)
        # (stride, 4): offsets (n + c_l) dt of the stage times from the block start
        self.offsets = (np.arange(op.stride)[:, None] + np.asarray(_STAGE_NODES)[None, :]) * op.dt


def _block_phases(t, omega, arr: _Arrays):
    """Returns (e^{i omega_a t}, conj(e^{i omega_b t})), complex `(batch, fold)`: the frame of a block starting at t.

    omega_a, omega_b: the frequencies of each fold's modes k and -k; t: `(batch,)` the block's start time per
    drifter; omega: `(K,)`.
    """
    phase = jnp.exp(1j * omega[None, :] * t[:, None])
    return phase[:, arr.member_a], jnp.where(arr.has_b[None, :], jnp.conj(phase[:, arr.index_b]), 0.0)


def _block_coefficients(x, phases, arr: _Arrays):
    """Returns (a, b) complex `(batch, fold)`: a = c_k e^{i omega_k t}, b = conj(c_{-k} e^{i omega_{-k} t}).

    x: `(2K,)`; phases: `_block_phases` of the block.
    """
    c = to_complex(x)
    a = c[arr.member_a][None, :] * phases[0]
    b = jnp.where(arr.has_b, jnp.conj(c[arr.index_b]), 0.0)[None, :] * phases[1]
    return a, b


def _step_table(omega, arr: _Arrays):
    """Returns (T, S), each a (re, im) pair `(stride, 4, fold)`: e^{i omega_a tau} and conj(e^{i omega_b tau})."""
    omega_a = omega[arr.member_a]
    omega_b = jnp.where(arr.has_b, omega[arr.index_b], 0.0)
    tau = jnp.asarray(arr.offsets)[..., None]
    t_cos, t_sin = sincos_turns(tau * (omega_a / TWO_PI)[None, None, :])
    s_cos, s_sin = sincos_turns(tau * (omega_b / TWO_PI)[None, None, :])
    return (t_cos, t_sin), (s_cos, -s_sin)


def _block_trajectory(z, a, b, table, op: FusedOperator, arr: _Arrays):
    """Returns (z after the block `(batch,)` complex, stage positions `(stride, 4, batch)` complex).

    z = x + i y; a, b: `(batch, fold)` block coefficients; table: `_step_table`.
    """
    coefs = tuple(p.T for p in (a.real, a.imag, b.real, b.imag))  # (fold, batch)
    (t_re, t_im), (s_re, s_im) = table
    dt, half = op.dt, 0.5 * op.dt

    def step(z, rotation):
        x, y = jnp.real(z), jnp.imag(z)
        at = [tuple(r[stage] for r in rotation) for stage in (0, 1, 3)]  # stages 2 and 3 share a time
        u1, v1 = stage_velocity(x, y, coefs, at[0], op.folds)
        x2, y2 = x + half * u1, y + half * v1
        u2, v2 = stage_velocity(x2, y2, coefs, at[1], op.folds)
        x3, y3 = x + half * u2, y + half * v2
        u3, v3 = stage_velocity(x3, y3, coefs, at[1], op.folds)
        x4, y4 = x + dt * u3, y + dt * v3
        u4, v4 = stage_velocity(x4, y4, coefs, at[2], op.folds)
        dx = dt * (u1 / 6.0 + u2 / 3.0 + u3 / 3.0 + u4 / 6.0)
        dy = dt * (v1 / 6.0 + v2 / 3.0 + v3 / 3.0 + v4 / 6.0)
        # four separate outputs: stacked in the step, XLA would recompute the stages for each of them
        return z + jax.lax.complex(dx, dy), (z, jax.lax.complex(x2, y2), jax.lax.complex(x3, y3),
                                             jax.lax.complex(x4, y4))

    z_end, stages = jax.lax.scan(step, z, (t_re, t_im, s_re, s_im))
    return z_end, jnp.stack(stages, axis=1)


def _block_sensitivity(stages, a, b, table, op: FusedOperator, arr: _Arrays):
    """Returns (Phi `(batch, 4)`, the block's sum over steps of Psi_n F_x(n) as (X, Y)).

    X, Y: complex `(batch, 2, fold)`, row r of the sum for mode k_f and -k_f in the form `_columns` reads, in
    the block's frame (before its phase): X[r, f] = sum_{n,l} (P[r, 0] k_f2 - P[r, 1] k_f1) e^{i omega_a tau}
    e^{2 pi i k_f.z}, P = Psi_n M_l, and Y likewise with conj(e^{i omega_b tau}).
    """
    dt = op.dt
    stages = jnp.moveaxis(stages, 2, 0)  # (batch, stride, 4)
    x, y = jnp.real(stages)[..., None], jnp.imag(stages)[..., None]
    k1, k2 = arr.k1[None, None, None], arr.k2[None, None, None]  # (1, 1, 1, fold) against (batch, stride, 4, .)
    e_cos, e_sin = sincos_turns(x * k1 + y * k2)  # e^{2 pi i k.z}: (batch, stride, 4, fold)
    (t_re, t_im), (s_re, s_im) = table
    te = _cmul((t_re[None], t_im[None]), (e_cos, e_sin))
    se = _cmul((s_re[None], s_im[None]), (e_cos, e_sin))
    a_re, a_im = (p[:, None, None, :] for p in (a.real, a.imag))
    b_re, b_im = (p[:, None, None, :] for p in (b.real, b.imag))
    p_re = a_re * te[0] - a_im * te[1] + b_re * se[0] - b_im * se[1]  # Re of each fold's term of psi
    c2 = TWO_PI**2
    ux = c2 * jnp.sum(k1 * k2 * p_re, -1)  # velocity gradient W at each stage (dv/dy = -du/dx)
    uy = c2 * jnp.sum(k2 * k2 * p_re, -1)
    vx = -c2 * jnp.sum(k1 * k1 * p_re, -1)
    w = [(ux[..., s], uy[..., s], vx[..., s], -ux[..., s]) for s in range(4)]
    h = tuple(dt * s for s in _STAGE_SHIFTS)
    dk = [w[0]]  # dk_l/dz = W_l (I + h_l dk_{l-1}/dz)
    for s in range(1, 4):
        prev = dk[-1]
        dk.append(_mat(w[s], (1.0 + h[s] * prev[0], h[s] * prev[1], h[s] * prev[2], 1.0 + h[s] * prev[3])))
    total = tuple(p + 2.0 * q + 2.0 * r + s for p, q, r, s in zip(*dk))
    step_z = (1.0 + dt / 6.0 * total[0], dt / 6.0 * total[1], dt / 6.0 * total[2], 1.0 + dt / 6.0 * total[3])
    one, zero = jnp.ones_like(ux[..., 0]), jnp.zeros_like(ux[..., 0])
    r = [None, None, None, (one, zero, zero, one)]
    for s in (2, 1, 0):
        rw = _mat(r[s + 1], w[s + 1])
        bs, hs = _STAGE_WEIGHTS[s], h[s + 1]
        r[s] = (bs + hs * rw[0], hs * rw[1], hs * rw[2], bs + hs * rw[3])
    psi = _suffix_products(jnp.stack(step_z, -1))
    psi = tuple(psi[..., i] for i in range(4))
    phi = _mat(tuple(p[:, 0] for p in psi), tuple(p[:, 0] for p in step_z))
    weight = jnp.stack([jnp.stack(_mat(psi, r[s]), -1) for s in range(4)], axis=2) * (dt / 6.0)  # (b, n, 4, rc)
    sums = []
    for row in range(2):  # (P G)[r] = P[r, 0] G[0] + P[r, 1] G[1], G = 2 pi (k2, -k1) e^{i theta}
        mixed = weight[..., 2 * row, None] * k2 - weight[..., 2 * row + 1, None] * k1
        sums.append([jnp.sum(mixed * part, axis=(1, 2)) for part in (te[0], te[1], se[0], se[1])])
    x_sum = jnp.stack([s[0] + 1j * s[1] for s in sums], axis=1)
    y_sum = jnp.stack([s[2] + 1j * s[3] for s in sums], axis=1)
    return jnp.stack(phi, -1), (x_sum, y_sum)


def _columns(x_sum, y_sum, arr: _Arrays, n_modes: int):
    """Returns dz/dx `(..., 2, 2K)` from the accumulated (X, Y) `(..., 2, fold)` complex of `_block_sensitivity`.

    Mode k_f's G is 2 pi (k2, -k1) e^{i theta}, so d/d(Re c) is Im and d/d(Im c) is Re of 2 pi X; mode -k_f's
    has -k and e^{i theta} = conj(...), giving -2 pi conj(Y).
    """
    to_a = np.zeros((arr.k1.size, n_modes))
    to_a[np.arange(arr.k1.size), arr.member_a] = 1.0
    to_b = np.zeros((arr.k1.size, n_modes))
    to_b[np.flatnonzero(arr.has_b), arr.member_b[arr.has_b]] = 1.0
    value = TWO_PI * (x_sum @ to_a - jnp.conj(y_sum) @ to_b)
    return jnp.concatenate([value.imag, value.real], axis=-1)


def _record(index, j, value, out):
    """Returns out with out[d, o] = value[d] where index[d, o] == j."""
    hit = (index == j).reshape(index.shape + (1,) * (value.ndim - 1))
    return jnp.where(hit, jnp.expand_dims(value, 1), out)


@functools.partial(jax.jit, static_argnames=("op",))
def fused_positions(x, z0, t0, index, omega, n_sim, op: FusedOperator):
    """Returns the RK4 positions at the observed slots, `(drifter, obs, 2)`, as simulate_observed does.

    Parameters
    ----------
    x
        `(2K,)`
    z0
        `(drifter, 2)` starts at times t0 `(drifter,)`
    index
        int `(drifter, obs)` record of each slot (record j is the state after (j + 1) stride steps)
    omega
        `(K,)`
    n_sim
        records to simulate (a traced integer: slots with index >= n_sim keep 0)
    op
        `fused_operator`.
    """
    arr = _Arrays(op)
    table = _step_table(omega, arr)

    def block(j, carry):
        z, positions = carry
        a, b = _block_coefficients(x, _block_phases(t0 + j * op.stride * op.dt, omega, arr), arr)
        z, _ = _block_trajectory(z, a, b, table, op, arr)
        return z, _record(index, j, jnp.stack([z.real, z.imag], -1), positions)

    start = (jax.lax.complex(z0[:, 0], z0[:, 1]), jnp.zeros(index.shape + (2,), z0.dtype))
    return jax.lax.fori_loop(0, n_sim, block, start)[1]


@functools.partial(jax.jit, static_argnames=("op",))
def fused_tangent(x, z0, t0, index, omega, n_sim, op: FusedOperator):
    """Returns (positions `(drifter, obs, 2)`, dpositions/dx `(drifter, obs, 2, 2K)`), as simulate_observed_tangent.

    The derivative of the discrete RK4 map, blocked between records (module docstring). Args as
    `fused_positions`.
    """
    arr = _Arrays(op)
    table = _step_table(omega, arr)
    n_drifter, n_fold = z0.shape[0], arr.k1.size

    def block(j, carry):
        z, x_sum, y_sum, positions, x_obs, y_obs = carry
        phase_a, phase_b = _block_phases(t0 + j * op.stride * op.dt, omega, arr)
        a, b = _block_coefficients(x, (phase_a, phase_b), arr)
        z, stages = _block_trajectory(z, a, b, table, op, arr)
        phi, (x_block, y_block) = _block_sensitivity(stages, a, b, table, op, arr)
        # the block's sums hold the table's e^{i omega tau}; the block's own phase completes e^{i theta}
        x_sum = _propagate(phi, x_sum) + phase_a[:, None, :] * x_block
        y_sum = _propagate(phi, y_sum) + phase_b[:, None, :] * y_block
        return (z, x_sum, y_sum, _record(index, j, jnp.stack([z.real, z.imag], -1), positions),
                _record(index, j, x_sum, x_obs), _record(index, j, y_sum, y_obs))

    zero_sum = jnp.zeros((n_drifter, 2, n_fold), jnp.result_type(x.dtype, jnp.complex64))
    zero_obs = jnp.zeros(index.shape + (2, n_fold), zero_sum.dtype)
    start = (jax.lax.complex(z0[:, 0], z0[:, 1]), zero_sum, zero_sum, jnp.zeros(index.shape + (2,), z0.dtype),
             zero_obs, zero_obs)
    _, _, _, positions, x_obs, y_obs = jax.lax.fori_loop(0, n_sim, block, start)
    return positions, _columns(x_obs, y_obs, arr, op.n_modes)


def _propagate(phi, rows):
    """Returns Phi rows for Phi `(batch, 4)` (row-major 2 x 2) and rows `(batch, 2, ...)`."""
    expand = (slice(None),) + (None,) * (rows.ndim - 2)
    return jnp.stack([phi[:, 0][expand] * rows[:, 0] + phi[:, 1][expand] * rows[:, 1],
                      phi[:, 2][expand] * rows[:, 0] + phi[:, 3][expand] * rows[:, 1]], axis=1)


def _whitened_misfit(sim, x, mask, target, sigma, prior_std, prior_mean):
    """Returns r(x) `(drifter*obs*2 + 2K,)` of lagda.assimilation.methods.variational.residuals from positions."""
    misfit = (sim - target) * (jnp.sqrt(mask)[:, :, None] / sigma)
    return jnp.concatenate([misfit.reshape(-1), (x - prior_mean) / prior_std])


@functools.partial(jax.jit, static_argnames=("op",))
def fused_residuals(x, mask, target, z0, t0, index, omega, sigma, prior_std, prior_mean, n_sim, op: FusedOperator):
    """Returns the whitened 4D-Var residuals r(x) of variational.residuals, through `fused_positions`."""
    sim = fused_positions(x, z0, t0, index, omega, n_sim, op)
    return _whitened_misfit(sim, x, mask, target, sigma, prior_std, prior_mean)


@functools.partial(jax.jit, static_argnames=("op",))
def fused_residuals_jacobian(x, mask, target, z0, t0, index, omega, sigma, prior_std, prior_mean, n_sim,
                             op: FusedOperator):
    """Returns (r(x), dr/dx `(drifter*obs*2 + 2K, 2K)`) of variational.residuals / jacobian, from one fused run."""
    sim, sens = fused_tangent(x, z0, t0, index, omega, n_sim, op)
    jac = sens * (jnp.sqrt(mask)[:, :, None, None] / sigma)
    return (_whitened_misfit(sim, x, mask, target, sigma, prior_std, prior_mean),
            jnp.concatenate([jac.reshape(-1, x.shape[0]), jnp.diag(1.0 / prior_std)]))
