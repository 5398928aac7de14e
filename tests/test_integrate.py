"""RK4 and the record loop against mathematics: order, invariants, closed forms, DOP853."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from simulate.flow import psi, rectangular_modes, velocity
from simulate.integrate import RK4, explicit_rk_step, record, stochastic_rk_step
from simulate.prior import draw_coefficients, draw_frequencies, spectrum
from simulate.tracks import simulate_tracks

K1, K2 = rectangular_modes((-1, 1), (-1, 1))
SCALE = spectrum(K1, K2, 1.5, 10.0)


def _field(z, t, args):
    coef, omega = args
    return velocity(z, t, coef, K1, K2, omega)


@pytest.fixture(scope="module")
def unsteady():
    coef = draw_coefficients(jax.random.key(11), SCALE, 3, jnp.complex128)
    omega = jnp.asarray(draw_frequencies(jax.random.key(12), len(K1), 60.0))
    return coef, omega


@pytest.fixture(scope="module")
def tracks_fn():
    return jax.jit(simulate_tracks, static_argnames=("n_obs", "stride", "diffusivity"))


def test_rk4_converges_at_order_four(unsteady, tracks_fn):
    """Global error at T = 0.1 against a dt = T/3200 solution; the fitted slope is the order.

    float64, dt from 1e-3 to 2.5e-4: asymptotic, and far above round-off.
    """
    coef, omega = unsteady
    release = jnp.full((3, 1, 2), 0.75)
    reference = tracks_fn(coef, release, K1, K2, omega, 0.1 / 3200, n_obs=1, stride=3200)[:, 0, -1]
    dts = np.array([0.1 / 100, 0.1 / 200, 0.1 / 400])
    errors = [float(jnp.max(jnp.abs(tracks_fn(coef, release, K1, K2, omega, dt, n_obs=1,
                                              stride=int(round(0.1 / dt)))[:, 0, -1] - reference)))
              for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert slope == pytest.approx(explicit_rk_step(_field).order, abs=0.3), errors


def test_solid_translation_closed_form():
    """psi = cos(2 pi y) gives w = (2 pi sin 2 pi y, 0): x moves linearly, y stays put."""
    k1, k2 = rectangular_modes((0, 0), (1, 1))
    y0 = 0.2
    positions = simulate_tracks(jnp.array([[1.0 + 0j]]), jnp.array([[[0.3, y0]]]), k1, k2, jnp.zeros(1), 1e-3, n_obs=5,
                                stride=10)
    t = 1e-2 * np.arange(1, 6)
    np.testing.assert_allclose(positions[0, 0, :, 0], 0.3 + 2 * np.pi * np.sin(2 * np.pi * y0) * t, rtol=1e-13)
    np.testing.assert_allclose(positions[0, 0, :, 1], y0, atol=1e-15)


def test_psi_conserved_along_steady_paths(tracks_fn):
    coef = draw_coefficients(jax.random.key(5), SCALE, 3, jnp.complex128)
    omega = jnp.zeros(len(K1))
    release = jax.random.uniform(jax.random.key(6), (3, 2, 2))
    positions = tracks_fn(coef, release, K1, K2, omega, 1e-4, n_obs=100, stride=10)
    psi_path = jax.vmap(jax.vmap(jax.vmap(psi, (0, None, None, None, None, None)), (0, None, None, None, None, None)),
                        (0, None, 0, None, None, None))(positions, 0.0, coef, K1, K2, omega)
    psi_start = jax.vmap(jax.vmap(psi, (0, None, None, None, None, None)),
                         (0, None, 0, None, None, None))(release, 0.0, coef, K1, K2, omega)
    drift = jnp.max(jnp.abs(psi_path - psi_start[..., None]))
    assert drift < 1e-10 * float(jnp.max(jnp.abs(psi_start)))


def test_agrees_with_dop853(unsteady, tracks_fn):
    """RK4 at dt = 1e-4 against scipy's DOP853 at rtol = atol = 1e-12 (good to ~1e-11)."""
    coef, omega = unsteady
    release = jnp.array([[[0.75, 0.75]]] * 3)
    positions = tracks_fn(coef, release, K1, K2, omega, 1e-4, n_obs=100, stride=10)
    times = 1e-3 * np.arange(1, 101)
    for s in range(3):
        rhs = lambda t, z: np.asarray(velocity(jnp.asarray(z), t, coef[s], K1, K2, omega))
        sol = solve_ivp(rhs, (0.0, 0.1), [0.75, 0.75], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=times)
        np.testing.assert_allclose(positions[s, 0], sol.y.T, atol=1e-8)


def test_records_every_stride_steps():
    """record() with stride s equals every s-th state of stride 1."""
    k1, k2 = rectangular_modes((0, 1), (0, 1))
    args = (jnp.array([0.3 + 0.1j, -0.2j, 0.5, 0.1 + 0.4j]), jnp.array([1.0, -2.0, 0.5, 3.0]))
    field = lambda z, t, a: velocity(z, t, a[0], k1, k2, a[1])
    step = explicit_rk_step(field, RK4)
    every = record(step, jnp.array([0.1, 0.2]), 0.0, 1e-3, 12, 1, args)
    strided = record(step, jnp.array([0.1, 0.2]), 0.0, 1e-3, 4, 3, args)
    np.testing.assert_allclose(strided, every[2::3], rtol=1e-14)


def test_batched_equals_unbatched(unsteady, tracks_fn):
    coef, omega = unsteady
    release = jax.random.uniform(jax.random.key(2), (3, 2, 2))
    batched = tracks_fn(coef, release, K1, K2, omega, 1e-3, n_obs=10, stride=2)
    for s in range(3):
        single = simulate_tracks(coef[s:s + 1], release[s:s + 1], K1, K2, omega, 1e-3, n_obs=10, stride=2)
        np.testing.assert_allclose(batched[s], single[0], rtol=1e-13)


def test_brownian_forcing_has_diffusive_spread():
    """With w = 0, dz = sqrt(2 kappa) dW: Var(x(t)) = 2 kappa t."""
    kappa, n = 0.01, 4000
    k1, k2 = rectangular_modes((0, 0), (1, 1))
    positions = simulate_tracks(jnp.zeros((1, 1), jnp.complex128), jnp.zeros((1, n, 2)), k1, k2, jnp.zeros(1),
                                1e-2, n_obs=2, stride=5, diffusivity=kappa, key=jax.random.key(0))
    variance = np.var(np.asarray(positions[0, :, -1, :]), axis=0)
    # 4000 samples: the variance estimate has relative std sqrt(2/4000) = 2.2%; allow 4 sigma.
    np.testing.assert_allclose(variance, 2 * kappa * 0.1, rtol=0.09)
    assert stochastic_rk_step(lambda z, t, a: z, 0.0).order == 4
