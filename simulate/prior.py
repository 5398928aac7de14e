"""The prior over Fourier coefficients and the dataset's random frequencies.

Coefficients: c_k = a_k (xi + i eta) / sqrt(2), xi, eta ~ N(0, 1) independent, so
E|c_k|^2 = a_k^2, with spectrum a_k = A (1 + |k|^2)^(-spectrum_exponent). The amplitude A is
set so that the expected domain-mean squared speed equals rms_speed^2:
E <|w|^2> = sum_k (2 pi |k|)^2 a_k^2 / 2 (each mode, with or without its partner -k in the
set, contributes half its power because psi = Re(...)).

Frequencies: omega_k ~ Uniform(-omega_max, omega_max), drawn once per dataset.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simulate.flow import TWO_PI


def spectrum(k1, k2, spectrum_exponent: float, rms_speed: float) -> np.ndarray:
    """Returns the prior standard deviations a_k = sqrt(E|c_k|^2), `(mode,)`, float64.

    Parameters
    ----------
    k1, k2 : array_like
        Integer `(mode,)` wavevectors.
    spectrum_exponent : float
        The decay exponent of a_k = A (1 + |k|^2)^(-spectrum_exponent).
    rms_speed : float
        The expected domain-mean RMS speed, domain lengths per model time unit (module docstring).

    Returns
    -------
    numpy.ndarray
        float64 `(mode,)`.

    Raises
    ------
    ValueError
        If every mode has k = 0 (no velocity to scale) or `rms_speed` < 0.
    """
    k1 = np.asarray(k1, np.float64)
    k2 = np.asarray(k2, np.float64)
    k_squared = k1**2 + k2**2
    shape = (1.0 + k_squared) ** (-spectrum_exponent)
    power = np.sum((TWO_PI**2) * k_squared * shape**2) / 2.0
    if power == 0.0:
        raise ValueError("the mode set has only k = (0, 0), which carries no velocity")
    if rms_speed < 0:
        raise ValueError(f"rms_speed must be >= 0, got {rms_speed}")
    return shape * (rms_speed / np.sqrt(power))


def draw_coefficients(key, scale, n_samples: int, dtype=jnp.complex64):
    """Returns prior draws of the coefficients, complex `(sample, mode)`.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    scale : array_like
        `(mode,)` standard deviations a_k from `spectrum`.
    n_samples : int
        Number of fields.
    dtype : complex dtype, default complex64
        Of the result.

    Returns
    -------
    jax.Array
        Complex `(sample, mode)`.
    """
    real_dtype = jnp.finfo(dtype).dtype
    # drawn flat and reshaped: the same numbers as a (2, sample, mode) draw, but the flat
    # threefry compiles faster on CPU
    xi = jax.random.normal(key, (2 * n_samples * len(scale),), real_dtype).reshape(2, n_samples, len(scale))
    scale = jnp.asarray(scale, real_dtype) / jnp.sqrt(jnp.asarray(2.0, real_dtype))
    return ((xi[0] + 1j * xi[1]) * scale[None, :]).astype(dtype)


def draw_frequencies(key, n_modes: int, omega_max: float, steady: bool = False) -> np.ndarray:
    """Returns the frequencies omega_k, float64 `(mode,)`; all zero for a steady field."""
    if steady:
        return np.zeros(n_modes)
    return np.asarray(jax.random.uniform(key, (n_modes,), jnp.float32, -omega_max, omega_max), np.float64)
