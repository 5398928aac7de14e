"""The Gaussian posterior of y = G x + e, x ~ N(0, D), e ~ N(0, s^2 I), and its evidence.

    cov = (G^T G / s^2 + D^-1)^-1,  mean = cov G^T y / s^2 = D G^T (G D G^T + s^2 I)^-1 y,
computed in prior-whitened variables from an SVD of G D^{1/2} (or, for tall G with noise well
above rounding, from its Gram matrix), with s^2 chosen by empirical Bayes (maximum marginal
likelihood of y) unless given; and samples of a Gaussian posterior (`gaussian_estimate`).
"""

from __future__ import annotations

import jax
import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotri, dtrtri
from scipy.optimize import minimize_scalar

from lagda.assimilation.model import to_complex
from lagda.assimilation.posterior import FieldEstimate

# the normal equations G^T G resolve noise variances down to this many float64 epsilons of
# max(s_max^2, |y|^2) (their rounding of s^2 and of |y|^2 - |z|^2, with a margin of 1e3)
GRAM_MARGIN = 1e3 * np.finfo(np.float64).eps
# noise variances searched by empirical Bayes, relative to mean(y^2): down to float64 rounding
# (a relative 1e-16 in positions is ~1e-30 of mean(y^2) in velocities on exact tracks)
EVIDENCE_RANGE = (1e-30, 1.0)


def linear_posterior(g, y, prior_var, noise_var=None, n_grid: int = 41):
    """Returns the Gaussian posterior (mean `(p,)`, cov `(p, p)`, noise_var) of y = G x + e.

    Whitened with x = D^{1/2} w and the SVD G D^{1/2} = U diag(s) V^T (`whitened_svd`):
    mean_w = V diag(s / (s^2 + noise)) U^T y,  cov_w = V diag(noise / (s^2 + noise)) V^T.
    Without noise_var, it maximises the log marginal likelihood of y ~ N(0, G D G^T + noise I)
    over noise (`_evidence_maximum`: EVIDENCE_RANGE of mean(y^2), then refined).

    Parameters
    ----------
    g
        `(n, p)` design
    y
        `(n,)` data
    prior_var
        `(p,)` diagonal prior covariance D.

    Raises
    ------
    ValueError
        on mismatched shapes or no data.
    """
    if g.ndim != 2 or y.shape != (g.shape[0],) or prior_var.shape != (g.shape[1],) or g.shape[0] == 0:
        raise ValueError(f"expected g (n, p), y (n,), prior_var (p,) with n > 0, got {g.shape}, {y.shape}, "
                         f"{prior_var.shape}")
    root, s, vt, z, rest = whitened_svd(g, y, prior_var, noise_var)
    if noise_var is None:
        noise_var, _ = _evidence_maximum(s, z, rest, y, n_grid)
        if noise_var < _gram_floor(s, y):  # below what the normal equations resolve: redo with QR
            root, s, vt, z, rest = whitened_svd(g, y, prior_var, 0.0)
            noise_var, _ = _evidence_maximum(s, z, rest, y, n_grid)
    mean_w = vt.T @ (s * z / (s**2 + noise_var))
    cov_w = (vt.T * (noise_var / (s**2 + noise_var))[None, :]) @ vt
    return root * mean_w, root[:, None] * cov_w * root[None, :], noise_var


def log_evidence(g, y, prior_var, noise_var=None, n_grid: int = 41) -> float:
    """Returns log N(y; 0, G D G^T + s^2 I) up to a constant, at noise_var or maximised over it.

    The same marginal likelihood that `linear_posterior` maximises over s^2; comparing it
    between priors D (and prior means, through y - G m) selects the prior the data support.
    """
    _, s, _, z, rest = whitened_svd(g, y, prior_var, noise_var)
    if noise_var is None:
        noise_var, best = _evidence_maximum(s, z, rest, y, n_grid)
        if noise_var >= _gram_floor(s, y):
            return best
        _, s, _, z, rest = whitened_svd(g, y, prior_var, 0.0)
        return _evidence_maximum(s, z, rest, y, n_grid)[1]
    return _log_marginal(s, z, rest, len(y), noise_var)


