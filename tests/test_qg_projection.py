"""The QG truth in lagda's basis with a time basis (simulate.qg.projection).

Checks against named truths: a field in the basis is projected exactly (coefficients for a half plane,
fields for a full set with its split pairs), the cell-centre fields equal lagda's pointwise model
(simulate.flow.psi / velocity), the fit is the least-squares optimum (Pythagoras: any change of the
coefficients adds exactly its own squared error), the climatology prior recovers a known shell
spectrum, and a tiny pyqg-jax Rossby file lies almost wholly in the basis.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simulate import flow
from simulate.flow import circular_modes, in_time, rectangular_modes
from simulate.qg.projection import (
    basis_fields,
    climatology_prior,
    projection_limit,
    truth_in_basis,
    unresolved_variance,
    window_projection,
)

N = 16
START, LENGTH = 0.3, 0.1
TIMES = START + LENGTH * np.linspace(0.0, 1.0, 9)


def random_coef(rng, n_mode, lead=()):
    return rng.normal(size=(*lead, n_mode)) + 1j * rng.normal(size=(*lead, n_mode))


def test_a_half_plane_field_in_the_basis_is_projected_exactly():
    rng = np.random.default_rng(0)
    k1, k2 = circular_modes(3)
    degree = 2
    coef = random_coef(rng, k1.size * (degree + 1), (2, 3))  # leading axes kept
    psi, _, _ = basis_fields(coef, k1, k2, degree, START, LENGTH, TIMES, N)
    assert psi.shape == (2, 3, TIMES.size, N, N)
    fitted = window_projection(psi, TIMES, k1, k2, degree, START, LENGTH)
    assert fitted.shape == coef.shape
    np.testing.assert_allclose(fitted, coef, rtol=0, atol=1e-10)


def test_a_full_set_field_is_reproduced_with_the_split_pairs():
    rng = np.random.default_rng(1)
    k1, k2 = rectangular_modes((-3, 3), (-3, 3))  # every +-k pair, and k = 0
    degree = 2
    coef = random_coef(rng, k1.size * (degree + 1), (2,))
    fields = basis_fields(coef, k1, k2, degree, START, LENGTH, TIMES, N)
    fitted = window_projection(fields[0], TIMES, k1, k2, degree, START, LENGTH)
    for a, b in zip(basis_fields(fitted, k1, k2, degree, START, LENGTH, TIMES, N), fields):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * np.abs(b).max())
    # the split: c_-k = conj c_k, and each pair carries the original pair's c_k + conj c_-k
    partner = np.array([np.flatnonzero((k1 == -a) & (k2 == -b))[0] for a, b in zip(k1, k2)])
    per_mode = lambda c: c.reshape(2, k1.size, degree + 1)  # noqa: E731
    np.testing.assert_allclose(per_mode(fitted)[:, partner], np.conj(per_mode(fitted)), rtol=0, atol=1e-10)
    pair = lambda c: per_mode(c) + np.conj(per_mode(c)[:, partner])  # noqa: E731
    nonzero = (k1 != 0) | (k2 != 0)
    np.testing.assert_allclose(pair(fitted)[:, nonzero], pair(coef)[:, nonzero], rtol=0, atol=1e-10)


def test_basis_fields_are_lagdas_model_at_the_cell_centres():
    rng = np.random.default_rng(2)
    k1, k2 = circular_modes(3)
    degree = 2
    coef = random_coef(rng, k1.size * (degree + 1))
    psi, u, v = basis_fields(coef, k1, k2, degree, START, LENGTH, TIMES[::4], N)
    mk1, mk2, omega, basis = in_time(k1, k2, np.zeros(k1.size), degree, START, LENGTH)
    cell = (np.arange(N) + 0.5) / N
    y, x = np.meshgrid(cell, cell, indexing="ij")  # [j, i] = (y_j, x_i)
    points = jnp.asarray(np.stack([x, y], -1).reshape(-1, 2))
    args = (jnp.asarray(coef), jnp.asarray(mk1, jnp.float64), jnp.asarray(mk2, jnp.float64), jnp.asarray(omega), basis)
    for i, t in enumerate(TIMES[::4]):
        exact_psi = jax.vmap(lambda z: flow.psi(z, t, *args))(points).reshape(N, N)
        exact_w = jax.vmap(lambda z: flow.velocity(z, t, *args))(points).reshape(N, N, 2)
        np.testing.assert_allclose(psi[i], exact_psi, rtol=0, atol=1e-10 * np.abs(exact_psi).max())
        np.testing.assert_allclose(u[i], exact_w[..., 0], rtol=0, atol=1e-10 * np.abs(exact_w).max())
        np.testing.assert_allclose(v[i], exact_w[..., 1], rtol=0, atol=1e-10 * np.abs(exact_w).max())


def test_the_fit_is_the_least_squares_optimum():
    rng = np.random.default_rng(3)
    # the truth: more modes (|k| <= 5) and a higher degree (5) than the basis (|k| <= 3, degree 2)
    big1, big2 = circular_modes(5)
    truth = random_coef(rng, big1.size * 6) * np.repeat((1.0 + big1**2 + big2**2) ** -1.0, 6)
    psi, u, v = basis_fields(truth, big1, big2, 5, START, LENGTH, TIMES, N)
    k1, k2 = circular_modes(3)
    degree = 2
    coef = window_projection(psi, TIMES, k1, k2, degree, START, LENGTH)
    _, u_fit, v_fit = basis_fields(coef, k1, k2, degree, START, LENGTH, TIMES, N)
    best = projection_limit(u, v, u_fit, v_fit)
    assert 0.01 < best < 0.9  # the truth is partly outside the basis
    norm = np.sum(u**2 + v**2)
    for _ in range(5):
        delta = 1e-2 * random_coef(rng, coef.size) * np.abs(coef).mean()
        _, du, dv = basis_fields(delta, k1, k2, degree, START, LENGTH, TIMES, N)
        worse = projection_limit(u, v, u_fit + du, v_fit + dv)
        assert worse > best
        # the residual is orthogonal to the basis: the error grows by exactly the change's own
        np.testing.assert_allclose(worse**2, best**2 + np.sum(du**2 + dv**2) / norm, rtol=1e-9)
    variance = unresolved_variance(u, v, u_fit, v_fit)
    np.testing.assert_allclose(variance, best**2 * norm / (2 * u.size), rtol=1e-12)


def test_climatology_prior_recovers_a_shell_spectrum():
    rng = np.random.default_rng(4)
    k1, k2 = circular_modes(6)
    degree = 2
    shell = np.rint(np.hypot(k1, k2))
    scale = np.repeat((1.0 + shell**2) ** -1.5, degree + 1) * np.tile(0.5 ** np.arange(degree + 1), k1.size)
    coef = scale * random_coef(rng, scale.size, (50,)) / np.sqrt(2.0)  # E|c|^2 = scale^2 (lagda's prior)
    estimate = climatology_prior(coef, k1, k2, degree)
    assert estimate.shape == scale.shape
    np.testing.assert_allclose(estimate, scale, rtol=0.15)
    # the expanded wavevectors give the same, and a pool is its mean power
    mk1, mk2, _, _ = in_time(k1, k2, np.zeros(k1.size), degree, 0.0, 1.0)
    np.testing.assert_array_equal(climatology_prior(coef, mk1, mk2, degree), estimate)
    pool = np.flatnonzero((np.repeat(shell, degree + 1) == 2) & (np.tile(np.arange(degree + 1), k1.size) == 1))
    np.testing.assert_allclose(estimate[pool], np.sqrt(np.mean(np.abs(coef[:, pool]) ** 2)), rtol=1e-12)


@pytest.fixture(scope="module")
def rossby_file():
    pytest.importorskip("pyqg_jax")
    from simulate import qg

    config = qg.tiny("rossby", n_flows=2)
    return qg.to_xarray(config, qg.simulate_qg(config))


def test_a_rossby_file_lies_in_the_basis_in_time(rossby_file, tmp_path):
    import xarray as xr

    ds = rossby_file
    k1, k2 = rectangular_modes((-3, 3), (-3, 3))  # the rossby waves' max(|k1|, |k2|) <= 3
    truth = truth_in_basis(ds, k1, k2, 2)
    assert truth["coef"].shape == (2, k1.size * 3) and truth["u_fit"].shape == truth["u"].shape == (2, 9, 16, 16)
    np.testing.assert_allclose(truth["times"], np.linspace(0, 0.1, 9), rtol=0, atol=1e-14)
    assert truth["time_basis"].start == 0.0 and truth["time_basis"].length == pytest.approx(0.1)
    assert np.all(truth["limit"] < 0.01), truth["limit"]  # measured 0.0014, 0.0011
    steady = truth_in_basis(ds, k1, k2, 0)["limit"]
    assert np.all(steady > 10 * truth["limit"]), steady  # waves move: a steady fit misses ~15 %
    # units and the split: one time, degree 0, is the file's own projection at t = 0 (model units)
    T, L = ds.attrs["lagda_mapping_time_scale_s"], ds.attrs["qg_L"]
    first = window_projection(ds["psi"].values[:, :1] * T / L**2, [0.0], k1, k2, 0, 0.0, 1.0)
    np.testing.assert_allclose(first, ds["proj_coef_re"].values[:, 0] + 1j * ds["proj_coef_im"].values[:, 0],
                               rtol=0, atol=1e-6 * np.abs(first).max())  # psi is stored as float32
    # a file read back (decoded CF times), one flow
    ds.to_netcdf(tmp_path / "rossby.nc")
    with xr.open_dataset(tmp_path / "rossby.nc") as opened:
        again = truth_in_basis(opened, k1, k2, 2, flows=1)
    np.testing.assert_allclose(again["times"], truth["times"], rtol=0, atol=1e-14)
    np.testing.assert_allclose(again["coef"][0], truth["coef"][1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(again["limit"], truth["limit"][1:], rtol=1e-10)
