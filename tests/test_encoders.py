"""Encoder shapes for every pooling/feature option, drifter-set invariance, g_u and config errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lagda.learning.config import tiny
from lagda.learning.encoders import (
    TrajectoryTransformer,
    embed_coefficients,
    encode_tracks,
    similarity_mask,
)

N_OBS, N_EMBED = 20, 18


def _tracks(shape):
    steps = 0.01 * jax.random.normal(jax.random.key(1), (*shape, N_OBS, 2), jnp.float32)
    return 0.75 + jnp.cumsum(steps, axis=-2)


CASES = [("last", "increments+sincos"), ("cls", "increments+sincos"), ("mean", "increments+sincos"),
         ("last", "position"), ("last", "increments"), ("last", "sincos")]


@pytest.mark.parametrize("pooling,features", CASES, ids=[f"{p}-{f}" for p, f in CASES])
def test_output_shape(pooling, features):
    config = tiny(pooling=pooling, features=features, patch=5,
                  positional="learned" if pooling != "mean" else "sinusoidal")
    model = TrajectoryTransformer(N_OBS, N_EMBED, config, rngs=nnx.Rngs(0))
    tracks = _tracks((3,))
    model.set_feature_stats(tracks)
    out = model(tracks)
    assert out.shape == (3, N_EMBED) and out.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(out)))


def test_bfloat16_compute_keeps_float32_params():
    model = TrajectoryTransformer(N_OBS, N_EMBED, tiny(patch=5, compute_dtype="bfloat16"), rngs=nnx.Rngs(0))
    params = nnx.state(model, nnx.Param)
    assert {leaf.dtype for leaf in jax.tree.leaves(params)} == {jnp.dtype(jnp.float32)}
    assert model(_tracks((2,))).dtype == jnp.float32


def test_cudnn_attention_is_the_same_function_off_gpu_and_needs_bfloat16():
    # cuDNN's fused attention exists on NVIDIA GPUs only; elsewhere the setting computes XLA's attention.
    tracks = _tracks((2,))
    outputs = []
    for attention in ("xla", "cudnn"):
        model = TrajectoryTransformer(N_OBS, N_EMBED, tiny(patch=5, compute_dtype="bfloat16", attention=attention),
                                      rngs=nnx.Rngs(0))
        outputs.append(np.asarray(model(tracks)))
    if jax.default_backend() == "gpu":  # two kernels of one function, to bfloat16's precision
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=0.05, atol=0.05)
    else:
        np.testing.assert_array_equal(outputs[1], outputs[0])
    with pytest.raises(ValueError, match="attention = 'cudnn' needs compute_dtype = 'bfloat16'"):
        tiny(attention="cudnn")


def test_drifters_give_one_embedding_invariant_to_order():
    model = TrajectoryTransformer(N_OBS, N_EMBED, tiny(patch=5), rngs=nnx.Rngs(0))
    tracks = _tracks((2, 3))  # (batch, drifter, obs, 2)
    emb = encode_tracks(model, tracks)
    assert emb.shape == (2, N_EMBED)
    np.testing.assert_allclose(encode_tracks(model, tracks[:, ::-1]), emb, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(emb[0], jnp.mean(model(tracks[0]), axis=0), rtol=1e-5, atol=1e-6)


def test_embed_coefficients_is_re_im():
    coef = jnp.array([[1 + 2j, 3 - 4j]])
    np.testing.assert_array_equal(embed_coefficients(coef), [[1.0, 3.0, 2.0, -4.0]])


def test_similarity_mask_drops_only_the_mean_mode():
    k1, k2 = np.array([-1, 0, 0, 1]), np.array([0, 0, 1, 0])
    np.testing.assert_array_equal(similarity_mask(k1, k2, True), [1, 0, 1, 1, 1, 0, 1, 1])
    np.testing.assert_array_equal(similarity_mask(k1, k2, False), np.ones(8))


def test_prior_weights_make_the_similarity_compare_whitened_coefficients():
    # weights rms(a) / a_k: coefficients drawn from the prior N(0, a_k^2) come out with the same variance in every
    # mode, rms(a)^2 (the mean mode still dropped when asked); a prior without a positive scale is refused
    k1, k2, scale = np.array([0, 1, 2, 3]), np.array([0, 0, 1, 2]), np.array([1.0, 0.5, 1e-2, 1e-4])
    weights = similarity_mask(k1, k2, True, scale)
    rms2 = np.mean(scale**2)
    np.testing.assert_allclose((weights * np.concatenate([scale, scale])) ** 2, rms2 * np.array([0, 1, 1, 1] * 2),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="positive prior_scale"):
        similarity_mask(k1, k2, False, np.array([1.0, 0.0, 1.0, 1.0]))


def test_bad_settings_raise_one_line():
    with pytest.raises(ValueError, match="pooling must be one of"):
        tiny(pooling="max")
    with pytest.raises(ValueError, match="does not divide"):
        TrajectoryTransformer(N_OBS, N_EMBED, tiny(patch=7), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="expected positions"):
        TrajectoryTransformer(N_OBS, N_EMBED, tiny(patch=5), rngs=nnx.Rngs(0))(jnp.zeros((2, N_OBS + 1, 2)))
