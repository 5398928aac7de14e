"""Closed forms of section 5 (Gaussian setting) for linear encoders `g_u = G u`, `g_v = H v`.

The data law is `mu = N(0, C)` on `(u, v) in R^{n_u} x R^{n_v}`, `C` given as one
`(n_u + n_v, n_u + n_v)` matrix whose leading block is `C_uu`. Parameters:
`A = G^T H` `(n_u, n_v)` and, for the L2 tilting (46), `B = G^T G` `(n_u, n_u)`.
Everything here is float64 NumPy: these are reference values, not training code.

Note on Appendix D, proof of Theorem 5.1: the population loss (42) is
`-Tr(A C_vu) + (1/2) Tr(A^T C_uu A C_vv)` (each log-partition term is
`(1/2)(1/2) Tr(...)`); the displayed line without the `1/2` is a typo, and only
the version with it has the stated minimiser (43).
"""
from __future__ import annotations

import numpy as np


def split_covariance(cov: np.ndarray, n_u: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the blocks `(C_uu, C_uv, C_vv)` of the joint covariance.

    Parameters
    ----------
    cov
        `(n_u + n_v, n_u + n_v)` symmetric positive-definite covariance.
    n_u
        dimension of u.

    Returns
    -------
    tuple[np.ndarray, np.ndarray, np.ndarray]
        `C_uu` `(n_u, n_u)`, `C_uv` `(n_u, n_v)`, `C_vv` `(n_v, n_v)`.

    Raises
    ------
    ValueError
        if `cov` is not square or `n_u` is not in `[1, d-1]`.
    """
    cov = np.asarray(cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not 0 < n_u < cov.shape[0]:
        raise ValueError(f"expected square covariance (d, d) with 0 < n_u < d; got {cov.shape} and n_u={n_u}")
    return cov[:n_u, :n_u], cov[:n_u, n_u:], cov[n_u:, n_u:]


def sym_power(matrix: np.ndarray, power: float) -> np.ndarray:
    """Returns `matrix^power` of a symmetric positive-definite matrix (via eigh)."""
    eigval, eigvec = np.linalg.eigh(matrix)
    return (eigvec * eigval**power) @ eigvec.T


def truncate_rank(matrix: np.ndarray, rank: int | None) -> np.ndarray:
    """Returns `matrix_r`, the best rank-`r` Frobenius approximation (truncated SVD, section 1.5)."""
    if rank is None:
        return matrix
    left, sing, right_t = np.linalg.svd(matrix, full_matrices=False)
    sing = np.where(np.arange(sing.size) < rank, sing, 0.0)
    return (left * sing) @ right_t


def whitened_cross_covariance(cov: np.ndarray, n_u: int) -> np.ndarray:
    """Returns `C_uu^{-1/2} C_uv C_vv^{-1/2}` `(n_u, n_v)`; its singular values are the canonical correlations."""
    c_uu, c_uv, c_vv = split_covariance(cov, n_u)
    return sym_power(c_uu, -0.5) @ c_uv @ sym_power(c_vv, -0.5)


def joint_shrinkage(sigma: np.ndarray) -> np.ndarray:
    """Returns `h(sigma) = ((1 + 4 sigma^2)^{1/2} - 1) / (2 sigma)`, Definition 5.5 (`h(0) = 0`).

    The positive root of `h^2 sigma + h - sigma = 0` (proof of Theorem 5.6).
    """
    sigma = np.asarray(sigma, dtype=float)
    safe = np.where(sigma > 0, sigma, 1.0)
    return np.where(sigma > 0, (np.sqrt(1.0 + 4.0 * safe**2) - 1.0) / (2.0 * safe), 0.0)


def cond_minimizer(cov: np.ndarray, n_u: int, rank: int | None = None) -> np.ndarray:
    """Returns the minimiser `A*` of the conditional loss (42), Theorem 5.1.

    `A* = C_uu^{-1} C_uv C_vv^{-1}` (43); with `rank = r`:
    `A*(r) = C_uu^{-1/2} (C_uu^{-1/2} C_uv C_vv^{-1/2})_r C_vv^{-1/2}` (44).

    Parameters
    ----------
    cov
        `(d, d)` joint covariance.
    n_u
        dimension of u.
    rank
        rank constraint `r` (= embedding dimension `n_e`) or None.

    Returns
    -------
    np.ndarray
        `(n_u, n_v)` matrix.
    """
    c_uu, _, c_vv = split_covariance(cov, n_u)
    core = truncate_rank(whitened_cross_covariance(cov, n_u), rank)
    return sym_power(c_uu, -0.5) @ core @ sym_power(c_vv, -0.5)


def joint_minimizer(cov: np.ndarray, n_u: int, rank: int | None = None) -> np.ndarray:
    """Returns the minimiser `A*` of the joint loss (52), Theorem 5.6.

    With `U Sigma V^T` the SVD of `C_uu^{-1/2} C_uv C_vv^{-1/2}`:
    `A* = C_uu^{-1/2} U h(Sigma) V^T C_vv^{-1/2}` (53), and with `rank = r`
    `C_uu^{-1/2} (U h(Sigma) V^T)_r C_vv^{-1/2}` (54).

    Parameters
    ----------
    cov
        `(d, d)` joint covariance.
    n_u
        dimension of u.
    rank
        rank constraint `r` or None.

    Returns
    -------
    np.ndarray
        `(n_u, n_v)` matrix.
    """
    c_uu, _, c_vv = split_covariance(cov, n_u)
    left, sing, right_t = np.linalg.svd(whitened_cross_covariance(cov, n_u), full_matrices=False)
    core = truncate_rank((left * joint_shrinkage(sing)) @ right_t, rank)
    return sym_power(c_uu, -0.5) @ core @ sym_power(c_vv, -0.5)


def conditional_u_given_v(cov: np.ndarray, n_u: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns the true u|v conditional `(C_uv C_vv^{-1}, C_{u|v})`, eq. (37a): mean map and covariance."""
    c_uu, c_uv, c_vv = split_covariance(cov, n_u)
    mean_map = c_uv @ np.linalg.inv(c_vv)
    return mean_map, c_uu - mean_map @ c_uv.T


def one_sided_minimizer(cov: np.ndarray, n_u: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns `(A*, B*)` minimising the one-sided L2 loss `L_cond(A, B; 2, 0)`, Theorem 5.3.

    `A* = C_{u|v}^{-1} C_uv C_vv^{-1}` (49a),
    `B* = C_uu^{-1} C_uv C_{v|u}^{-1} C_vu C_uu^{-1}` (49b).

    Parameters
    ----------
    cov
        `(d, d)` joint covariance.
    n_u
        dimension of u.

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        `A*` `(n_u, n_v)` and `B*` `(n_u, n_u)`.
    """
    c_uu, c_uv, c_vv = split_covariance(cov, n_u)
    _, c_u_given_v = conditional_u_given_v(cov, n_u)
    c_v_given_u = c_vv - c_uv.T @ np.linalg.solve(c_uu, c_uv)
    c_uu_inv = np.linalg.inv(c_uu)
    a_star = np.linalg.solve(c_u_given_v, c_uv) @ np.linalg.inv(c_vv)
    b_star = c_uu_inv @ c_uv @ np.linalg.solve(c_v_given_u, c_uv.T) @ c_uu_inv
    return a_star, b_star


def l2_model_conditional_u_given_v(a: np.ndarray, b: np.ndarray, c_uu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns the learned u|v conditional of model (46): `((B + C_uu^{-1})^{-1} A, (B + C_uu^{-1})^{-1})`,
    eq. (48a)."""
    precision = b + np.linalg.inv(c_uu)
    return np.linalg.solve(precision, a), np.linalg.inv(precision)


def population_cond_loss(a: np.ndarray, cov: np.ndarray, n_u: int) -> float:
    """Returns `L_cond(A)` of eq. (42) in closed form: `-Tr(A C_vu) + (1/2) Tr(A^T C_uu A C_vv)`."""
    c_uu, c_uv, c_vv = split_covariance(cov, n_u)
    return float(-np.trace(a @ c_uv.T) + 0.5 * np.trace(a.T @ c_uu @ a @ c_vv))


def population_joint_loss(a: np.ndarray, cov: np.ndarray, n_u: int) -> float:
    """Returns `L_joint(A)` of eq. (52): `-Tr(A C_vu) - (1/2) log|I - C_vv A^T C_uu A|`, or inf.

    Infinite when `E_{mu_u x mu_v} exp(<u, A v>)` diverges, i.e. when the whitened
    `C_uu^{1/2} A C_vv^{1/2}` has a singular value `>= 1`.
    """
    c_uu, c_uv, c_vv = split_covariance(cov, n_u)
    whitened = sym_power(c_uu, 0.5) @ a @ sym_power(c_vv, 0.5)
    sing = np.linalg.svd(whitened, compute_uv=False)
    if np.max(sing) >= 1.0:
        return float("inf")
    return float(-np.trace(a @ c_uv.T) - 0.5 * np.sum(np.log1p(-(sing**2))))
