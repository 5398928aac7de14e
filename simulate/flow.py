"""The spectral flow model on the torus T^2 = [0, 1)^2 (docs/design/forward-model.md).

psi(z, t) = Re( sum_k c_k f_k(t) exp(i omega_k t) exp(2 pi i (k1 x + k2 y)) ),  w = J grad psi,
J = [[0, -1], [1, 0]], so w = (-d psi/dy, d psi/dx).

The temporal factor f_k is 1 (the paper's model: one frequency per mode), or with a `TimeBasis`
the Legendre polynomial L_{p_k}(s) of the mode's degree p_k in s = 2 (t - start) / length - 1,
so that a spatial mode repeated with p = 0..P holds any degree-P polynomial in time over the
window (`in_time`). A `TimeBasis` may also mark modes k = 0 as the uniform current: such a mode
moves every point alike, w = (Re a_k, Im a_k) with a_k = c_k f_k(t) exp(i omega_k t), and its
streamfunction is the ramp psi = -Re a_k y + Im a_k x (no periodic k = 0 mode moves a drifter).
The velocity stays linear in the coefficients either way.

Functions here are written for one point and batched with `jax.vmap`; `many_points`
evaluates a field on many positions of many fields.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

TWO_PI = 2.0 * np.pi


class TimeBasis(NamedTuple):
    """Legendre polynomials in time, one per mode: f_k(t) = L_{p_k}(2 (t - start) / length - 1), and the current.

    A pytree, so jitted functions take it as an argument (None: f_k = 1).
    """

    select: np.ndarray  # float (mode, P + 1): row k is one-hot at the mode's degree p_k
    start: float  # window start (model time)
    length: float  # window length (model time)
    current: np.ndarray | None = None  # float (mode,): 1 where the mode (k = 0) is the uniform current, else 0

    @property
    def degree(self) -> np.ndarray:
        """Returns each mode's degree p_k, int `(mode,)`."""
        return np.argmax(np.asarray(self.select), axis=-1).astype(np.int32)


def time_basis(degree, start: float, length: float, current=None) -> TimeBasis:
    """Returns the `TimeBasis` of degrees `(mode,)` over the window [start, start + length].

    Parameters
    ----------
    current
        bool `(mode,)`, True where the mode is the uniform current (its wavevector must be k = 0), or None.

    Raises
    ------
    ValueError
        for a negative degree or a window of length <= 0.
    """
    degree = np.asarray(degree, np.int64)
    if np.any(degree < 0) or not length > 0:
        raise ValueError("time basis needs degrees >= 0 and a window length > 0, got degrees "
                         f"{sorted(set(degree.tolist()))}, length {length}")
    mask = None if current is None or not np.any(current) else np.asarray(current, np.float64).reshape(degree.shape)
    return TimeBasis(np.eye(int(degree.max()) + 1)[degree], float(start), float(length), mask)


def current_mask(time: TimeBasis | None):
    """Returns the float `(mode,)` mask of the uniform-current modes of a time basis, or None when it has none."""
    return None if time is None else time.current


def temporal_factor(t, time: TimeBasis | None, xp=jnp):
    """Returns f_k(t) `(..., mode)` for times `(...)`, or 1.0 without a time basis.

    Bonnet's recurrence (n + 1) L_{n+1} = (2n + 1) s L_n - n L_{n-1}; xp is jnp or np.
    """
    if time is None:
        return 1.0
    s = 2.0 * (xp.asarray(t) - time.start) / time.length - 1.0
    values = [xp.ones_like(s), s]
    for n in range(1, time.select.shape[-1] - 1):
        values.append(((2 * n + 1) * s * values[n] - n * values[n - 1]) / (n + 1))
    return xp.stack(values[: time.select.shape[-1]], axis=-1) @ xp.asarray(time.select).T


def in_time(k1, k2, omega, degree: int, start: float, length: float, current=None):
    """Returns (k1, k2, omega, TimeBasis) of every mode repeated with p = 0..degree, spatial-major.

    Mode index m = i * (degree + 1) + p for spatial mode i. current: bool `(spatial,)`, True for the uniform
    current (k = 0), or None.
    """
    reps = degree + 1
    repeat = lambda a: np.repeat(np.asarray(a), reps)
    if current is not None and np.any(np.asarray(current) & ((repeat(k1)[::reps] != 0) | (repeat(k2)[::reps] != 0))):
        raise ValueError("the uniform current is the mode k = (0, 0)")
    return (repeat(k1), repeat(k2), repeat(omega),
            time_basis(np.tile(np.arange(reps), len(np.asarray(k1))), start, length,
                       None if current is None else repeat(current).astype(bool)))


