"""The flow model against mathematics: worked example, divergence, periodicity, vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simulate.flow import (
    grid_fields,
    many_points,
    psi,
    psi_basis,
    rectangular_modes,
    velocity,
    velocity_basis,
)
from simulate.prior import draw_coefficients, draw_frequencies, spectrum

K1, K2 = rectangular_modes((-2, 2), (-1, 2))


@pytest.fixture(scope="module")
def field():
    coef = draw_coefficients(jax.random.key(3), spectrum(K1, K2, 1.5, 10.0), 4, jnp.complex128)
    omega = jnp.asarray(draw_frequencies(jax.random.key(4), len(K1), 60.0))
    return coef, omega


def test_worked_example_from_design():
    k1, k2 = rectangular_modes((0, 0), (1, 1))
    z = jnp.array([0.3, 0.1])
    coef, omega = jnp.array([1.0 + 0j]), jnp.zeros(1)
    assert psi(z, 0.0, coef, k1, k2, omega) == pytest.approx(np.cos(2 * np.pi * 0.1), abs=1e-14)
    np.testing.assert_allclose(velocity(z, 0.0, coef, k1, k2, omega), [2 * np.pi * np.sin(2 * np.pi * 0.1), 0.0],
                               atol=1e-13)


def test_velocity_is_skew_gradient_of_psi(field):
    coef, omega = field
    z, t = jnp.array([0.17, 0.61]), 0.023
    grad = jax.grad(psi)(z, t, coef[0], K1, K2, omega)
    np.testing.assert_allclose(velocity(z, t, coef[0], K1, K2, omega), [-grad[1], grad[0]], rtol=1e-12, atol=1e-12)


def test_velocity_is_divergence_free(field):
    coef, omega = field
    jac = jax.jacfwd(velocity)
    for z in jax.random.uniform(jax.random.key(0), (5, 2)):
        divergence = jnp.trace(jac(z, 0.04, coef[1], K1, K2, omega))
        speed_scale = jnp.linalg.norm(jac(z, 0.04, coef[1], K1, K2, omega))
        assert abs(divergence) <= 1e-13 * speed_scale


def test_spectral_divergence_is_zero(field):
    """On a grid, the spectral divergence of (u, v) vanishes to round-off."""
    coef, omega = field
    _, u, v = grid_fields(coef[:1], K1, K2, omega, jnp.array([0.05]), 16)
    kx = np.fft.fftfreq(16, 1 / 16)
    div = np.fft.ifft2(2j * np.pi * (kx[None, :] * np.fft.fft2(u[0, 0]) + kx[:, None] * np.fft.fft2(v[0, 0])))
    assert np.max(np.abs(div)) < 1e-10 * np.max(np.abs(u))


def test_periodic_in_space(field):
    coef, omega = field
    z = jnp.array([0.2, 0.9])
    for shift in ([1.0, 0.0], [0.0, -1.0], [3.0, 2.0]):
        np.testing.assert_allclose(
            velocity(z + jnp.array(shift), 0.01, coef[2], K1, K2, omega),
            velocity(z, 0.01, coef[2], K1, K2, omega), rtol=1e-11, atol=1e-11)


def test_rms_speed_matches_prior_scaling():
    """The prior's amplitude gives E<|w|^2> = rms_speed^2 (domain average, expectation)."""
    k1, k2 = rectangular_modes()
    coef = draw_coefficients(jax.random.key(9), spectrum(k1, k2, 1.5, 10.0), 512, jnp.complex128)
    _, u, v = grid_fields(coef, k1, k2, jnp.zeros(len(k1)), jnp.zeros(1), 16)
    mean_square = float(jnp.mean(u**2 + v**2))
    # 512 fields: the sample mean of the squared speed has a few % Monte-Carlo error.
    assert mean_square == pytest.approx(100.0, rel=0.08)


def test_many_points_equals_loop(field):
    coef, omega = field
    positions = jax.random.uniform(jax.random.key(1), (4, 3, 2))
    batched = many_points(velocity, positions, 0.02, coef, K1, K2, omega)
    for s in range(4):
        for p in range(3):
            np.testing.assert_allclose(batched[s, p], velocity(positions[s, p], 0.02, coef[s], K1, K2, omega),
                                       rtol=1e-13)
    psi_grid, _, _ = grid_fields(coef, K1, K2, omega, jnp.array([0.02]), 4)
    np.testing.assert_allclose(psi_grid[1, 0, 3, 2], psi(jnp.array([0.5, 0.75]), 0.02, coef[1], K1, K2, omega),
                               rtol=1e-12)


def test_empty_mode_set_is_refused():
    with pytest.raises(ValueError, match="empty mode set"):
        rectangular_modes((2, 1), (0, 0))


def test_velocity_basis_is_the_jacobian_of_velocity_in_re_im_c(field):
    """G(z, t) = d w / d (Re c, Im c), and G x is the velocity, at points of any batch shape."""
    coef, omega = field
    points = jax.random.uniform(jax.random.key(5), (3, 4, 2), jnp.float64, -1.0, 2.0)
    times = jnp.linspace(0.0, 0.1, 4)  # broadcast against the (3, 4) points
    g = velocity_basis(points, times, K1, K2, omega)
    assert g.shape == (3, 4, 2, 2 * len(K1)) and g.dtype == np.float64
    n = len(K1)

    def w_of_x(x, z, t):
        return velocity(z, t, x[:n] + 1j * x[n:], K1, K2, omega)

    x = jnp.concatenate([coef[0].real, coef[0].imag])
    for i in range(3):
        for j in range(4):
            np.testing.assert_allclose(g[i, j], jax.jacfwd(w_of_x)(x, points[i, j], times[j]), rtol=1e-12, atol=1e-11)
            np.testing.assert_allclose(g[i, j] @ x, w_of_x(x, points[i, j], times[j]), rtol=1e-12, atol=1e-11)


def test_psi_basis_is_the_jacobian_of_psi_in_re_im_c(field):
    coef, omega = field
    points = jax.random.uniform(jax.random.key(6), (5, 2), jnp.float64, -1.0, 2.0)
    times = jnp.linspace(0.0, 0.1, 5)
    rows = psi_basis(points, times, K1, K2, omega)
    assert rows.shape == (5, 2 * len(K1)) and rows.dtype == np.float64
    n = len(K1)
    x = jnp.concatenate([coef[0].real, coef[0].imag])
    for i in range(5):
        def psi_of_x(x):
            return psi(points[i], times[i], x[:n] + 1j * x[n:], K1, K2, omega)
        np.testing.assert_allclose(rows[i], jax.grad(psi_of_x)(x), rtol=1e-12, atol=1e-11)