def noise_quantiles(g, y, prior_var, quantiles=(0.05, 0.5, 0.95), n_grid: int = 1000) -> np.ndarray:
    """Returns `quantiles` of the posterior of the noise std s of y = G x + e under a uniform prior on s.

    With fewer informative data than parameters the marginal likelihood N(y; 0, G D G^T + s^2 I) is
    flat in s below the weakest signal direction (the smallest singular value of G D^{1/2}): it cannot
    tell noise from signal there, so its maximum (`linear_posterior`'s empirical Bayes) falls to the
    floor whatever the true noise. A uniform prior on the standard deviation over [0, rms(y)] (no more
    noise than data; not the log-uniform, whose infinite mass near 0 would take that flat part to the
    floor too) keeps the estimate on the scale the data allow; where the evidence is peaked (many data)
    its median is the maximum's to within its width. The integral is a log grid over EVIDENCE_RANGE of
    mean(y^2), then a fine grid where the posterior weight lies.

    Parameters
    ----------
    g
        `(n, p)` design
    y
        `(n,)` data
    prior_var
        `(p,)` diagonal prior covariance D
    quantiles
        probabilities in (0, 1).

    Returns
    -------
    np.ndarray
        `(len(quantiles),)` noise stds.
    """
    _, s, _, z, rest = whitened_svd(g, y, prior_var, 0.0)  # the SVD route: resolves the smallest noise
    n, scale = len(y), max(float(np.mean(y**2)), 1e-300)

    def log_weight(log_v):  # log [p(y | s) p(s) ds / dlog v] with p(s) uniform: + log s
        return np.array([_log_marginal(s, z, rest, n, np.exp(v)) for v in log_v]) + 0.5 * log_v

    coarse = np.linspace(np.log(EVIDENCE_RANGE[0]), np.log(EVIDENCE_RANGE[1]), 121) + np.log(scale)
    w = log_weight(coarse)
    inside = np.flatnonzero(w > w.max() - 20.0)  # outside, under e^-20 of the peak's weight per unit log v
    step = coarse[1] - coarse[0]
    fine = np.linspace(max(coarse[inside[0]] - step, coarse[0]), min(coarse[inside[-1]] + step, coarse[-1]), n_grid)
    w = log_weight(fine)
    w = np.exp(w - w.max())
    cumulative = np.concatenate([[0.0], np.cumsum((w[1:] + w[:-1]) / 2.0)])  # trapezoids
    return np.exp(0.5 * np.interp(np.asarray(quantiles) * cumulative[-1], cumulative, fine))


def _gram_floor(s, y) -> float:
    """Returns the smallest noise variance the normal-equation route of `whitened_svd` resolves."""
    return GRAM_MARGIN * max(float(np.max(s, initial=0.0)) ** 2, float(y @ y))


def whitened_svd(g, y, prior_var, noise_var=None):
    """Returns (D^{1/2}, s `(p,)`, V^T `(p, p)`, z = U^T y `(p,)`, |y - U z|^2) of G D^{1/2} = U diag(s) V^T.

    s, V and z are zero-padded to p when there are fewer data than parameters. Tall G (n > 4p)
    goes through the normal equations (one matrix product, the cheapest route for long noisy
    tracks) unless noise_var is given below `_gram_floor`; the caller redoes it with
    noise_var 0 when the estimated noise falls below that floor. Then the SVD, with the part of
    y outside the range of U summed directly, not as |y|^2 - |z|^2, which would cancel to
    rounding (~1e-16 |y|^2) and hide noise variances below that on exact tracks.
    """
    root = np.sqrt(prior_var)
    scaled = np.ascontiguousarray(g * root[None, :])
    if g.shape[0] > 4 * g.shape[1] and noise_var != 0.0:
        eigval, eigvec = np.linalg.eigh(dsyrk(1.0, scaled, trans=1), UPLO="U")  # G^T G, upper triangle
        s, vt = np.sqrt(np.clip(eigval[::-1], 0.0, None)), eigvec[:, ::-1].T
        if noise_var is None or noise_var >= _gram_floor(s, y):
            resolved = s**2 > GRAM_MARGIN * s[0] ** 2  # weaker directions: no information at this precision
            s = np.where(resolved, s, 0.0)
            z = np.where(resolved, (vt @ (scaled.T @ y)) / np.where(resolved, s, 1.0), 0.0)
            return root, s, vt, z, max(float(y @ y - z @ z), 0.0)
    u, s, vt = np.linalg.svd(scaled, full_matrices=False)
    uy = u.T @ y
    rest = float(np.sum((y - u @ uy) ** 2))
    s = np.concatenate([s, np.zeros(len(root) - len(s))])
    vt = np.concatenate([vt, _complement(vt, len(root))], axis=0)
    z = np.concatenate([uy, np.zeros(len(root) - u.shape[1])])
    return root, s, vt, z, rest


