"""The QG truth in lagda's flow basis with a time basis: the projection, its limit and a climatology prior.

lagda's model (simulate.flow) with a `TimeBasis` and omega = 0 writes the streamfunction over a window as

    psi(z, t) = Re sum_{i, p} c_{ip} L_p(s) exp(2 pi i k_i.z),   s = 2 (t - start) / length - 1,

mode m = i (degree + 1) + p (`simulate.flow.in_time`). `window_projection` fits the gridded truth in
this basis by least squares over the cell centres and the truth times. On the grid the Fourier modes
are orthogonal (|k1|, |k2| < n/2) and the design is the Kronecker product of the temporal design
(Legendre at the truth times) and the spatial one, so the least-squares fit is the spatial DFT
coefficient (`simulate.qg.dataset.project`) at each time, then a least-squares fit of each
coefficient's time series by L_0..L_degree. The truth's velocity is the spectral derivative of its
streamfunction, so this is the least-squares fit of the velocity too (each mode is weighted by
(2 pi |k|)^2, but the modes decouple). The relative error of that fit, `projection_limit`, is the
best any method estimating coefficients in this basis can do on the truth; the velocity it leaves
out (`unresolved_variance`) is the representation error of lagda's linear method.

Units: lagda's model units throughout (lengths in domain sides L, time in T =
`lagda_mapping_time_scale_s` seconds): psi_model = psi_SI T / L^2, w_model = w_SI T / L.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simulate.flow import grid_fields, in_time
from simulate.qg.dataset import project


def _partner_missing(k1, k2) -> np.ndarray:
    """Returns bool `(spatial,)`: True where -k is not in the set (k = 0 is its own partner)."""
    present = set(zip(np.asarray(k1).tolist(), np.asarray(k2).tolist()))
    return np.array([(-a, -b) not in present for a, b in zip(np.asarray(k1).tolist(), np.asarray(k2).tolist())], bool)


def _check_modes(k1, k2, n: int | None = None):
    """Returns integer k1, k2 `(spatial,)`; raises ValueError for a repeated mode or one the grid cannot hold."""
    k1, k2 = np.asarray(k1, np.int64).ravel(), np.asarray(k2, np.int64).ravel()
    if k1.shape != k2.shape:
        raise ValueError(f"k1 and k2 differ in length: {k1.size} and {k2.size}")
    if len(set(zip(k1.tolist(), k2.tolist()))) != k1.size:
        raise ValueError("the mode set repeats a wavevector")
    if n is not None and not grid_holds(k1, k2, n):
        raise ValueError(f"modes need |k1|, |k2| < n/2 = {n / 2} on a {n}^2 grid, got max {top_wavenumber(k1, k2)}")
    return k1, k2


def top_wavenumber(k1, k2) -> int:
    """Returns max(|k1|, |k2|) over the modes `(mode,)`, 0 for none."""
    return int(max(np.max(np.abs(k1)), np.max(np.abs(k2)))) if np.size(k1) else 0


def grid_holds(k1, k2, n: int) -> bool:
    """Returns whether an n^2 grid resolves the modes: |k1|, |k2| below its Nyquist wavenumber n/2."""
    return 2 * top_wavenumber(k1, k2) < n


def window_projection(psi, truth_t, k1, k2, degree: int, start: float, length: float) -> np.ndarray:
    """Returns the least-squares coefficients, complex `(..., mode)`, of gridded psi in the basis in time.

    Parameters
    ----------
    psi
        `(..., time, ny, nx)` streamfunction in model units on the cell centres (i + 1/2)/n.
    truth_t
        `(time,)` model times of the fields.
    k1, k2
        `(spatial,)` integer wavevectors (any set: a half plane, or a full set with +-k pairs).
    degree, start, length
        the Legendre degrees 0..degree over the window [start, start + length].

    Returns
    -------
    np.ndarray
        coef `(..., spatial * (degree + 1))` for the modes of `in_time(k1, k2, omega, degree, start, length)`
        (spatial-major, p fastest). A mode whose partner -k is not in the set gets the whole pair,
        c_k + conj c_-k = 2 c_k; with the partner present the pair keeps the minimum-norm split
        c_-k = conj c_k. Needs at least degree + 1 distinct times for a unique fit (else minimum norm).
    """
    psi = np.asarray(psi, np.float64)
    truth_t = np.asarray(truth_t, np.float64)
    if psi.ndim < 3 or psi.shape[-3] != truth_t.size:
        raise ValueError(f"psi must be (..., time, ny, nx) with time = {truth_t.size}, got shape {psi.shape}")
    k1, k2 = _check_modes(k1, k2, psi.shape[-1])
    c = project(psi, k1, k2)  # (..., time, spatial)
    c = c * np.where(_partner_missing(k1, k2), 2.0, 1.0)
    fit = legendre_fit(np.moveaxis(c, -2, -1), truth_t, degree, start, length)  # (..., spatial, degree + 1)
    return fit.reshape(*c.shape[:-2], k1.size * (degree + 1))


def legendre_fit(series, truth_t, degree: int, start: float, length: float) -> np.ndarray:
    """Returns the least-squares coefficients `(..., degree + 1)` of L_0..L_degree fitted to `series` `(..., time)`."""
    series, truth_t = np.asarray(series), np.asarray(truth_t, np.float64)
    design = np.polynomial.legendre.legvander(2.0 * (truth_t - start) / length - 1.0, degree)  # (time, degree + 1)
    flat = np.moveaxis(series, -1, 0).reshape(truth_t.size, -1)  # (time, ...)
    fit = np.linalg.lstsq(design, flat, rcond=None)[0]  # (degree + 1, ...)
    return np.moveaxis(fit.reshape(degree + 1, *series.shape[:-1]), 0, -1)


def current_projection(u, v, truth_t, degree: int, start: float, length: float) -> np.ndarray:
    """Returns the coefficients `(..., degree + 1)` of the uniform current fitted to gridded u, v `(..., time, ny, nx)`.

    The current's coefficient c = a + i b moves every point by (a, b) L_p(s), so its least-squares fit to the
    velocity is the fit of the domain mean u + i v at each time (the k = 0 Fourier component of the velocity,
    orthogonal to every periodic mode's).
    """
    mean = np.mean(np.asarray(u, np.float64), axis=(-2, -1)) + 1j * np.mean(np.asarray(v, np.float64), axis=(-2, -1))
    return legendre_fit(mean, truth_t, degree, start, length)


def with_current(k1, k2):
    """Returns (k1, k2, current flags) `(1 + spatial,)` of periodic modes with the uniform current (k = 0) put first."""
    k1, k2 = np.asarray(k1), np.asarray(k2)
    return (np.concatenate([[0], k1]).astype(k1.dtype), np.concatenate([[0], k2]).astype(k2.dtype),
            np.arange(k1.size + 1) == 0)


def at_cell_centres(coef, k1, k2, n: int) -> np.ndarray:
    """Returns coefficients `(..., mode)` shifted by half a cell of an n-grid, c_k exp(i pi (k1 + k2) / n): the field
    `grid_fields` evaluates at i/n is then the original one at the cell centres (i + 1/2)/n; k1, k2 `(mode,)`."""
    return np.asarray(coef, np.complex128) * np.exp(1j * np.pi * (np.asarray(k1) + np.asarray(k2)) / n)


def basis_fields(coef, k1, k2, degree: int, start: float, length: float, times, n: int, current: bool = False):
    """Returns psi, u, v, each float64 `(..., time, ny, nx)`, of coefficients in the basis in time.

    On the cell centres z = ((i + 1/2)/n, (j + 1/2)/n) in model units, [..., t, j, i] at (x_i, y_j).
    `grid_fields` evaluates at i/n; shifting the coefficients by half a cell, c_k exp(i pi (k1 + k2)/n),
    moves its grid onto the centres (the uniform current is the same everywhere; its psi ramp is taken at i/n).

    Parameters
    ----------
    coef
        complex `(..., mode)` with mode = (current + spatial) * (degree + 1) (the order of `window_projection`,
        the current's degrees first when `current`).
    k1, k2
        `(spatial,)` periodic wavevectors
    degree, start, length
        the time basis
    times
        `(time,)` model times.
    current
        the basis has the uniform current (`with_current`).
    """
    k1, k2 = _check_modes(k1, k2)
    flags = None
    if current:
        k1, k2, flags = with_current(k1, k2)
    coef = np.asarray(coef, np.complex128)
    if coef.shape[-1] != k1.size * (degree + 1):
        raise ValueError(f"coef has {coef.shape[-1]} modes, the basis {k1.size} x {degree + 1}")
    mk1, mk2, _, basis = in_time(k1, k2, np.zeros(k1.size), degree, start, length, flags)
    shifted = at_cell_centres(coef, mk1, mk2, n).reshape(-1, coef.shape[-1])
    times = np.asarray(times, np.float64).ravel()
    with jax.enable_x64(True):
        fields = grid_fields(jnp.asarray(shifted), jnp.asarray(mk1, jnp.float64), jnp.asarray(mk2, jnp.float64),
                             jnp.zeros(mk1.size, jnp.float64), jnp.asarray(times), n, basis)
        fields = [np.asarray(a, np.float64) for a in fields]
    return tuple(a.reshape(*coef.shape[:-1], times.size, n, n) for a in fields)


def projection_limit(u, v, u_fit, v_fit) -> float:
    """Returns the relative L2 error sqrt(sum |w - w_fit|^2 / sum |w|^2) over all axes of `(...)` arrays."""
    u, v, u_fit, v_fit = (np.asarray(a, np.float64) for a in (u, v, u_fit, v_fit))
    return float(np.sqrt(np.sum((u - u_fit) ** 2 + (v - v_fit) ** 2) / np.sum(u**2 + v**2)))


def unresolved_variance(u, v, u_fit, v_fit) -> float:
    """Returns the mean of (w - w_fit)^2 over every axis and both components (per component, model units^2).

    The variance of the velocity the basis leaves out: lagda's linear method's representation error
    (its mean is zero: the residual is orthogonal to the fit, and a periodic velocity has no k = 0 part).
    """
    u, v, u_fit, v_fit = (np.asarray(a, np.float64) for a in (u, v, u_fit, v_fit))
    return float((np.mean((u - u_fit) ** 2) + np.mean((v - v_fit) ** 2)) / 2.0)


def _seconds(values) -> np.ndarray:
    """Returns CF times as float seconds: decoded datetime64 or raw 'seconds since ...' numbers."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.datetime64):
        return (values - values[0]) / np.timedelta64(1, "s") + 0.0
    return values.astype(np.float64)


def gridded_truth(ds, flows=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Returns the QG truth of a file in model units: psi, u, v `(flow, time, ny, nx)` on the cell centres and the
    model times `(time,)` (truth_time[0] is the release t = 0); flows as truth_in_basis's."""
    if flows is not None:
        ds = ds.isel(flow=np.atleast_1d(np.arange(ds.sizes["flow"])[flows]))
    L, T = float(ds.attrs["qg_L"]), float(ds.attrs["lagda_mapping_time_scale_s"])
    seconds = _seconds(ds["truth_time"].values)
    psi = np.asarray(ds["psi"].values, np.float64) * T / L**2
    u = np.asarray(ds["u"].values, np.float64) * T / L
    v = np.asarray(ds["v"].values, np.float64) * T / L
    return psi, u, v, (seconds - seconds[0]) / T


def truth_in_basis(ds, k1, k2, degree: int, flows=None, current: bool = False) -> dict:
    """Returns the QG truth of a file and its least-squares fit in the basis in time, model units.

    Parameters
    ----------
    ds
        the QG truth file as an xarray Dataset (`to_xarray`, or opened from disk).
    k1, k2
        `(spatial,)` periodic wavevectors
    degree
        Legendre degrees 0..degree over the window.
    flows
        None (all), or an index, slice or list of flows.
    current
        the basis also has the uniform current (first, `with_current`): its fit is that of the velocity's
        domain mean (`current_projection`), the background flow the drifters feel included.

    Returns
    -------
    dict
        dict: "coef" complex (flow, mode); "u", "v", "u_fit", "v_fit" (flow, time, ny, nx) model units;
        "limit" (flow,) `projection_limit` per flow; "times" (time,) model times (truth_time[0] is the
        release t = 0); "time_basis" the `TimeBasis` (start 0, length the last truth time); "k1", "k2"
        (mode,) expanded; "unresolved_variance" float over all flows.
    """
    psi, u, v, times = gridded_truth(ds, flows)
    length = float(times[-1])
    coef = window_projection(psi, times, k1, k2, degree, 0.0, length)
    flags, spatial = None, (np.asarray(k1), np.asarray(k2))
    if current:
        coef = np.concatenate([current_projection(u, v, times, degree, 0.0, length), coef], axis=-1)
        spatial = with_current(*spatial)
        flags = spatial[2]
    _, u_fit, v_fit = basis_fields(coef, k1, k2, degree, 0.0, length, times, psi.shape[-1], current)
    mk1, mk2, _, basis = in_time(spatial[0], spatial[1], np.zeros(spatial[0].size), degree, 0.0, length, flags)
    limit = np.array([projection_limit(u[f], v[f], u_fit[f], v_fit[f]) for f in range(u.shape[0])])
    return {"coef": coef, "u": u, "v": v, "u_fit": u_fit, "v_fit": v_fit, "limit": limit, "times": times,
            "time_basis": basis, "k1": mk1, "k2": mk2, "unresolved_variance": unresolved_variance(u, v, u_fit, v_fit)}


def climatology_prior(coef, k1, k2, degree: int) -> np.ndarray:
    """Returns the prior standard deviations a_m = sqrt(E|c_m|^2), float64 `(mode,)`, from climatology flows.

    The spectrum is taken to be isotropic and the same in every flow: a_m depends only on the
    wavenumber shell round(|k_m|) and the Legendre degree p_m, and a_m^2 is the mean of |c|^2 over
    every flow and every mode of that shell and degree. The coefficients' split convention (a half
    plane's whole pair, or a full set's minimum-norm half) carries into the estimate, so the prior
    matches coefficients of the same mode set (lagda's prior: c_m = a_m (xi + i eta) / sqrt 2).

    Parameters
    ----------
    coef
        complex `(flow, mode)` (e.g. `truth_in_basis(...)["coef"]`), mode = spatial * (degree + 1).
    k1, k2
        `(spatial,)` wavevectors, or the expanded `(mode,)` ones.
    degree
        the Legendre degree of the basis.
    """
    coef = np.asarray(coef, np.complex128)
    coef = coef.reshape(-1, coef.shape[-1])
    k1, k2 = np.asarray(k1).ravel(), np.asarray(k2).ravel()
    reps = degree + 1
    if k1.size * reps != coef.shape[-1]:
        if k1.size != coef.shape[-1]:
            raise ValueError(f"coef has {coef.shape[-1]} modes, k has {k1.size} with degree {degree}")
        k1, k2 = k1[::reps], k2[::reps]  # the expanded wavevectors
    shell = np.repeat(np.rint(np.hypot(k1, k2)).astype(np.int64), reps)
    p = np.tile(np.arange(reps), k1.size)
    power = np.mean(np.abs(coef) ** 2, axis=0)  # (mode,)
    group = shell * reps + p
    _, index = np.unique(group, return_inverse=True)
    pooled = np.bincount(index, weights=power) / np.bincount(index)
    return np.sqrt(pooled[index])
