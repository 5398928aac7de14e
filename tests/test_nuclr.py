"""NUCLR / SogCLR (lagda/learning/nuclr.py) against the mathematics of Wang et al., section 3.4.

Theorem 2's fixed point by full-batch gradient descent on Phi; the stochastic eq. 14 equals
grad Phi when B = n and gamma = 1, and its iterates reach zeta* up to a shift; SogCLR's eq. 15
against jax.grad of the per-batch loss; the toy problem of section 3.3 with its closed-form
popularity; a NUCLR run resumed from disk (through the CLI) equals the uninterrupted one bit for bit.
"""
import dataclasses
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.cli import main
from lagda.learning import checkpoint, losses, nuclr
from lagda.learning.config import tiny
from lagda.learning.train import train
from lagda.testing import make_pairs

TAU = 0.2


@jax.jit
def solve_zeta(sim, tau):
    """Returns (zeta*, grad Phi at it, iterations): gradient descent on Phi (step tau n) from zeta = 0."""
    n = sim.shape[0]
    grad = jax.grad(nuclr.zeta_objective, argnums=1)

    def keep_going(carry):
        return (jnp.max(jnp.abs(carry[1])) > 1e-13) & (carry[2] < 100_000)

    def descend(carry):
        zeta = carry[0] - tau * n * carry[1]
        return zeta, grad(sim, zeta, tau), carry[2] + 1

    zeta0 = jnp.linspace(-0.1, 0.1, n)  # mean 0, not uniform
    return jax.lax.while_loop(keep_going, descend, (zeta0, grad(sim, zeta0, tau), 0))


def cosine_matrix(key, n, d=5):
    u, v = jax.random.normal(key, (2, n, d))
    v = u + 0.8 * v  # correlated pairs: a non-trivial popularity
    return losses.cosine_similarity(u, v)


@pytest.fixture(scope="module")
def fixed_point():
    sim = cosine_matrix(jax.random.key(0), 40)
    zeta, grad, steps = solve_zeta(sim, TAU)
    return sim, zeta, grad, int(steps)


def test_theorem2_fixed_point(fixed_point):
    sim, zeta, grad, steps = fixed_point
    assert float(jnp.max(jnp.abs(grad))) <= 1e-13 and steps < 100_000
    assert float(jnp.max(jnp.abs(nuclr.popularity_residual(sim, zeta, TAU)))) < 1e-11  # eq. 9
    column_sums = jnp.sum(jax.nn.softmax((sim - zeta[None, :]) / TAU, axis=1), axis=0)
    np.testing.assert_allclose(column_sums, 1.0, atol=1e-12)
    phi = nuclr.zeta_objective(sim, zeta, TAU)
    assert float(jnp.abs(nuclr.zeta_objective(sim, zeta + 0.37, TAU) - phi)) < 1e-14  # unique up to a constant
    assert abs(float(jnp.mean(zeta))) < 1e-14  # gradient descent keeps the mean (sum of grad Phi = 0)
    assert float(jnp.std(zeta)) > 1e-3  # the popularities are not uniform
    # Uniform zeta: Psi is tau times the global contrastive loss over all n candidates (eq. 12's v|u half).
    psi = nuclr.weight_objective(sim, jnp.zeros(40), TAU)
    np.testing.assert_allclose(psi, TAU * (losses.infonce_v_given_u(sim / TAU) + np.log(40)), rtol=1e-13)


def _config(**overrides):
    base = dict(loss="nuclr", nuclr_gamma=1.0, nuclr_zeta_init=0.0, nuclr_xi_init=0.0, nuclr_freeze=0.0)
    return tiny(**{**base, **overrides})


def test_full_batch_stochastic_gradient_is_grad_phi_and_iterates_reach_zeta_star(fixed_point):
    sim, zeta_star, _, _ = fixed_point
    n = sim.shape[0]
    config, index = _config(), jnp.arange(n)
    state = nuclr.init_direction(n, 0.0, 0.0, jnp.float64)
    state = {**state, "zeta": jnp.linspace(-0.05, 0.08, n), "seen": jnp.ones(n, bool)}
    logits = nuclr.relative_logits(sim, state["zeta"], TAU)
    log_u = jnp.log(jnp.sum(jnp.where(jnp.eye(n, dtype=bool), 0.0, jnp.exp(logits)), axis=1))  # B = n: c = 1, u = phi
    np.testing.assert_allclose(nuclr.zeta_gradient(logits, state["zeta"], log_u, TAU, n, 1.0),
                               jax.grad(nuclr.zeta_objective, argnums=1)(sim, state["zeta"], TAU), atol=1e-15)

    @jax.jit
    def iterate(state):
        def body(_, s):
            return nuclr.update_direction(sim, s, index, TAU, n, config, False, 2.0, False)[2]
        return jax.lax.fori_loop(0, 1000, body, state)

    zeta = iterate(state)["zeta"]
    shift = jnp.mean(zeta - zeta_star)
    np.testing.assert_allclose(zeta - shift, zeta_star, atol=1e-9)