def circular_modes(k_max: float, half_plane: bool = True):
    """Returns integer wavevectors `(k1, k2)` with 0 < |k| <= k_max, ordered k1-major then k2.

    half_plane: only one of each pair +-k (k1 > 0, or k1 = 0 and k2 > 0). A real field needs no
    more: Re(c_k e^{ik.z}) + Re(c_-k e^{-ik.z}) = Re((c_k + conj c_-k) e^{ik.z}), so the full set's
    pairs are redundant. k = 0 is left out (it moves nothing).
    """
    m = int(np.floor(k_max))
    k1, k2 = (a.ravel() for a in np.meshgrid(np.arange(-m, m + 1), np.arange(-m, m + 1), indexing="ij"))
    keep = (k1**2 + k2**2 <= k_max**2) & ((k1 != 0) | (k2 != 0))
    if half_plane:
        keep &= (k1 > 0) | ((k1 == 0) & (k2 > 0))
    return k1[keep].astype(np.int32), k2[keep].astype(np.int32)


def rectangular_modes(k1_range=(-3, 3), k2_range=(-3, 3)):
    """Returns integer wavevectors `(k1, k2)`, each `(mode,)`, of a rectangular mode set.

    Modes are ordered k1-major: mode index m = i1 * n2 + i2. The default is the paper's
    {-3..3}^2 (K = 49).

    Parameters
    ----------
    k1_range, k2_range : tuple of int
        `(min, max)` of each wavenumber, inclusive.

    Returns
    -------
    k1, k2 : numpy.ndarray
        Integer `(mode,)`, mode = (k1 max - k1 min + 1) (k2 max - k2 min + 1).

    Raises
    ------
    ValueError
        If a range is empty (min > max).
    """
    (a1, b1), (a2, b2) = k1_range, k2_range
    if a1 > b1 or a2 > b2:
        raise ValueError(f"empty mode set: k1 in {list(k1_range)}, k2 in {list(k2_range)} (need min <= max)")
    k1, k2 = np.meshgrid(np.arange(a1, b1 + 1), np.arange(a2, b2 + 1), indexing="ij")
    return k1.ravel().astype(np.int32), k2.ravel().astype(np.int32)


def _mode_terms(position, t, coef, k1, k2, omega, time=None):
    """Returns c_k f_k(t) exp(i omega_k t) exp(2 pi i k.z), complex `(mode,)`."""
    phase = omega * t + TWO_PI * (k1 * position[0] + k2 * position[1])
    return coef * temporal_factor(t, time) * jnp.exp(1j * phase)


def psi(position, t, coef, k1, k2, omega, time=None):
    """Returns the streamfunction psi(z, t), a scalar in model units (domain lengths^2 per model time unit).

    Parameters
    ----------
    position : array_like
        `(2,)` point z = (x, y) in domain lengths, unwrapped or not (psi is 1-periodic, but for a uniform
        current's ramp).
    t : float
        Model time.
    coef : array_like
        Complex `(mode,)` coefficients c_k.
    k1, k2 : array_like
        Integer `(mode,)` wavevectors.
    omega : array_like
        Real `(mode,)` frequencies, radians per model time unit.
    time : TimeBasis, optional
        The temporal factors f_k (module docstring); None gives f_k = 1.

    Returns
    -------
    jax.Array
        psi(z, t), a scalar.
    """
    terms = _mode_terms(position, t, coef, k1, k2, omega, time)
    current = current_mask(time)
    if current is None:
        return jnp.real(jnp.sum(terms))
    amplitude = jnp.sum(current * terms)  # the uniform current (its e^{2 pi i 0.z} = 1): -Re a y + Im a x
    return jnp.real(jnp.sum((1.0 - current)
                            * terms)) - jnp.real(amplitude) * position[1] + jnp.imag(amplitude) * position[0]


