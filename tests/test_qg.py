"""QG truth flows (simulate.qg): spectral interpolation, the drifter scheme's order, Rossby waves, the projection,
the imposed flow and successive windows. The files, the command and assimilating them: tests/test_qg_files.py.

Every check is against a named truth: the gridded field at grid points and a single Fourier mode
off the grid (trigonometric interpolation), RK4's order 4 in a Fourier field evolving in closed
form (the drifter scheme), the linear Rossby dispersion relation (the `rossby` regime), the DFT
as the least-squares fit (the projection).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simulate import qg
from simulate.flow import rectangular_modes

L, NX = 1e6, 16
GRID = qg.spectral_grid(NX, L)
CELL = (np.arange(NX) + 0.5) * L / NX  # pyqg-jax's cell centres


def random_real_field(key, n=NX):
    return np.asarray(jax.random.normal(key, (n, n)))


def test_interpolation_equals_the_gridded_field_at_grid_points():
    # a random real field has every rfft2 coefficient, the Nyquist row and column included
    field = random_real_field(jax.random.key(1))
    fh = jnp.fft.rfftn(field)
    ij = np.stack(np.meshgrid(np.arange(NX), np.arange(NX), indexing="ij"), -1).reshape(-1, 2)  # (i, j) = (x, y) index
    points = jnp.asarray(CELL[ij])
    values = jax.vmap(lambda z: qg.spectral_value(fh, z, GRID))(points)
    np.testing.assert_allclose(values, field[ij[:, 1], ij[:, 0]], rtol=0, atol=1e-12 * np.abs(field).max())


def test_interpolation_is_exact_for_one_mode_off_the_grid():
    # psi = A cos(k x + l y + phi), k = 3 (2 pi / L), l = -2 (2 pi / L): u = A l sin(.), v = -A k sin(.)
    k, ell, amp, phi = 3 * 2 * np.pi / L, -2 * 2 * np.pi / L, 7.0, 0.4
    x, y = np.meshgrid(CELL, CELL, indexing="xy")
    ph = jnp.fft.rfftn(amp * np.cos(k * x + ell * y + phi))
    points = jnp.asarray(np.random.default_rng(0).uniform(-0.3 * L, 1.7 * L, (50, 2)))  # off-grid, beyond one period
    psi = jax.vmap(lambda z: qg.spectral_value(ph, z, GRID))(points)
    uv = jax.vmap(lambda z: qg.spectral_value(qg.spectral_velocity(ph, GRID), z, GRID))(points)
    phase = k * points[:, 0] + ell * points[:, 1] + phi
    np.testing.assert_allclose(psi, amp * np.cos(phase), rtol=0, atol=1e-12 * amp)
    exact_uv = np.stack([amp * ell * np.sin(phase), -amp * k * np.sin(phase)], -1)
    np.testing.assert_allclose(uv, exact_uv, rtol=0, atol=1e-12 * amp * abs(k))


def evolving_field(key):
    """Returns psi-hat(t) = psi-hat(0) exp(i w t) of a few low modes (a closed-form Fourier evolution), ~0.1 m/s."""
    n_k = NX // 2 + 1
    low = (np.abs(np.fft.fftfreq(NX, 1 / NX))[:, None] <= 3) & (np.arange(n_k)[None, :] <= 3)
    a, b, c = jax.random.normal(key, (3, NX, n_k))
    ph0 = jnp.where(jnp.asarray(low), (a + 1j * b) * 4e5, 0.0)
    omega = 2e-5 * c  # rad/s: periods of days, so the time interpolation matters
    return lambda t: ph0 * jnp.exp(1j * omega * t), lambda t: 1j * omega * ph0 * jnp.exp(1j * omega * t)


def drift(ph, dph, release, t_final, n_steps):
    """Returns positions after n_steps drifter steps, the spectral state known only at the step times."""
    h = t_final / n_steps
    states = lambda n: (qg.spectral_velocity(ph(n * h), GRID), qg.spectral_velocity(dph(n * h), GRID))
    body = lambda n, z: qg.step_drifters(z, n * h, h, (*states(n), *states(n + 1)), GRID)
    return jax.lax.fori_loop(0, n_steps, body, release)


def test_drifter_scheme_has_the_order_of_rk4():
    ph, dph = evolving_field(jax.random.key(2))
    release = jnp.asarray(np.random.default_rng(3).uniform(0, L, (6, 2)))
    t_final = 4 * 86400.0
    run = jax.jit(lambda n: drift(ph, dph, release, t_final, n))  # one compilation: the step count is traced
    reference = run(1024)
    steps = np.array([8, 16, 32, 64])
    errors = np.array([float(jnp.max(jnp.abs(run(n) - reference))) for n in steps])
    assert errors[-1] > 1e-9 * L, errors  # still above round-off
    slope = -np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - qg.DRIFTER_STEP.order) < 0.3, (slope, errors)


@pytest.mark.parametrize("rms_speed, tolerance", [
    (0.002, 0.01),  # the preset's 2 mm/s: measured 0.70% of the largest frequency
    (0.0002, 0.001),  # ten times weaker waves: measured 0.07%, so the deviation is the nonlinear term, not AB3
], ids=["preset-amplitude", "tenth-amplitude"])
def test_rossby_modes_rotate_at_the_dispersion_relation_frequencies(rms_speed, tolerance):
    # linear Rossby waves: psi_k(t) = psi_k(0) exp(-i w t), w = -beta k_x / |k|^2 (lagda's omega = -w)
    config = qg.tiny("rossby", window_days=30.0, obs_interval=86400.0, truth_interval=86400.0, n_drifters=4,
                     rms_speed=rms_speed)
    flows = qg.simulate_qg(config)
    k1, k2 = rectangular_modes((-3, 3), (-3, 3))
    coef = qg.project(flows.psi[0], k1, k2)  # (truth, mode)
    omega = qg.rossby_frequencies(config, k1, k2)
    live = np.abs(coef[0]) > 0.05 * np.abs(coef[0]).max()
    times = config.truth_interval * np.arange(config.n_truth + 1)
    phases = np.unwrap(np.angle(coef[:, live] / coef[0, live]), axis=0)
    fitted = np.array([np.polyfit(times, p, 1)[0] for p in phases.T])
    assert live.sum() >= 20 and np.abs(omega[live]).max() > 2e-6
    assert np.max(np.abs(fitted - omega[live])) < tolerance * np.abs(omega).max()


def test_projection_is_the_least_squares_fit_and_exact_in_the_basis():
    k1, k2 = rectangular_modes((-2, 2), (-2, 2))
    x, y = np.meshgrid(CELL / L, CELL / L, indexing="xy")
    basis = np.exp(2j * np.pi * (k1[:, None, None] * x + k2[:, None, None] * y))  # (mode, ny, nx)
    rng = np.random.default_rng(4)
    coef = rng.normal(size=k1.size) + 1j * rng.normal(size=k1.size)
    coef = 0.5 * (coef + np.conj(coef[::-1]))  # the minimum-norm split: c_-k = conj(c_k) (modes are symmetric in order)
    psi = np.real(np.einsum("m,myx->yx", coef, basis))
    np.testing.assert_allclose(qg.project(psi, k1, k2), coef, atol=1e-12)
    # a field outside the basis: the projection is the minimum-norm least-squares fit over (Re c, Im c)
    field = random_real_field(jax.random.key(5))
    design = np.concatenate([np.real(basis), -np.imag(basis)]).reshape(2 * k1.size, -1).T
    solution = np.linalg.lstsq(design, field.ravel(), rcond=None)[0]
    np.testing.assert_allclose(qg.project(field, k1, k2), solution[: k1.size] + 1j * solution[k1.size :], atol=1e-12)


def test_drifters_feel_the_imposed_flow_in_pyqgs_frame():
    # Galilean invariance: pyqg's frame (U1 = shear, U2 = 0) is the co-moving one (U1 = 0, U2 = -shear) seen from a
    # frame moving at -U1. From the same state (no spin-up), a drifter in pyqg's frame less U1 t is the co-moving
    # frame's drifter, and the full truth less U1 is the co-moving truth moved by U1 t, to the model's AB3 error
    config = qg.tiny("turbulence", n_drifters=4, spin_up_days=0.0, seed=7)
    full = qg.simulate_qg(config)
    comoving = qg.simulate_qg(dataclasses.replace(config, background="anomaly"))
    assert qg.background_velocity(config) == (config.shear, 0.0)
    assert qg.background_velocity(dataclasses.replace(config, background="anomaly")) == (0.0, 0.0)
    t = config.obs_interval * np.arange(1, config.n_obs + 1)
    moved = np.abs(comoving.positions - comoving.release[:, :, None]).max()  # measured 2.9 km in 4 days
    assert moved > 1e-3 * L and config.shear * t[-1] > 2 * moved
    shifted = full.positions - np.stack([config.shear * t, 0.0 * t], -1)
    np.testing.assert_allclose(shifted, comoving.positions, rtol=0, atol=1e-3 * moved)  # measured 1.3e-5
    kx = 2 * np.pi / L * np.fft.fftfreq(NX, 1.0 / NX)
    times = config.truth_interval * np.arange(config.n_truth + 1)
    shift = np.exp(-1j * kx * config.shear * times[:, None, None])  # (truth, 1, nx): x -> x - U1 t
    move = lambda f: np.fft.ifft(np.fft.fft(f, axis=-1) * shift, axis=-1)
    for name, offset in (("u", config.shear), ("v", 0.0), ("psi", 0.0)):
        expected, got = np.real(move(getattr(comoving, name)[0])), getattr(full, name)[0] - offset
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-3 * np.abs(expected).max())  # measured 7e-5


def test_successive_windows_continue_one_flow_with_fresh_drifters():
    # windows = 3: one spin-up, then three windows back to back; window 0 is the one-window run, bit for bit, each
    # later window starts from the state the one before ended in, with drifters released afresh
    config = qg.tiny("turbulence", n_drifters=3, spin_up_days=2.0, window_days=1.0, seed=4)
    one = qg.simulate_qg(config)
    three = qg.simulate_qg(dataclasses.replace(config, windows=3))
    assert three.positions.shape[0] == 3 and one.positions.shape[0] == 1
    for name in ("release", "positions", "psi", "u", "v"):
        np.testing.assert_array_equal(getattr(three, name)[:1], getattr(one, name))
    for w in (1, 2):
        np.testing.assert_array_equal(three.psi[w, 0], three.psi[w - 1, -1])  # the same flow, continued
        assert not np.allclose(three.psi[w, -1], three.psi[w, 0])  # and it moves on
        assert not np.allclose(three.release[w], three.release[w - 1])  # fresh release points


@pytest.mark.parametrize("release", ["random", "fixed"])
def test_window_preset_releases_in_its_central_box(release):
    # the window: the qg preset's physics and resolution on a domain twice as wide, released in the central quarter
    config, base = qg.window(release=release, n_drifters=50), qg.turbulence(release=release, n_drifters=50)
    assert (config.L, config.nx, config.k_max) == (2 * base.L, 2 * base.nx, 2 * base.k_max)
    assert config.release_box == (0.25, 0.75, 0.25, 0.75) and base.release_box == (0.0, 1.0, 0.0, 1.0)
    key = jax.random.key(3)
    points = np.asarray(qg.release_points(config, key)) / config.L
    # the box's release is the whole domain's, mapped affinely onto the box
    np.testing.assert_allclose(points, 0.25 + 0.5 * np.asarray(qg.release_points(base, key)) / base.L, rtol=1e-12)
    assert points.min() >= 0.25 and points.max() <= 0.75