def _log_marginal(s, z, rest: float, n: int, noise_var: float) -> float:
    """Returns -1/2 [n log v + sum log(1 + s^2 / v) + rest / v + sum z^2 / (s^2 + v)], v = noise_var."""
    return -0.5 * (n * np.log(noise_var) + np.sum(np.log1p(s**2 / noise_var)) + rest / noise_var
                   + np.sum(z**2 / (s**2 + noise_var)))


def _evidence_maximum(s, z, rest: float, y, n_grid: int) -> tuple[float, float]:
    """Returns (noise_var, log evidence) at the maximum: a log grid over EVIDENCE_RANGE,
    refined between its neighbours."""
    n, scale = len(y), max(float(np.mean(y**2)), 1e-300)
    log_grid_v = np.linspace(np.log(EVIDENCE_RANGE[0]), np.log(EVIDENCE_RANGE[1]), n_grid) + np.log(scale)
    log_ml = [_log_marginal(s, z, rest, n, np.exp(v)) for v in log_grid_v]
    best = int(np.argmax(log_ml))
    low, high = log_grid_v[max(best - 1, 0)], log_grid_v[min(best + 1, n_grid - 1)]
    found = minimize_scalar(lambda v: -_log_marginal(s, z, rest, n, np.exp(v)), bounds=(low, high), method="bounded",
                            options={"xatol": 1e-3})
    if -found.fun > log_ml[best]:
        return float(np.exp(found.x)), float(-found.fun)
    return float(np.exp(log_grid_v[best])), float(log_ml[best])


def _complement(vt, p: int) -> np.ndarray:
    """Returns an orthonormal basis `(p - r, p)` of the complement of the rows of vt `(r, p)`."""
    if vt.shape[0] >= p:
        return np.zeros((0, p))
    q, _ = np.linalg.qr(np.concatenate([vt.T, np.eye(p)], axis=1))
    return q[:, vt.shape[0]:p].T