def velocity(position, t, coef, k1, k2, omega, time=None):
    """Returns the velocity w = J grad psi = (-d psi/dy, d psi/dx) at one point, `(2,)`.

    Worked example: k = (0, 1), c = 1, omega = 0 gives w = (2 pi sin 2 pi y, 0).

    Parameters
    ----------
    position, t, coef, k1, k2, omega, time
        As in `psi`.

    Returns
    -------
    jax.Array
        `(2,)` velocity (u, v) in domain lengths per model time unit.
    """
    terms = _mode_terms(position, t, coef, k1, k2, omega, time)
    dpsi_dx = jnp.real(jnp.sum(1j * TWO_PI * k1 * terms))
    dpsi_dy = jnp.real(jnp.sum(1j * TWO_PI * k2 * terms))
    current = current_mask(time)
    if current is not None:  # k = 0 modes add nothing above; the current adds (Re a, Im a)
        amplitude = jnp.sum(current * terms)
        return jnp.stack([-dpsi_dy + jnp.real(amplitude), dpsi_dx + jnp.imag(amplitude)])
    return jnp.stack([-dpsi_dy, dpsi_dx])


def _phases(points, t, k1, k2, omega, time):
    """Returns (z `(..., 2)`, t `(..., 1)`, k1, k2, omega, theta_k = omega_k t + 2 pi k.z `(..., mode)`, the temporal
    factors f_k(t) `(..., mode)` or 1.0) in float64 numpy: what `velocity_basis` and `psi_basis` share."""
    z = np.asarray(points, np.float64)
    k1, k2, omega = (np.asarray(a, np.float64) for a in (k1, k2, omega))
    t = np.asarray(t, np.float64)[..., None]
    theta = omega * t + TWO_PI * (z[..., 0:1] * k1 + z[..., 1:2] * k2)
    return z, t, k1, k2, omega, theta, 1.0 if time is None else temporal_factor(t[..., 0], time, np)


def velocity_basis(points, t, k1, k2, omega, time=None) -> np.ndarray:
    """Returns G with w(z, t) = G x for x = (Re c, Im c): numpy float64 `(..., 2, 2 * mode)`.

    The velocity is linear in the coefficients: with c = a + i b and theta_k = omega_k t +
    2 pi k.z, u = sum_k 2 pi k2 (a_k sin theta_k + b_k cos theta_k) and v = -sum_k 2 pi k1
    (same), so G[..., 0, :] = 2 pi k2 (sin theta, cos theta), G[..., 1, :] = -2 pi k1 (same).
    Computed in float64 numpy for the linear inversions (lagda's linear method, physics feature).

    Parameters
    ----------
    points
        `(..., 2)` positions z
    t
        times broadcastable to `points.shape[:-1]`.
    k1, k2, omega
        `(mode,)` wavevectors and frequencies
    time
        `TimeBasis` or None.
    """
    z, t, k1, k2, omega, theta, factor = _phases(points, t, k1, k2, omega, time)
    basis = TWO_PI * np.concatenate([np.sin(theta), np.cos(theta)], axis=-1)  # (..., 2K)
    if time is not None:
        basis = basis * np.tile(factor, 2)
    # (2 pi sin) * k rather than (2 pi k) * sin: the rounding of the shipped model's physics feature
    g = np.stack([basis * np.tile(k2, 2), -(basis * np.tile(k1, 2))], axis=-2)
    current = current_mask(time)
    if current is not None:  # u = f (a cos - b sin)(omega t), v = f (a sin + b cos)(omega t) of c = a + i b
        cos, sin = np.cos(omega * t) * factor * current, np.sin(omega * t) * factor * current
        g = g + np.stack([np.concatenate([cos, -sin], axis=-1), np.concatenate([sin, cos], axis=-1)], axis=-2)
    return g