def _linear_similarity(weight, u, v):
    return losses.cosine_similarity(u, v @ weight)


SOGCLR = tiny(loss="sogclr", nuclr_gamma=1.0, lambda_u=0.7, lambda_v=1.3)
FROZEN_NUCLR = dataclasses.replace(SOGCLR, loss="nuclr", nuclr_zeta_init=0.0, nuclr_xi_init=0.0, nuclr_freeze=1.0)


@jax.jit
def _reductions(u, v, weight, index):
    """Everything test_sogclr_reductions compares, in one compiled function."""
    b = u.shape[0]

    def surrogate(config, n, weight, state=None):
        state = nuclr.init_state(n, config) if state is None else state
        return nuclr.nuclr_objective(_linear_similarity(weight, u, v), state, index, TAU, n, config, 10, 5)

    out = {"grad_batch": jax.grad(lambda w: surrogate(SOGCLR, b, w)[0])(weight),
           "want_batch": jax.grad(lambda w: TAU
                                  * losses.conditional_loss(_linear_similarity(w, u, v) / TAU, 0.7, 1.3))(weight)}
    n = 50
    c = (n - 1) / (b - 1)

    def per_batch(w):  # B^-1 sum_i tau log(1 + c sum_{j != i} exp((E_ij - E_ii)/tau)), both directions
        sim = _linear_similarity(w, u, v)
        total = 0.0
        for matrix, lam in ((sim, 1.3), (sim.T, 0.7)):
            rel = (matrix - jnp.diagonal(matrix)[:, None]) / TAU
            off = jnp.sum(jnp.where(jnp.eye(b, dtype=bool), 0.0, jnp.exp(rel)), axis=1)
            total = total + 0.5 * lam * jnp.mean(TAU * jnp.log1p(c * off))
        return total

    out["grad_n"] = jax.grad(lambda w: surrogate(SOGCLR, n, w)[0])(weight)
    out["want_n"] = jax.grad(per_batch)(weight)
    gamma = dataclasses.replace(SOGCLR, nuclr_gamma=0.8)
    out["first"] = surrogate(gamma, n, weight)[1][1]
    out["second"] = surrogate(gamma, n, 1.1 * weight, out["first"])[1][1]
    out["fresh"] = surrogate(gamma, n, 1.1 * weight)[1][1]
    out["frozen"] = surrogate(FROZEN_NUCLR, n, weight)
    out["sogclr"] = surrogate(SOGCLR, n, weight)
    # The public code's variants, at the last step of an epoch (step 4 of 5).
    state = {**nuclr.init_state(n, PUBLIC_CODE), "step": jnp.asarray(4, jnp.int32)}
    out["code"] = surrogate(PUBLIC_CODE, n, weight, state)[1][1]["coef_anchor"]
    out["sim"] = _linear_similarity(weight, u, v)
    return out


PUBLIC_CODE = dataclasses.replace(SOGCLR, loss="nuclr", nuclr_zeta_step="code", nuclr_xi_rule="code",
                                  nuclr_offdiag_c=False, nuclr_freeze=0.0, nuclr_zeta_lr=1e-3, nuclr_zeta_init=-0.05,
                                  nuclr_xi_init=-0.05)


def test_sogclr_reductions_against_jax_grad():
    key_u, key_v, key_w = jax.random.split(jax.random.key(1), 3)
    b, d = 6, 4
    u, v = jax.random.normal(key_u, (b, d)), jax.random.normal(key_v, (b, d))
    weight = jnp.eye(d) + 0.3 * jax.random.normal(key_w, (d, d))
    index = jnp.arange(b) + 3
    out = _reductions(u, v, weight, index)
    # gamma = 1, B = n (c = 1): G(w) is tau times the gradient of the per-batch L_cond (eq. 12) with these weights.
    np.testing.assert_allclose(out["grad_batch"], out["want_batch"], rtol=1e-10, atol=1e-14)
    # n > B: c = (n-1)/(B-1) and G(w) = grad B^-1 sum_i tau log(1 + phi_i).
    np.testing.assert_allclose(out["grad_n"], out["want_n"], rtol=1e-10, atol=1e-14)
    # The moving average: a second visit gives u = (1 - gamma) u + gamma phi.
    for direction in nuclr.DIRECTIONS:
        first, second, fresh = (np.exp(out[k][direction]["log_u"][index]) for k in ("first", "second", "fresh"))
        np.testing.assert_allclose(second, 0.2 * first + 0.8 * fresh, rtol=1e-6)  # the state is float32
    # NUCLR with zeta = xi = 0 held (frozen for the whole run) is exactly SogCLR.
    for x, y in zip(jax.tree.leaves(out["frozen"]), jax.tree.leaves(out["sogclr"]), strict=True):
        np.testing.assert_array_equal(x, y)
    # Public code: eq. 14 without c off the diagonal, m = 0.9 n G from m = 0, zeta -= lr m (lr undivided
    # before half of the 10 steps), and at an epoch's end xi = max(xi_0, max zeta), signed.
    sim, n, zeta0 = np.asarray(out["sim"], np.float64), 50, -0.05
    c = (n - 1) / (b - 1)
    e = np.exp((sim - np.diag(sim)[:, None] - zeta0) / TAU)  # exp((E_ij - E_ii - zeta_j) / tau)
    off = ~np.eye(b, dtype=bool)
    u = c * np.sum(np.where(off, e, 0.0), axis=1)  # gamma = 1: u = phi
    eps = np.exp(-zeta0 / TAU)
    grad = -(eps / (eps + u) + np.sum(np.where(off, e / (eps + u)[:, None], 0.0), axis=0)) / b + 1 / n
    zeta = zeta0 - 1e-3 * 0.9 * n * grad
    np.testing.assert_allclose(out["code"]["zeta"][index], zeta, rtol=1e-6)  # the state is float32
    assert np.max(zeta) > zeta0 and float(out["code"]["xi"]) == pytest.approx(float(np.max(zeta)), rel=1e-6)
    np.testing.assert_array_equal(np.delete(np.asarray(out["code"]["zeta"]), index), np.float32(zeta0))


