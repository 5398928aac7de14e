"""lagda.learning.losses against naive double-loop evaluations of the paper's formulas."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.learning import losses

N, N_E = 7, 4


def _embeddings(seed, n=N, n_e=N_E, scale=1.0):
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((n, n_e)), scale * rng.standard_normal((n, n_e))


# ---------------------------------------------------------------- naive references
# Each is a literal transcription of the cited formula with explicit loops.

def ref_cosine(u, v, tau):
    return np.array([[np.dot(ui, vj) / (np.linalg.norm(ui) * np.linalg.norm(vj)) / tau for vj in v] for ui in u])


def ref_inner(u, v, tau):
    return np.array([[np.dot(ui, vj) / tau for vj in v] for ui in u])


def ref_l2(u, v, tau):
    return np.array([[-np.sum((ui - vj) ** 2) / (2 * tau) for vj in v] for ui in u])


def ref_u_given_v(s):
    """-(1/N) sum_i log rho^N(u^i|v^i), rho^N = exp s_ii / ((1/N) sum_j exp s_ji)."""
    n = len(s)
    total = 0.0
    for i in range(n):
        denom = sum(math.exp(s[j, i]) for j in range(n)) / n
        total += math.log(math.exp(s[i, i]) / denom)
    return -total / n


def ref_v_given_u(s):
    """The same with the roles of u and v exchanged: the transposed logits."""
    return ref_u_given_v(np.asarray(s).T)


def ref_cond(s, lu, lv):
    """Eq. (12) / Optimization Problem 3.13 with empirical measures."""
    return 0.5 * lu * ref_u_given_v(s) + 0.5 * lv * ref_v_given_u(s)


def ref_clip(s):
    """Eq. (7) with the probabilities (5a), (6a)."""
    n = len(s)
    total = 0.0
    for i in range(n):
        p_u = math.exp(s[i, i]) / sum(math.exp(s[j, i]) for j in range(n))
        p_v = math.exp(s[i, i]) / sum(math.exp(s[i, j]) for j in range(n))
        total += math.log(p_u) + math.log(p_v)
    return -0.5 * total / n


def ref_joint(s, off_diagonal):
    """Optimization Problem 3.7: positives vs product-of-marginals pairs."""
    n = len(s)
    positive = sum(s[i, i] for i in range(n)) / n
    pairs = [(i, j) for i in range(n) for j in range(n) if (i != j or not off_diagonal)]
    return -positive + math.log(sum(math.exp(s[i, j]) for i, j in pairs) / len(pairs))


def ref_sigmoid(s, bias):
    n = len(s)
    total = 0.0
    for i in range(n):
        for j in range(n):
            z = 1.0 if i == j else -1.0
            total += math.log(1.0 / (1.0 + math.exp(-z * (s[i, j] + bias))))
    return -total / n


# ---------------------------------------------------------------- similarities

@pytest.mark.parametrize(
    "kind, fn, ref",
    [
        ("cosine", losses.cosine_similarity, ref_cosine),
        ("inner", losses.inner_product_similarity, ref_inner),
        ("l2", losses.negative_squared_distance, ref_l2),
    ],
    ids=["cosine", "inner", "l2"],
)
def test_similarity_matches_double_loop(kind, fn, ref):
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((5, N_E)), rng.standard_normal((3, N_E))  # rectangular on purpose
    tau = 0.3
    expected = ref(u, v, tau)
    np.testing.assert_allclose(fn(u, v, tau), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(losses.similarity(u, v, kind, tau), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jax.jit(fn)(u, v, tau), expected, rtol=1e-12, atol=1e-12)


def test_similarity_rejects_unknown_kind_listing_valid_values():
    u, v = _embeddings(1)
    with pytest.raises(ValueError, match="cosine, inner, l2"):
        losses.similarity(u, v, "dot")


def test_similarity_rejects_mismatched_shapes_quoting_both():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 5\)"):
        losses.cosine_similarity(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"\(6, 4\).*\(5, 4\)"):
        losses.symmetric_infonce(np.ones((6, 4)), np.ones((5, 4)), 0.1)


def test_similarity_rejects_nonpositive_temperature():
    u, v = _embeddings(2)
    with pytest.raises(ValueError, match="tau"):
        losses.cosine_similarity(u, v, 0.0)


def test_losses_reject_non_square_logits():
    for fn in (losses.conditional_loss, losses.clip_loss, losses.joint_loss, losses.sigmoid_loss):
        with pytest.raises(ValueError, match=r"\(3, 4\)"):
            fn(jnp.zeros((3, 4)))


# ---------------------------------------------------------------- losses

LOSS_CASES = [
    pytest.param(losses.infonce_u_given_v, ref_u_given_v, id="u_given_v"),
    pytest.param(losses.infonce_v_given_u, ref_v_given_u, id="v_given_u"),
    pytest.param(losses.conditional_loss, lambda s: ref_cond(s, 1.0, 1.0), id="cond_symmetric"),
    pytest.param(lambda s: losses.conditional_loss(s, 2.0, 0.0), lambda s: ref_cond(s, 2.0, 0.0), id="cond_2_0"),
    pytest.param(lambda s: losses.conditional_loss(s, 0.3, 1.7), lambda s: ref_cond(s, 0.3, 1.7), id="cond_0.3_1.7"),
    pytest.param(losses.clip_loss, ref_clip, id="clip"),
    pytest.param(losses.joint_loss, lambda s: ref_joint(s, True), id="joint_offdiag"),
    pytest.param(lambda s: losses.joint_loss(s, off_diagonal=False), lambda s: ref_joint(s, False), id="joint_all"),
    pytest.param(lambda s: losses.sigmoid_loss(s, -1.5), lambda s: ref_sigmoid(s, -1.5), id="sigmoid"),
]


@pytest.mark.parametrize("fn, ref", LOSS_CASES)
def test_loss_matches_double_loop_eager_jit_vmap(fn, ref):
    rng = np.random.default_rng(3)
    stack = 2.0 * rng.standard_normal((3, N, N))  # 3 independent logit matrices
    expected = np.array([ref(s) for s in stack])
    np.testing.assert_allclose(fn(jnp.asarray(stack[0])), expected[0], rtol=1e-12)
    np.testing.assert_allclose(jax.jit(fn)(stack[1]), expected[1], rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(fn)(stack), expected, rtol=1e-12)


def test_negatives_join_each_column_s_softmax_over_the_n_plus_k_candidates():
    """infonce_u_given_v with K extra u-side candidates: rho(u^i|v^i) = exp s_ii / ((1/(N+K)) sum over all N + K
    candidates of exp s_.i), by the double loop; the v|u half of conditional_loss does not see them."""
    rng = np.random.default_rng(11)
    n, k = 5, 3
    square, extra = 2.0 * rng.standard_normal((n, n)), 2.0 * rng.standard_normal((k, n))
    total = 0.0
    for i in range(n):
        column = [square[j, i] for j in range(n)] + [extra[j, i] for j in range(k)]
        total += math.log(math.exp(square[i, i]) / (sum(math.exp(c) for c in column) / (n + k)))
    np.testing.assert_allclose(losses.infonce_u_given_v(jnp.asarray(square), jnp.asarray(extra)), -total / n,
                               rtol=1e-12)
    np.testing.assert_allclose(jax.jit(losses.conditional_loss)(square, 0.6, 1.4, extra),
                               0.3 * (-total / n) + 0.7 * ref_v_given_u(square), rtol=1e-12)
    with pytest.raises(ValueError, match=r"\(K, 5\)"):
        losses.infonce_u_given_v(jnp.asarray(square), jnp.zeros((3, 4)))


@pytest.mark.parametrize("n", [1, 2, 9, 64], ids=lambda n: f"N={n}")
def test_theorem_2_8_clip_equals_cond_plus_log_n(n):
    rng = np.random.default_rng(n)
    logits = 3.0 * rng.standard_normal((n, n))
    clip, cond = jax.jit(lambda s: (losses.clip_loss(s), losses.conditional_loss(s)))(logits)
    np.testing.assert_allclose(clip, cond + math.log(n), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 16], ids=lambda n: f"N={n}")
def test_theorem_3_10_cond_below_joint_on_empirical_marginals(n):
    # With the product of the empirical marginals (all N^2 pairs) the proof of
    # Theorem 3.10 (Jensen on log) applies verbatim to every batch.
    rng = np.random.default_rng(n)
    scales = np.exp(rng.uniform(-3.0, 2.0, size=(40, 1, 1)))
    stack = np.broadcast_to(scales, (40, n, n)) * rng.standard_normal((40, n, n))
    gap = jax.jit(jax.vmap(lambda s: losses.joint_loss(s, off_diagonal=False) - losses.conditional_loss(s)))(stack)
    assert np.all(np.asarray(gap) >= -1e-12), np.min(gap)
    assert np.max(gap) > 1e-3  # the inequality is not an identity


def test_one_sided_loss_ignores_terms_depending_only_on_the_conditioning_variable():
    # rho(u|v) normalises over u, so adding f(v^j) to column j cannot change the u|v
    # half; it must change the v|u half (and vice versa for rows).
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((N, N))
    col_shift = 3.0 * rng.standard_normal((1, N))
    row_shift = 3.0 * rng.standard_normal((N, 1))
    shifted_cols = logits + np.broadcast_to(col_shift, (N, N))
    shifted_rows = logits + np.broadcast_to(row_shift, (N, N))
    u_side = lambda s: losses.conditional_loss(s, lambda_u=2.0, lambda_v=0.0)
    v_side = lambda s: losses.conditional_loss(s, lambda_u=0.0, lambda_v=2.0)
    np.testing.assert_allclose(u_side(shifted_cols), u_side(logits), rtol=1e-12)
    np.testing.assert_allclose(v_side(shifted_rows), v_side(logits), rtol=1e-12)
    assert abs(v_side(shifted_cols) - v_side(logits)) > 1e-3
    assert abs(u_side(shifted_rows) - u_side(logits)) > 1e-3
    np.testing.assert_allclose(u_side(logits), losses.infonce_u_given_v(logits), rtol=1e-12)


def test_one_sided_l2_loss_independent_of_v_norms():
    # Section 5.2: with the L2 tilting (26) the (2, 0) loss depends on H only through
    # A = G^T H, not through C = H^T H. Adding to every v-embedding a component
    # orthogonal to all u-embeddings changes only |v_j|^2 (a column shift).
    rng = np.random.default_rng(6)
    u = np.concatenate([rng.standard_normal((N, 3)), np.zeros((N, 1))], axis=1)
    v = rng.standard_normal((N, 4))
    v_perturbed = v.copy()
    v_perturbed[:, 3] += 5.0 * rng.standard_normal(N)
    loss_20 = lambda a, b: losses.conditional_loss(losses.negative_squared_distance(a, b), 2.0, 0.0)
    np.testing.assert_allclose(loss_20(u, v_perturbed), loss_20(u, v), rtol=1e-12)
    assert abs(losses.conditional_loss(losses.negative_squared_distance(u, v_perturbed))
               - losses.conditional_loss(losses.negative_squared_distance(u, v))) > 1e-3


def test_symmetric_infonce_is_cosine_conditional_loss_and_scale_rotation_invariant():
    u, v = _embeddings(7)
    tau = 0.2
    expected = ref_cond(ref_cosine(u, v, tau), 1.0, 1.0)
    np.testing.assert_allclose(losses.symmetric_infonce(u, v, tau), expected, rtol=1e-12)
    # Remark 2.5: invariant to positive per-sample rescaling and to joint rotations.
    rng = np.random.default_rng(8)
    q, _ = np.linalg.qr(rng.standard_normal((N_E, N_E)))
    scale_u = np.exp(rng.standard_normal((N, 1)))
    scale_v = np.exp(rng.standard_normal((N, 1)))
    transformed = losses.symmetric_infonce(
        (u * np.broadcast_to(scale_u, u.shape)) @ q.T, (v * np.broadcast_to(scale_v, v.shape)) @ q.T, tau
    )
    np.testing.assert_allclose(transformed, expected, rtol=1e-10)


def test_clip_loss_vanishes_for_perfectly_aligned_orthogonal_pairs():
    # u^i = v^i orthonormal: logits are 1/tau on the diagonal, 0 elsewhere, so the
    # loss is log(1 + (N-1) exp(-1/tau)) exactly, -> 0 as tau -> 0.
    eye = np.eye(N)
    tau = 0.25
    np.testing.assert_allclose(
        losses.clip_loss(losses.cosine_similarity(eye, eye, tau)), math.log1p((N - 1) * math.exp(-1 / tau)), rtol=1e-10
    )


@pytest.mark.parametrize(
    "loss_fn",
    [
        pytest.param(lambda u, v: losses.symmetric_infonce(u, v, 0.1), id="symmetric_infonce"),
        pytest.param(lambda u, v: losses.joint_loss(losses.cosine_similarity(u, v, 0.1)), id="joint_cosine"),
        pytest.param(lambda u, v: losses.conditional_loss(losses.negative_squared_distance(u, v), 2.0, 0.0),
                     id="cond_l2_one_sided"),
        pytest.param(lambda u, v: losses.sigmoid_loss(losses.cosine_similarity(u, v, 0.1), -10.0), id="sigmoid"),
    ],
)
def test_gradients_are_finite_even_for_a_zero_embedding(loss_fn):
    u, v = _embeddings(9)
    u[2] = 0.0  # normalisation at the origin must not produce NaN
    grad_u, grad_v = jax.jit(jax.grad(loss_fn, argnums=(0, 1)))(jnp.asarray(u), jnp.asarray(v))
    assert np.all(np.isfinite(grad_u)) and np.all(np.isfinite(grad_v))
    assert np.any(grad_v != 0.0)


def test_conditional_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(10)
    logits = rng.standard_normal((N, N))
    direction = rng.standard_normal((N, N))
    grad = jax.grad(lambda s: losses.conditional_loss(s, 0.7, 1.3))(logits)
    h = 1e-6
    fd = (losses.conditional_loss(logits + h * direction, 0.7, 1.3)
          - losses.conditional_loss(logits - h * direction, 0.7, 1.3)) / (2 * h)
    np.testing.assert_allclose(np.sum(np.asarray(grad) * direction), fd, rtol=1e-7)