def gaussian_samples(key, mean, cov, n: int) -> np.ndarray:
    """Returns n antithetic draws of N(mean, cov) over x as complex coefficients `(member, mode)`.

    Draws come in pairs mean +- L xi (plus the mean itself when n is odd), so the sample
    mean equals `mean` exactly and Posterior.mean is the exact posterior mean.
    """
    cov = (cov + cov.T) / 2.0
    try:  # a Cholesky root: a tenth of an eigendecomposition's time
        root = cholesky(cov, lower=True)
    except np.linalg.LinAlgError:  # semidefinite (a direction of zero spread): the eigenvalues clipped at zero
        eigval, eigvec = np.linalg.eigh(cov)
        root = eigvec * np.sqrt(np.clip(eigval, 0.0, None))[None, :]
    xi = np.asarray(jax.random.normal(key, (n // 2, len(mean))), np.float64)
    xi = np.concatenate([xi, -xi, np.zeros((n % 2, len(mean)))], axis=0)
    return to_complex(mean[None, :] + xi @ root.T)


def gaussian_estimate(key, mean, cov, members: int, info=None) -> FieldEstimate:
    """Returns a FieldEstimate of equal-weight antithetic samples from N(mean, cov), and cov itself (symmetrised)."""
    samples = gaussian_samples(key, mean, cov, members)
    cov = np.asarray(cov, np.float64)
    return FieldEstimate(samples, np.full(members, 1.0 / members), info=dict(info or {}), cov=(cov + cov.T) / 2.0)


def mixture_estimate(key, means, covs, log_weights, members: int, info=None) -> FieldEstimate:
    """Returns a FieldEstimate of the Gaussian mixture sum_b w_b N(means[b], covs[b]), w ∝ exp(log_weights).

    Component b gets n_b = members w_b samples (largest remainders; a component whose share rounds to none is
    left out and the others' weights renormalised), antithetic as in `gaussian_estimate`, each weighing
    w_b / n_b: the weighted sample mean is the mixture's mean over the kept components exactly.
    means: `(component, 2K)`; covs: `(component, 2K, 2K)`; log_weights: `(component,)`.
    """
    log_weights = np.asarray(log_weights, np.float64)
    weights = np.exp(log_weights - np.max(log_weights))
    weights /= weights.sum()
    counts = np.floor(members * weights).astype(int)
    counts[np.argsort(-(members * weights - counts))[: members - counts.sum()]] += 1
    kept = np.flatnonzero(counts > 0)
    total = weights[kept].sum()
    samples = [gaussian_samples(jax.random.fold_in(key, int(b)), means[b], covs[b], int(counts[b])) for b in kept]
    sample_weights = [np.full(counts[b], weights[b] / total / counts[b]) for b in kept]
    return FieldEstimate(np.concatenate(samples), np.concatenate(sample_weights), info=dict(info or {}))


def _scaled_factor(gram, prior_var):
    """Returns (D^1/2 `(p,)`, lower Cholesky factor `(p, p)` of B = I + D^1/2 gram D^1/2) for gram `(p, p)` and
    prior_var D `(p,)`; B is built in one buffer and factored in place (the search factors it hundreds of times).
    Raises LinAlgError for a gram that is not positive semidefinite."""
    root = np.sqrt(np.asarray(prior_var, np.float64))

    def identity_plus():
        b = np.multiply(gram, root[:, None])
        b *= root[None, :]
        b.flat[:: len(root) + 1] += 1.0
        return b

    return root, _identity_plus_factor(identity_plus)


def _rows_factor(rows, prior_var):
    """Returns (H = G D^1/2 `(n, p)`, lower Cholesky factor `(n, n)` of S = I + H H^T = I + G D G^T) for whitened
    rows G `(n, p)` and prior_var D `(p,)`. Raises LinAlgError for non-finite rows."""
    h = np.asarray(rows, np.float64) * np.sqrt(np.asarray(prior_var, np.float64))[None, :]

    def identity_plus():
        s = dsyrk(1.0, h.T, trans=1)  # H H^T in the upper triangle, zeros below (h.T: Fortran order, no copy)
        s += np.triu(s, 1).T
        s.flat[:: len(s) + 1] += 1.0
        return s

    return h, _identity_plus_factor(identity_plus)


def _identity_plus_factor(identity_plus):
    """Returns the lower Cholesky factor of the symmetric matrix identity_plus() = I + (a positive semidefinite
    matrix), eigenvalues >= 1: factored in place; if rounding made it indefinite, made again, symmetrised and
    factored with a jitter. Raises LinAlgError when that fails too."""
    try:  # the matrix is symmetric, so its transpose is the same in Fortran order: LAPACK factors it without a copy
        return cholesky(identity_plus().T, lower=True, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:  # rounding in a gram of huge prior variances: symmetrised, with a jitter
        b = identity_plus()
        sym = 0.5 * (b + b.T)
        sym.flat[:: len(sym) + 1] += 1e-10 * float(np.max(np.abs(np.diag(sym))))
        try:
            return cholesky(sym, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            raise np.linalg.LinAlgError("the normal equations are not positive definite (the data's gram matrix "
                                        "is not positive semidefinite: non-finite or inconsistent tracks)") from None


def normal_posterior(gram, rhs, prior_var, covariance: bool = True):
    """Returns the posterior mean `(p,)` and, with `covariance`, covariance `(p, p)` (else None) of whitened data from
    its normal equations gram = G^T G, rhs = G^T y under the prior N(0, diag prior_var): (G^T G + D^-1)^-1 G^T y
    and (G^T G + D^-1)^-1, as D^1/2 B^-1 D^1/2 with B = I + D^1/2 G^T G D^1/2 (eigenvalues >= 1: a Cholesky factor at
    any prior scale)."""
    root, chol = _scaled_factor(gram, prior_var)
    mean = root * cho_solve((chol, True), root * rhs, check_finite=False)
    if not covariance:
        return mean, None
    inv, status = dpotri(chol, lower=1)  # B^-1 from its factor in the lower triangle (a third of a solve against I)
    if status != 0:
        raise np.linalg.LinAlgError(f"inverse from the Cholesky factor failed (LAPACK info {status})")
    cov = np.tril(inv)
    cov += np.tril(cov, -1).T
    cov *= root[:, None]
    cov *= root[None, :]
    return mean, cov


def normal_log_evidence(gram, rhs, yy: float, prior_var, gradient: bool = False):
    """Returns log N(y; 0, I + G D G^T) - log N(y; 0, I) of whitened data from its normal equations, and with
    `gradient` also its derivative `(p,)` with respect to log D.

    gram = G^T G `(p, p)`, rhs = G^T y `(p,)` and yy = y^T y of data whitened against its error covariance (so the
    error is N(0, I)); prior_var: `(p,)` diagonal D. With B = I + D^1/2 G D^1/2 (eigenvalues >= 1: a Cholesky
    factor at any prior scale) and z = D^1/2 G^T y, the log ratio to the zero-signal model (the same error, no
    signal) is (z^T B^-1 z - log det B) / 2; adding -(yy + log det C + n log 2 pi) / 2 gives the log evidence.
    Its derivative in log D_i is (m_i^2 / D_i + Sigma_ii / D_i - 1) / 2, m and Sigma the posterior mean and
    covariance (MacKay's), from the inverse factor. Raises LinAlgError for a gram that is not positive semidefinite.
    """
    root, chol = _scaled_factor(gram, prior_var)
    w = solve_triangular(chol, root * rhs, lower=True, check_finite=False)  # L^-1 z: z^T B^-1 z = |w|^2
    ratio = 0.5 * float(w @ w) - float(np.sum(np.log(np.diag(chol))))
    if not gradient:
        return ratio
    inv, status = dtrtri(chol, lower=1)  # L^-1 (B^-1 = L^-T L^-1), a third of a triangular solve's flops
    if status != 0:
        raise np.linalg.LinAlgError(f"triangular inverse failed (LAPACK info {status})")
    inv = np.tril(inv)
    u = inv.T @ w  # B^-1 z = D^-1/2 m
    return ratio, 0.5 * (u**2 + np.sum(inv**2, axis=0) - 1.0)


def rows_log_evidence(rows, values, prior_var, gradient: bool = False):
    """Returns `normal_log_evidence` of whitened data from the data themselves: rows G `(n, p)`, values y `(n,)`,
    prior_var D `(p,)`; with `gradient` also its derivative `(p,)` with respect to log D.

    The same quantity through S = I + G D G^T `(n, n)` in place of B `(p, p)` (det S = det B, and z^T B^-1 z =
    y^T y - y^T S^-1 y): cheaper when there are fewer rows than unknowns. With H = G D^1/2, S = L L^T and
    a = S^-1 y, the derivative in log D_i is ((H^T a)_i^2 - |L^-1 h_i|^2) / 2 (MacKay's, as there).
    Raises LinAlgError for non-finite rows.
    """
    values = np.asarray(values, np.float64)
    h, chol = _rows_factor(rows, prior_var)
    w = solve_triangular(chol, values, lower=True, check_finite=False)  # L^-1 y: y^T S^-1 y = |w|^2
    ratio = 0.5 * float(values @ values - w @ w) - float(np.sum(np.log(np.diag(chol))))
    if not gradient:
        return ratio
    a = solve_triangular(chol, w, lower=True, trans=1, check_finite=False)  # S^-1 y
    projected = solve_triangular(chol, h, lower=True, check_finite=False)  # L^-1 H
    return ratio, 0.5 * ((h.T @ a) ** 2 - np.sum(projected**2, axis=0))


def rows_posterior_mean(rows, values, prior_var):
    """Returns `normal_posterior`'s mean `(p,)` from the whitened rows G `(n, p)` and values y `(n,)` themselves:
    D G^T (I + G D G^T)^-1 y, cheaper when there are fewer rows than unknowns. Raises LinAlgError for
    non-finite rows."""
    h, chol = _rows_factor(rows, prior_var)
    a = cho_solve((chol, True), np.asarray(values, np.float64), check_finite=False)
    return np.sqrt(np.asarray(prior_var, np.float64)) * (h.T @ a)