def test_toy_popularity_matches_closed_form():
    """Section 3.3 toy: x uniform on the half disc, p(y|x) on [0,1]^2 with E = x.y, tau = 0.2."""
    rng = np.random.default_rng(0)
    n = 100
    x = rng.uniform([-1, 0], [1, 1], size=(4 * n, 2))
    x = x[np.sum(x * x, 1) <= 1][:n]
    # p(y|x) factorises: y_k = tau / x_k log(1 + U (exp(x_k / tau) - 1)) samples it exactly.
    y = TAU / x * np.log1p(rng.uniform(size=(n, 2)) * np.expm1(x / TAU))
    log_z = np.sum(np.log(TAU * np.expm1(x / TAU) / x), axis=1)  # int exp(x.y / tau) dy, closed form
    log_q = np.log(np.sum(np.exp(x @ y.T / TAU - log_z[:, None]), axis=0))  # q_j = sum_j' p(y_j | x_j')
    zeta, grad, _ = solve_zeta(jnp.asarray(x @ y.T), TAU)
    assert float(jnp.max(jnp.abs(grad))) <= 1e-13
    gap = np.asarray(zeta) / TAU - log_q
    assert gap.std() < 0.15 * log_q.std()  # q~ = exp(zeta*/tau) is q up to a constant factor
    assert np.max(np.abs(gap - gap.mean())) < 0.3


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(24, seed=1)


def _leaves(run_dir):
    mngr = checkpoint.manager(run_dir / "checkpoints", 2)
    step = mngr.latest_step()
    payload = mngr.restore(step)
    mngr.close()
    return step, [np.asarray(payload["leaves"][k]) for k in sorted(payload["leaves"])]


def test_nuclr_resume_from_disk_through_the_cli_is_bit_for_bit(pairs, tmp_path):
    config = tiny(loss="nuclr", eval_library=0, epochs=2)
    straight = train(config, pairs, None, tmp_path / "straight", progress=False)
    data = tmp_path / "pairs.npz"
    np.savez(data, coef=pairs.coef, positions=pairs.positions, time=pairs.time, k1=pairs.k1, k2=pairs.k2,
             omega=pairs.omega, prior_scale=pairs.prior_scale)
    shutil.copytree(straight, tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "2")  # interrupted after epoch 1
    argv = ["train", "--preset", "tiny", "--loss", "nuclr", "--eval-library", "0", "--epochs", "2", "--train",
            str(data),
            "--run-dir", str(tmp_path / "resumed"), "--resume", "--no-progress"]
    assert main(argv) == 0
    (step_a, a), (step_b, b) = _leaves(straight), _leaves(tmp_path / "resumed")
    assert step_a == step_b == 2 and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    # The saved per-sample state is the one of training: every pair seen, zeta moved after the warm-up.
    state = nuclr.init_state(24, config)
    n_state = len(jax.tree.leaves(state))
    saved = dict(zip(_state_paths(state), a[-n_state:]))
    assert saved["coef_anchor/seen"].all() and saved["traj_anchor/seen"].all() and saved["step"] == 6
    assert (np.ptp(saved["coef_anchor/zeta"]) > 0
            and saved["coef_anchor/xi"] >= np.max(np.abs(saved["coef_anchor/zeta"])))


def _state_paths(state):
    return ["/".join(str(getattr(k, "key", k)) for k in path)
            for path, _ in jax.tree_util.tree_flatten_with_path(state)[0]]

