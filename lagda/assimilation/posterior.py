"""Posterior over Fourier coefficients, as weighted samples per field (BRIEF-ASSIM-CONTRACT).

Every DA method returns a `Posterior`: particle methods their particles and weights, Gaussian
methods (linear, var's Laplace approximation) samples drawn from the Gaussian with equal
weights, retrieval its top candidates as members (and again as `candidates`).
"""

from __future__ import annotations

import dataclasses

import numpy as np


def _weighted_moments(values, weights):
    """Returns the weighted mean and std over members of real `values` (field, member, mode)."""
    mean = np.einsum("fm,fmk->fk", weights, values)
    var = np.einsum("fm,fmk->fk", weights, (values - mean[:, None, :]) ** 2)
    return mean, np.sqrt(np.maximum(var, 0.0))


@dataclasses.dataclass(frozen=True)
class Posterior:
    """Posterior over coefficients for each field, as weighted samples.

    Attributes:
        samples: complex128 `(field, member, mode)` coefficient samples.
        weights: float64 `(field, member)`, each row sums to 1.
        method: name of the DA method that produced it.
        candidates: retrieval only, complex `(field, rank, mode)` best candidates.
        candidate_weights: retrieval only, float `(field, rank)`.
        seconds: wall seconds spent per field `(field,)`.
    """

    samples: np.ndarray
    weights: np.ndarray
    method: str
    candidates: np.ndarray | None = None
    candidate_weights: np.ndarray | None = None
    seconds: np.ndarray | None = None

    def __post_init__(self):
        s, w = np.asarray(self.samples), np.asarray(self.weights)
        if s.ndim != 3 or w.shape != s.shape[:2]:
            raise ValueError(f"Posterior: samples {s.shape} must be (field, member, mode) and weights {w.shape} (field, member)")

    @property
    def n_field(self) -> int:
        """Returns the number of fields."""
        return int(np.shape(self.samples)[0])

    @property
    def mean(self) -> np.ndarray:
        """Returns the weighted posterior mean, complex `(field, mode)`."""
        w = np.asarray(self.weights, dtype=np.float64)
        return np.einsum("fm,fmk->fk", w, np.asarray(self.samples, dtype=np.complex128))

    @property
    def std_re(self) -> np.ndarray:
        """Returns the weighted std of Re c, float `(field, mode)`."""
        return _weighted_moments(np.real(self.samples).astype(np.float64), np.asarray(self.weights, np.float64))[1]

    @property
    def std_im(self) -> np.ndarray:
        """Returns the weighted std of Im c, float `(field, mode)`."""
        return _weighted_moments(np.imag(self.samples).astype(np.float64), np.asarray(self.weights, np.float64))[1]
