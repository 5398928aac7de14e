"""Kernel set similarity with random Fourier features (lagda/learning/kernel_set.py).

Against the mathematics of Uesaka et al., section 5: the RFF moments and the D^-1/2 rate, the
kernels' spectral laws (Bochner), the double sum of eq. 12, the exact identities (linear kernel,
CLIP, permutations, shared draws), Prop. C.1's rank bound; and a trained kernel_set run
(through the CLI) whose retrieval and bank scores use its stored draw deterministically.
"""
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lagda.assimilation.methods.bank import bank_search
from lagda.assimilation.methods.config import EmbedConfig
from lagda.assimilation.methods.learned import scorer_from_run
from lagda.cli import main
from lagda.learning import kernel_set, losses
from lagda.learning.encoders import embed_coefficients
from lagda.learning.evaluate import evaluate
from lagda.learning.model import (
    EVAL_DRAW,
    embed_track_sets,
    kernel_set_similarity,
    load_trained,
)
from lagda.learning.train import contrastive_loss
from lagda.testing import make_pairs

SCALE = {"gaussian": 0.3, "imq": 0.5}  # sigma and c of the paper
DRAWS = 1000


def _pair(sq_distance: float, dim: int = 2):
    """Returns two points u, v in R^dim with |u - v|^2 = sq_distance."""
    u = jnp.linspace(-0.3, 0.4, dim)
    return u, u + np.sqrt(sq_distance) * jnp.zeros(dim).at[0].set(1.0)


@functools.partial(jax.jit, static_argnums=1)
def _products(key, kernel):
    """Returns, over DRAWS draws at |u - v|^2 = 0.128: z(u).z(v) and z(u).z(u) with D = 128 (the first
    128 features) and D = 512, and z(u).z'(v) with z' from an independent draw (D = 64)."""
    u, v = _pair(0.128)
    # DRAWS draws of D = 512 features are one draw of DRAWS * 512 i.i.d. features, reshaped.
    omega, beta = kernel_set.draw_frequencies(key, kernel, 2, DRAWS * 576, SCALE[kernel], jnp.float64)
    omega, beta = omega.reshape(DRAWS, 576, 2), beta.reshape(DRAWS, 576)
    features = jax.vmap(kernel_set.random_features, (None, 0, 0))
    out = {}
    for n_features in (128, 512):
        zu, zv = (features(p, omega[:, :n_features], beta[:, :n_features]) for p in (u, v))
        out[f"D{n_features}"] = (jnp.sum(zu * zv, 1), jnp.sum(zu * zu, 1))
    zu, zv = features(u, omega[:, :64], beta[:, :64]), features(v, omega[:, 512:], beta[:, 512:])
    out["independent"] = jnp.sum(zu * zv, 1)
    return out


@pytest.mark.parametrize("kernel", ["gaussian", "imq"])
def test_rff_moments_and_monte_carlo_rate(kernel):
    u, v = _pair(0.128)
    exact = float(kernel_set.kernel_values(u, v, kernel, SCALE[kernel]))
    twice = float(kernel_set.kernel_values(u, u + 2 * (v - u), kernel, SCALE[kernel]))
    products = _products(jax.random.key(0), kernel)
    rmse = {}
    for n_features in (128, 512):
        cross, own = products[f"D{n_features}"]
        variance = (1 + 0.5 * twice - exact**2) / n_features
        assert abs(float(jnp.mean(cross)) - exact) < 4 * np.sqrt(variance / DRAWS)  # unbiased: E z(u).z(v) = k~
        assert float(jnp.var(cross)) == pytest.approx(variance, rel=0.15)
        assert abs(float(jnp.mean(own)) - 1) < 4 * np.sqrt(0.5 / n_features / DRAWS)
        assert float(jnp.var(own)) == pytest.approx(0.5 / n_features, rel=0.15)  # Var z(u).z(u) = 1/(2D)
        rmse[n_features] = float(jnp.sqrt(jnp.mean((cross - exact) ** 2)))
    assert np.log(rmse[512] / rmse[128]) / np.log(4) == pytest.approx(-0.5, abs=0.06)
    if kernel == "gaussian":  # the number quoted for |u - v|^2 = 0.128, D = 512
        assert rmse[512] == pytest.approx(0.039, abs=0.003)
    # Independent draws per side are biased: E[z_w(u).z_w'(v)] = 0, not k~(u - v) (0.49 Gaussian, 0.81 IMQ).
    independent = products["independent"]
    assert abs(float(jnp.mean(independent))) < 4 * float(jnp.std(independent)) / np.sqrt(DRAWS) and exact > 0.45


