"""Physics feature: G(z, t) theta is the flow's velocity, and theta_hat recovers c from a track."""
import jax
import jax.numpy as jnp
import numpy as np

from lagda.learning.physics import batched_posterior_mean, design_matrix, prior_sd_of
from simulate import (
    draw_coefficients,
    draw_frequencies,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)
from simulate.flow import many_points, velocity

K1, K2 = rectangular_modes((-1, 1), (-1, 1))
SCALE = spectrum(K1, K2, 1.5, 10.0)
OMEGA = draw_frequencies(jax.random.key(0), len(K1), 20 * np.pi)


def test_design_matrix_times_theta_is_the_velocity():
    coef = draw_coefficients(jax.random.key(1), SCALE, 1, jnp.complex128)
    points = jax.random.uniform(jax.random.key(2), (6, 2), jnp.float64, -1.0, 2.0)
    # two observations per interval, stride 1: midpoints are the points themselves
    positions = np.stack([points - 1e-3, points + 1e-3], axis=1)  # (point, obs, 2)
    time = jnp.array([0.3, 0.5])
    g = design_matrix(positions, time, K1, K2, OMEGA, 1)[0][:, 0]  # (point, 2, 2K)
    theta = jnp.concatenate([coef.real, coef.imag], axis=1)[0]
    t_mid = jnp.full((1, 6), 0.4)
    expected = many_points(velocity, points[None], t_mid, coef, K1, K2, jnp.asarray(OMEGA))[0]
    np.testing.assert_allclose(g @ theta, expected, rtol=1e-10, atol=1e-10)


def test_posterior_mean_recovers_coefficients_of_simulated_tracks():
    coef = draw_coefficients(jax.random.key(3), SCALE, 4, jnp.complex128)
    release = jnp.full((4, 1, 2), 0.75, jnp.float64)
    positions = simulate_tracks(coef, release, K1, K2, jnp.asarray(OMEGA), 1e-3, 100, 1)[:, 0]
    time = 1e-3 * jnp.arange(1, 101)
    est = batched_posterior_mean(positions.astype(jnp.float32), time.astype(jnp.float32), K1.astype(np.float32),
                                 K2.astype(np.float32), OMEGA.astype(np.float32), prior_sd_of(SCALE), 1e-6, 2)
    keep = np.tile(~((K1 == 0) & (K2 == 0)), 2)  # c_(0,0) never moves a drifter: theta_hat = 0 there
    truth = np.concatenate([coef.real, coef.imag], axis=1)
    cosine = np.sum(est[:, keep] * truth[:, keep], 1) / np.linalg.norm(est[:, keep],
                                                                       axis=1) / np.linalg.norm(truth[:, keep], axis=1)
    assert np.all(cosine > 0.95), cosine
    np.testing.assert_allclose(est[:, ~keep], 0.0, atol=1e-6)
    # the estimate of a field is far from the other fields
    others = np.sum(est[:, None, keep] * truth[None, :, keep],
                    -1) / np.linalg.norm(est[:, keep], axis=1)[:, None] / np.linalg.norm(truth[:, keep], axis=1)[None]
    assert np.all(np.argmax(others, axis=1) == np.arange(4))
