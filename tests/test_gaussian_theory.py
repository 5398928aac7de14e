"""Section 5 closed forms (lagda.learning.gaussian) and the --quick Gaussian experiment."""
import csv
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.learning import gaussian, losses


@pytest.fixture(scope="module")
def experiment():
    from experiments.learning import gaussian_theory

    return gaussian_theory


@pytest.fixture(scope="module")
def problem(experiment):
    return experiment.random_6d(seed=0)


# ---------------------------------------------------------------- closed forms

def test_h_is_the_positive_root_of_the_stationarity_equation():
    sigma = np.linspace(0.01, 1.0, 50)
    h = gaussian.joint_shrinkage(sigma)
    np.testing.assert_allclose(h**2 * sigma + h - sigma, 0.0, atol=1e-14)  # proof of Thm 5.6
    assert np.all((h >= 0) & (h < sigma))
    np.testing.assert_allclose(gaussian.joint_shrinkage(1.0), (math.sqrt(5) - 1) / 2, rtol=1e-14)


def test_problem_has_the_prescribed_canonical_correlations(problem):
    cov, n_u = problem
    sing = np.linalg.svd(gaussian.whitened_cross_covariance(cov, n_u), compute_uv=False)
    np.testing.assert_allclose(sing, [0.6, 0.4, 0.2], rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(cov) > 0)


@pytest.mark.parametrize(
    "minimizer, population_loss",
    [(gaussian.cond_minimizer, gaussian.population_cond_loss),
     (gaussian.joint_minimizer, gaussian.population_joint_loss)],
    ids=["cond_thm_5_1", "joint_thm_5_6"],
)
@pytest.mark.parametrize("rank", [None, 2, 1], ids=["full", "rank2", "rank1"])
def test_closed_form_minimises_population_loss(problem, minimizer, population_loss, rank):
    # Perturb in factor space A = G^T H with n_e = rank, which keeps rank(A) <= rank,
    # so the rank-constrained forms (44), (54) are tested over their own constraint set.
    cov, n_u = problem
    a_star = minimizer(cov, n_u, rank)
    n_e = rank or n_u
    left, sing, right_t = np.linalg.svd(a_star)
    g = (left[:, :n_e] * np.sqrt(sing[:n_e])).T
    h = np.sqrt(sing[:n_e])[:, None] * right_t[:n_e]
    best = population_loss(a_star, cov, n_u)
    rng = np.random.default_rng(0)
    for _ in range(30):
        dg, dh = 1e-2 * rng.standard_normal(g.shape), 1e-2 * rng.standard_normal(h.shape)
        assert population_loss((g + dg).T @ (h + dh), cov, n_u) > best
    # and the unconstrained minimiser is not a rank-r solution (the constraint binds)
    if rank is not None:
        assert population_loss(minimizer(cov, n_u), cov, n_u) < best


def test_corollary_5_4_one_sided_minimiser_reproduces_true_conditional(problem):
    cov, n_u = problem
    a_star, b_star = gaussian.one_sided_minimizer(cov, n_u)
    c_uu, _, _ = gaussian.split_covariance(cov, n_u)
    mean_map, cond_cov = gaussian.l2_model_conditional_u_given_v(a_star, b_star, c_uu)
    true_mean, true_cov = gaussian.conditional_u_given_v(cov, n_u)
    np.testing.assert_allclose(mean_map, true_mean, atol=1e-12)
    np.testing.assert_allclose(cond_cov, true_cov, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(b_star) > 0)  # B* = G^T G is attainable


def test_theorem_3_10_population_cond_below_joint(problem):
    cov, n_u = problem
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = 0.3 * rng.standard_normal((n_u, n_u))
        joint = gaussian.population_joint_loss(a, cov, n_u)
        assert gaussian.population_cond_loss(a, cov, n_u) <= joint  # inf counts too


# ---------------------------------------------------------------- empirical -> population

@pytest.mark.parametrize("kind", ["cond", "joint"])
def test_empirical_losses_converge_to_gaussian_population_losses(problem, kind):
    # E[L^N] = L + O(1/N) (bias of log-mean-exp) and the batch-to-batch spread is
    # O(1/sqrt(N)); the check allows 5 standard errors of the 32-batch mean + 2/N.
    # At A = A*_joint the whitened singular values h(0.6, 0.4, 0.2) are < 1/2, so
    # exp(<u, A v>) has finite variance under mu_u x mu_v and both estimates are tame.
    cov, n_u = problem
    a = gaussian.joint_minimizer(cov, n_u)
    n, batches = 2048, 32
    chol = jnp.asarray(np.linalg.cholesky(cov))
    loss_fn = losses.conditional_loss if kind == "cond" else losses.joint_loss

    @jax.jit
    def batch_loss(key):
        z = jax.random.normal(key, (n, cov.shape[0])) @ chol.T
        return loss_fn(losses.inner_product_similarity(z[:, :n_u] @ jnp.asarray(a), z[:, n_u:]))

    values = np.array([batch_loss(jax.random.PRNGKey(i)) for i in range(batches)])
    population = (gaussian.population_cond_loss if kind == "cond" else gaussian.population_joint_loss)(a, cov, n_u)
    standard_error = values.std(ddof=1) / math.sqrt(batches)
    assert abs(values.mean() - population) < 5 * standard_error + 2.0 / n, (values.mean(), population, standard_error)
    # the check can fail: the other loss's population value is far outside the band
    other = (gaussian.population_joint_loss if kind == "cond" else gaussian.population_cond_loss)(a, cov, n_u)
    assert abs(values.mean() - other) > 5 * standard_error + 2.0 / n


# ---------------------------------------------------------------- the --quick experiment

# Tolerance for rel_err in the --quick run (batch N = 256, 800 Adam steps, iterates
# averaged over the last 400). Two error sources: (i) Monte-Carlo noise of the
# averaged iterate, ~ 1/sqrt(N * 400) ~ 3e-3 times an O(1) conditioning factor;
# (ii) the O(1/N) ~ 4e-3 bias of the batch log-mean-exp (E[L^N] != L), times the
# relative variance of the exponential weights (~2-3 here). That predicts ~1e-2;
# measured maxima were 0.021 and 0.023 (seeds 0 and 1). TOL = 0.05 leaves a 2x margin
# and is still 3.5x below the smallest gap between competing theories (0.176), so a
# loss that converged to the wrong theorem's minimiser fails.
TOL = 0.05


@pytest.fixture(scope="module")
def quick_table(experiment, tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    table = experiment.run(quick_run=True, seed=0)
    experiment.write_outputs(table, str(out))
    return table, out


def test_quick_experiment_matches_theorems(quick_table):
    table, _ = quick_table
    kinds = {(r["problem"], r["loss"], r["n_e"], r["quantity"]) for r in table}
    assert ("paper_2d", "cond", 1, "A") in kinds and ("gauss_6d", "joint", 2, "A") in kinds
    assert ("gauss_6d", "one_sided_l2", 3, "Cov[u|v]") in kinds
    for row in table:
        assert row["rel_err"] < TOL, row
        if row["quantity"] != "E[u|v] map":  # both conditional losses match the mean (Cor 5.2)
            assert row["rel_gap"] > 3 * TOL, row


def test_quick_experiment_writes_csv_and_png(quick_table):
    table, out = quick_table
    with open(out / "gaussian_theory.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(table)
    assert {"problem", "loss", "n_e", "quantity", "theory", "rel_err", "rel_gap"} <= set(rows[0])
    assert all(math.isfinite(float(r["rel_err"])) for r in rows)
    assert (out / "gaussian_theory.png").stat().st_size > 1000