@jax.jit
def _frequencies(key_gaussian, key_imq):
    """Returns omega of the Gaussian kernel (sigma = 0.3, 40,000 draws)
    and E cos(omega . delta) of the IMQ (c = 0.5)."""
    gaussian, _ = kernel_set.draw_frequencies(key_gaussian, "gaussian", 3, 40_000, 0.3, jnp.float64)
    imq, _ = kernel_set.draw_frequencies(key_imq, "imq", 3, 50_000, 0.5, jnp.float64)
    deltas = jnp.array([0.2, 0.6, 1.5])[:, None] * jnp.array([[0.6, 0.0, 0.8]])
    values = jnp.cos(deltas @ imq.T)
    return gaussian, jnp.mean(values, axis=1), jnp.std(values, axis=1)


def test_frequency_laws():
    gaussian, mean_cos, std_cos = _frequencies(jax.random.key(1), jax.random.key(2))
    cov = np.cov(np.asarray(gaussian).T)
    np.testing.assert_allclose(cov, np.eye(3) / 0.09, atol=4 * np.sqrt(2 / 40_000) / 0.09)  # Cov(omega) = sigma^-2 I
    radius = np.array([0.2, 0.6, 1.5])
    assert np.all(np.abs(mean_cos - 0.5 / np.sqrt(0.25 + radius**2)) < 4 * std_cos
                  / np.sqrt(50_000))  # c / sqrt(c^2 + r^2)


@jax.jit
def _set_errors(key, x, y):
    """Returns the RFF set similarity minus eq. 12's double sum of the set pairs (x_b, y_b), over 16 draws
    at D = 512 and at D = 8192, `(16, pairs)` each."""
    exact = jnp.sum(kernel_set.exact_set_similarity(x, y, "gaussian", 0.6, 0.3, 0.7) * jnp.eye(x.shape[0]), axis=1)
    omega, beta = kernel_set.draw_frequencies(key, "gaussian", 6, 16 * (512 + 8192), 0.6, jnp.float64)
    omega, beta = omega.reshape(16, 512 + 8192, 6), beta.reshape(16, 512 + 8192)  # 16 x 2 disjoint draws
    errors = []
    for part in (slice(0, 512), slice(512, None)):
        embed = jax.vmap(kernel_set.set_embedding, (None, 0, 0, None, None))
        approx = jnp.sum(embed(x, omega[:, part], beta[:, part], 0.3, 0.7)
                         * embed(y, omega[:, part], beta[:, part], 0.3, 0.7), -1)
        errors.append(approx - exact[None])
    return errors


def test_set_similarity_is_the_double_sum_up_to_rff_error():
    rng = np.random.default_rng(3)
    small, large = _set_errors(jax.random.key(3), rng.standard_normal((24, 3, 6)), rng.standard_normal((24, 5, 6)))
    rmse_small, rmse_large = float(jnp.sqrt(jnp.mean(small**2))), float(jnp.sqrt(jnp.mean(large**2)))
    assert rmse_small < 0.7 * 1.5 / np.sqrt(512)  # Var <= alpha2^2 (1 + 1/2) / D per pair of points
    assert rmse_small / rmse_large == pytest.approx(4.0, rel=0.3)  # O(D^-1/2): sqrt(8192 / 512) = 4


@jax.jit
def _identities(key, x, y):
    """Returns pairs (kernel-set value, what it must equal) of the exact identities, in one compiled function."""
    omega, beta = kernel_set.draw_frequencies(key, "imq", 6, 256, 0.5, jnp.float64)
    logits = functools.partial(kernel_set.kernel_set_logits, omega=omega, beta=beta)
    clip = logits(x[:, :1], y[:5, :1], alpha1=1.0, alpha2=0.0, tau=0.1)
    full = logits(x, y, alpha1=0.25, alpha2=0.75)
    return {
        # alpha2 = 0: the linear kernel of eq. 12, the mean of all point inner products.
        "linear": (logits(x, y, alpha1=1.0, alpha2=0.0, tau=0.5),
                   kernel_set.exact_set_similarity(x, y, "imq", 0.5, 1.0, 0.0) / 0.5),
        # M = 1, alpha = (1, 0): CLIP's cosine logits, hence the same L_cond.
        "clip": (clip, losses.cosine_similarity(x[:, 0], y[:5, 0], 0.1)),
        "clip_loss": (losses.conditional_loss(clip), losses.symmetric_infonce(x[:, 0], y[:5, 0], 0.1)),
        # Permuting the points of a set changes nothing.
        "permuted": (logits(x[:, ::-1], y[:, jnp.array([2, 0, 3, 1])], alpha1=0.25, alpha2=0.75), full),
    }


@pytest.mark.parametrize("identity", ["linear", "clip", "clip_loss", "permuted"])
def test_exact_identities(identity):
    rng = np.random.default_rng(4)
    value, truth = _identities(jax.random.key(4), rng.standard_normal((5, 3, 6)),
                               rng.standard_normal((7, 4, 6)))[identity]
    np.testing.assert_allclose(value, truth, rtol=1e-12)


