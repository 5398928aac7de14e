"""The drifters' physics: trigonometric interpolation of the model's Fourier state and one RK4 step.

A velocity is evaluated at one point from rfft2 coefficients (`spectral_value`); between two
model states the spectral state is their cubic Hermite interpolant (`hermite`); the drifter
step is the generic RK4 of `simulate.integrate` on that field, vmapped over drifters.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from simulate.integrate import RK4, explicit_rk_step


class SpectralGrid(NamedTuple):
    """The model's rfft2 grid: wavenumbers k `(nk,)`, l `(ny,)` in rad/m, the half-cell offset and weights."""

    k: jax.Array  # (nk,) rad/m, rfftfreq order
    l: jax.Array  # noqa: E741 (ny,) rad/m, fftfreq order; the public field keeps pyqg's name
    weight: jax.Array  # (nk,) 1 for k = 0 and the Nyquist column, 2 for the others (their conjugates are implied)
    offset: jax.Array  # (2,) m: grid point (i, j) sits at ((i + 1/2) dx, (j + 1/2) dy)
    n_points: int  # nx * ny


def spectral_grid(nx: int, L: float) -> SpectralGrid:
    """Returns the `SpectralGrid` of pyqg-jax's square nx^2 grid of side L (its `kk`, `ll` and cell centres)."""
    k = 2 * jnp.pi / L * jnp.arange(nx // 2 + 1)
    ell = 2 * jnp.pi / L * jnp.fft.fftfreq(nx, 1.0 / nx)
    weight = jnp.full(nx // 2 + 1, 2.0).at[0].set(1.0).at[-1].set(1.0)
    return SpectralGrid(k, ell, weight, jnp.full(2, 0.5 * L / nx), nx * nx)


def spectral_value(fh, z, grid: SpectralGrid):
    """Returns f(z), the trigonometric interpolant of rfft2 coefficients `fh` at one point.

    f(z) = (1/N) Re sum_{l, k} w_k fh[l, k] exp(i (k x' + l y')), z' = z - offset: the field whose
    rfft2 over the grid is `fh`, evaluated anywhere (periodic, exact for a band-limited field).

    Parameters
    ----------
    fh
        complex `(..., ny, nk)`, leading axes evaluated together
    z
        `(2,)` metres.
    """
    x, y = z[0] - grid.offset[0], z[1] - grid.offset[1]
    ex = grid.weight * jnp.exp(1j * grid.k * x)  # (nk,)
    ey = jnp.exp(1j * grid.l * y)  # (ny,)
    return jnp.real(jnp.einsum("...lk,l,k->...", fh, ey, ex)) / grid.n_points


def spectral_velocity(ph, grid: SpectralGrid):
    """Returns (uh, vh) stacked `(2, ..., ny, nk)` of a streamfunction `ph` `(..., ny, nk)`:
    u = -d psi/dy, v = d psi/dx."""
    ell, k = (jnp.broadcast_to(a, ph.shape) for a in (grid.l[:, None], grid.k[None, :]))
    return jnp.stack([-1j * ell * ph, 1j * k * ph])


def hermite(f0, df0, f1, df1, h, theta):
    """Returns the cubic Hermite interpolant at t_0 + theta h of values f0, f1 and derivatives df0, df1 (O(h^4))."""
    t2, t3 = theta * theta, theta * theta * theta
    return ((2 * t3 - 3 * t2 + 1) * f0 + (t3 - 2 * t2 + theta) * h * df0
            + (-2 * t3 + 3 * t2) * f1 + (t3 - t2) * h * df1)


def drifter_field(z, t, args):
    """Returns dz/dt at one drifter `z` `(2,)` m, time t in [t0, t0 + h]: the interpolated spectral velocity.

    `args` = (uvh0, duvh0, uvh1, duvh1, t0, h, grid): the spectral velocity `(2, ny, nk)` and its
    time derivative at the two model states bracketing t.
    """
    uvh0, duvh0, uvh1, duvh1, t0, h, grid = args
    return spectral_value(hermite(uvh0, duvh0, uvh1, duvh1, h, (t - t0) / h), z, grid)


DRIFTER_STEP = explicit_rk_step(drifter_field, RK4)  # step(z, t, dt, args); order 4


def step_drifters(z, t0, h, states, grid: SpectralGrid):
    """Returns drifter positions `(drifter, 2)` after one RK4 step of h seconds from t0.

    Parameters
    ----------
    z
        `(drifter, 2)` metres, unwrapped.
    states
        (uvh0, duvh0, uvh1, duvh1): spectral velocity `(2, ny, nk)` and its time derivative at t0 and t0 + h.
    """
    args = (*states, t0, h, grid)
    return jax.vmap(lambda p: DRIFTER_STEP(p, t0, h, args))(z)