def psi_basis(points, t, k1, k2, omega, time=None) -> np.ndarray:
    """Returns P with psi(z, t) = P x for x = (Re c, Im c): numpy float64 `(..., 2 * mode)`.

    With c = a + i b, psi = sum_k f_k (a_k cos theta_k - b_k sin theta_k) (theta_k as in `velocity_basis`); the
    uniform current's ramp -Re(A) y + Im(A) x of A = sum f_k c_k e^{i omega_k t} over its modes.

    Parameters
    ----------
    points
        `(..., 2)` positions z
    t
        times broadcastable to `points.shape[:-1]`.
    k1, k2, omega
        `(mode,)` wavevectors and frequencies
    time
        `TimeBasis` or None.
    """
    z, t, k1, k2, omega, theta, factor = _phases(points, t, k1, k2, omega, time)
    current = current_mask(time)
    periodic = factor if current is None else factor * (1.0 - current)
    rows = np.concatenate([np.cos(theta) * periodic, -np.sin(theta) * periodic], axis=-1)
    if current is not None:  # -Re(A) y + Im(A) x, Re(A) = f (a cos - b sin)(omega t), Im(A) = f (a sin + b cos)
        cos, sin = np.cos(omega * t) * factor * current, np.sin(omega * t) * factor * current
        x, y = z[..., 0:1], z[..., 1:2]
        rows = rows + np.concatenate([-cos * y + sin * x, sin * y + cos * x], axis=-1)
    return rows


def many_points(fn, positions, t, coef, k1, k2, omega):
    """Evaluates `psi` or `velocity` for several fields at several points.

    Parameters
    ----------
    fn : callable
        `psi` or `velocity`.
    positions : array_like
        `(sample, point, 2)` in domain lengths.
    t : float or array_like
        Model time, a scalar or `(sample, point)`.
    coef : array_like
        Complex `(sample, mode)`.
    k1, k2, omega : array_like
        `(mode,)`, as in `psi`.

    Returns
    -------
    jax.Array
        `(sample, point)` for psi, `(sample, point, 2)` for velocity.
    """
    t = jnp.broadcast_to(jnp.asarray(t, positions.dtype), positions.shape[:-1])
    per_point = jax.vmap(fn, in_axes=(0, 0, None, None, None, None))
    return jax.vmap(per_point, in_axes=(0, 0, 0, None, None, None))(positions, t, coef, k1, k2, omega)


def grid_fields(coef, k1, k2, omega, times, n_grid, time=None):
    """Returns psi, u, v on a regular grid: each `(sample, time, y, x)`.

    Grid points are x_i = i / n_grid (i = 0..n_grid-1), likewise y. Computed as a
    separable Fourier sum, so cost is O(sample * time * mode * n_grid^2) without any
    Python loop.

    Parameters
    ----------
    coef : array_like
        Complex `(sample, mode)`.
    k1, k2, omega : array_like
        `(mode,)`, as in `psi`.
    times : array_like
        `(time,)` model times.
    n_grid : int
        Grid points per side.
    time : TimeBasis, optional
        As in `psi`.

    Returns
    -------
    psi, u, v
        Each `(sample, time, y, x)`, in model units.
    """
    grid = jnp.arange(n_grid) / n_grid
    ex = jnp.exp(1j * TWO_PI * k1[:, None] * grid[None, :])  # (mode, x)
    ey = jnp.exp(1j * TWO_PI * k2[:, None] * grid[None, :])  # (mode, y)
    et = jnp.exp(1j * omega[None, :] * times[:, None]) * temporal_factor(times, time)  # (time, mode)
    amp = coef[:, None, :] * et[None, :, :]  # (sample, time, mode)
    current = current_mask(time)
    periodic = amp if current is None else amp * (1.0 - current)[None, None, :]
    psi_hat = jnp.einsum("stm,my,mx->styx", periodic, ey, ex)
    u = -jnp.real(jnp.einsum("stm,my,mx->styx", amp * (1j * TWO_PI * k2)[None, None, :], ey, ex))
    v = jnp.real(jnp.einsum("stm,my,mx->styx", amp * (1j * TWO_PI * k1)[None, None, :], ey, ex))
    psi_grid = jnp.real(psi_hat)
    if current is not None:  # the uniform current: u, v constant over the grid, psi the ramp -U y + V x
        flow = jnp.sum(amp * jnp.asarray(current)[None, None, :], axis=-1)[:, :, None, None]  # (sample, time, 1, 1)
        u, v = u + jnp.real(flow), v + jnp.imag(flow)
        psi_grid = psi_grid - jnp.real(flow) * grid[None, None, :, None] + jnp.imag(flow) * grid[None, None, None, :]
    return psi_grid, u, v