@jax.jit
def _rank_matrices(key):
    """Returns the bilinear, RFF-kernel and exact-kernel similarity matrices of 12 singleton sets on the unit circle."""
    angles = jnp.linspace(0, 2 * np.pi, 12, endpoint=False)
    points = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)[:, None, :]
    omega, beta = kernel_set.draw_frequencies(key, "gaussian", 2, 8192, 0.3, jnp.float64)
    return (kernel_set.kernel_set_logits(points, points, omega, beta, 1.0, 0.0),
            kernel_set.kernel_set_logits(points, points, omega, beta, 0.5, 0.5),
            kernel_set.exact_set_similarity(points, points, "gaussian", 0.3, 0.5, 0.5))


def test_prop_c1_bilinear_rank_bound_and_kernel_exceeds_it():
    bilinear, kernel, exact = _rank_matrices(jax.random.key(5))

    def rank(matrix, tol):
        singular = np.linalg.svd(np.asarray(matrix), compute_uv=False)
        return int(np.sum(singular > tol * singular[0]))

    assert rank(bilinear, 1e-10) <= 2 + 1  # Prop. C.1: d + 1 with d = 2
    assert rank(exact, 1e-10) == 12  # a Gaussian kernel matrix of distinct points is positive definite
    assert rank(kernel, 1e-2) > 2 + 1  # the RFF similarity matrix too, above its Monte-Carlo noise


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    """A tiny kernel_set run (IMQ, time-indexed coefficient sets) trained through the CLI."""
    root = tmp_path_factory.mktemp("kernel")
    pairs = make_pairs(24, seed=1)
    np.savez(root / "pairs.npz", coef=pairs.coef, positions=pairs.positions, time=pairs.time, k1=pairs.k1, k2=pairs.k2,
             omega=pairs.omega, prior_scale=pairs.prior_scale)
    argv = ["train", "--preset", "tiny", "--loss", "kernel_set", "--kernel", "imq", "--kernel-scale", "0.5",
            "--kernel-alpha1", "0.25", "--kernel-alpha2", "0.75", "--kernel-features", "64", "--kernel-coef-set",
            "time",
            "--kernel-coef-times", "5", "--epochs", "1", "--eval-library", "0", "--train", str(root / "pairs.npz"),
            "--test", str(root / "pairs.npz"), "--run-dir", str(root / "run"), "--no-progress"]
    assert main(argv) == 0
    return root / "run", root / "pairs.npz", pairs


def test_kernel_set_run_scores_with_its_stored_draw_deterministically(kernel_run):
    run, data_path, pairs = kernel_run
    config = json.loads((run / "config.json").read_text())
    assert config["loss"] == "kernel_set" and config["kernel"] == "imq" and config["kernel_coef_times"] == 5
    model, train_config, _ = load_trained(run)  # restored from the checkpoint into an abstract model
    want, _ = kernel_set.draw_frequencies(jax.random.fold_in(jax.random.key(train_config.seed), EVAL_DRAW), "imq", 18,
                                          64, 0.5)
    np.testing.assert_array_equal(np.asarray(model.rff_omega[...]), np.asarray(want))  # the stored evaluation draw
    assert evaluate(run, data_path) == evaluate(run, data_path)
    # The bank's scores (the kind given to losses.similarity) are the training similarity at the stored draw.
    sets = embed_track_sets(model, train_config, pairs.positions, batch_size=512)[:8]  # evaluate's batch shape
    kind = kernel_set_similarity(model, train_config)
    g_u = embed_coefficients(jnp.asarray(pairs.coef[:8])).astype(jnp.float32)
    logits = losses.similarity(g_u, jnp.asarray(sets), kind, 0.1)
    loss = nnx.jit(functools.partial(contrastive_loss, config=train_config))(
        model, jnp.asarray(pairs.coef[:8]), jnp.asarray(pairs.positions[:8]))
    tau = float(jnp.exp(model.log_tau[...]))
    np.testing.assert_allclose(losses.conditional_loss(logits * 0.1 / tau), loss, rtol=1e-5)
    scorer, _ = scorer_from_run(run)
    assert scorer.kind == kind and hash(scorer.kind) == hash(kind)
    config = EmbedConfig(top_k=4)
    queries = scorer.embed_fn(pairs.positions)[:3]  # embed_track_sets, on evaluate's batch shape
    np.testing.assert_array_equal(queries, sets[:3])
    runs = [bank_search(queries, pairs.prior_scale, config, scorer, jax.random.key(0), bank=pairs.coef)
            for _ in range(2)]
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(runs[0][1][:, 0], np.max(np.asarray(losses.similarity(
        embed_coefficients(jnp.asarray(pairs.coef)).astype(jnp.float32), jnp.asarray(sets[:3]), kind, scorer.tau)),
        axis=0), rtol=1e-5)
