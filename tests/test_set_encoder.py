"""Set encoder and observation regimes: padding and drifter order change nothing, the regime
draw is a function of its key, a few steps on a sparse problem beat chance, resume is exact."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy.stats import binom

from lagda.learning import regimes
from lagda.learning.config import learned, tiny
from lagda.learning.data import PairedData
from lagda.learning.encoders import embed_coefficients, encode_tracks, similarity_mask
from lagda.learning.model import build_model, embed_tracks, load_run
from lagda.learning.optimizer import make_optimizer
from lagda.learning.retrieval import retrieval_metrics
from lagda.learning.set_encoder import SetEncoder, tokens
from lagda.learning.train import make_train_step, regime_key, train
from simulate import (
    draw_coefficients,
    draw_frequencies,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)

DT, N_OBS = 1e-3, 60


def make_pairs(n, seed, n_drifters=2):
    """Returns PairedData of n fields: K = 9 modes, dt 1e-3, 60 obs, a fixed and random releases."""
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    scale = spectrum(k1, k2, 1.5, 10.0)
    omega = draw_frequencies(jax.random.key(0), len(k1), 20 * np.pi)
    coef = draw_coefficients(jax.random.key(seed), scale, n, jnp.complex128)
    release = jax.random.uniform(jax.random.key(seed + 100), (n, n_drifters, 2), jnp.float64)
    release = release.at[:, 0].set(0.75)
    positions = simulate_tracks(coef, release, k1, k2, jnp.asarray(omega), DT, N_OBS, 1)
    return PairedData(coef=np.asarray(coef, np.complex64), positions=np.asarray(positions, np.float32),
                      time=DT * np.arange(1, N_OBS + 1), k1=k1, k2=k2, omega=omega, prior_scale=scale, attrs={})


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(64, seed=1)


def _encoder(pairs, head="ridge"):
    config = learned(set_head=head, set_hidden=32, set_depth=1)
    return SetEncoder(2 * len(pairs.k1), config, pairs.meta(), rngs=nnx.Rngs(0))


@pytest.mark.parametrize("head", ["ridge", "mlp"])
def test_padding_is_never_read(pairs, head):
    """One sparse track, padded at the end or with masked observations interleaved (NaN values)."""
    encoder = _encoder(pairs, head)
    keep = np.arange(2, N_OBS, 7)
    z, t = pairs.positions[:1, :1, keep], pairs.time[keep].astype(np.float32)
    plain = encoder(jnp.asarray(z), jnp.asarray(t), None)
    n_pad = 13
    end_z = np.concatenate([z, np.full((1, 1, n_pad, 2), np.nan, np.float32)], axis=2)
    end_t = np.concatenate([t, np.full(n_pad, 99.0, np.float32)])
    end_mask = np.arange(len(keep) + n_pad) < len(keep)
    mixed_mask = np.ones(len(keep) + n_pad, bool)
    mixed_mask[np.random.default_rng(0).choice(len(keep) + n_pad, n_pad, replace=False)] = False
    mixed_z = np.full_like(end_z, np.nan)
    mixed_z[:, :, mixed_mask] = z
    mixed_t = np.full_like(end_t, -5.0)
    mixed_t[mixed_mask] = t
    for pz, pt, pm in ((end_z, end_t, end_mask), (mixed_z, mixed_t, mixed_mask)):
        out = encoder(jnp.asarray(pz), jnp.asarray(pt), jnp.asarray(pm))
        assert bool(jnp.all(jnp.isfinite(out)))
        np.testing.assert_allclose(out, plain, rtol=1e-5, atol=1e-6)


def test_tokens_skip_gaps():
    z = jnp.asarray([[[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [3.0, 0.0]]])
    mid, t_mid, dz, dt, valid = tokens(z, jnp.asarray([0.0, 1.0, 2.0, 3.0]), jnp.asarray([[True, True, False, True]]))
    np.testing.assert_array_equal(valid, [[True, True, False]])
    np.testing.assert_allclose(dz[0, :2], [[1.0, 0.0], [2.0, 0.0]])
    np.testing.assert_allclose(dt[0], [1.0, 2.0, 0.0])
    np.testing.assert_allclose(t_mid[0, :2], [0.5, 2.0])


def test_drifter_order_changes_nothing(pairs):
    encoder = _encoder(pairs)
    z = jnp.asarray(pairs.positions[:3])
    mask = jnp.asarray(np.random.default_rng(1).random(z.shape[:3]) > 0.3)
    for sa, sb in zip(encoder.statistics(z, mask=mask), encoder.statistics(z[:, ::-1], mask=mask[:, ::-1])):
        np.testing.assert_allclose(sa, sb, rtol=1e-5, atol=1e-6)  # the pooled sums: up to summation order
    a = np.asarray(encode_tracks(encoder, z, mask=mask))
    b = np.asarray(encode_tracks(encoder, z[:, ::-1], mask=mask[:, ::-1]))
    # the ridge solve amplifies float32 rounding of the sums; the cosine geometry is unchanged
    assert np.all(np.linalg.norm(a - b, axis=1) < 1e-3 * np.linalg.norm(a, axis=1))


def test_regimes_are_a_function_of_the_key(pairs):
    config = learned(regime="mixture", regime_dense_prob=0.2)
    z = jnp.asarray(pairs.positions[:16])
    sample = jax.jit(regimes.sample_regimes, static_argnums=2)  # as the train step runs it (op by op: 3x slower)
    first = sample(jax.random.key(3), z, config)
    again = sample(jax.random.key(3), z, config)
    other = sample(jax.random.key(4), z, config)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[1], other[1])
    mask = np.asarray(first[1])
    assert mask.shape == z.shape[:3] and np.all(mask.any(axis=(1, 2)))  # every field keeps observations
    assert np.all((mask.sum(-1) == 0) | (mask.sum(-1) >= 2))  # a drifter in use has at least one token
    same = [jax.random.key_data(regime_key(config, 2, 5)) for _ in range(2)]
    np.testing.assert_array_equal(*same)


def test_few_steps_on_a_sparse_problem_beat_chance(pairs):
    """Train on stride-5, noisy, 1-2 drifter regimes; query with stride-5 tracks of the same fields.

    Under chance, each of the n = 64 queries ranks its truth first with probability 1/64, so
    the hits X ~ Binomial(64, 1/64): P(X >= 12) < 1e-8. Asserting >= 12 hits in a direction
    therefore fails only if the encoder learned nothing (or broke).
    """
    config = learned(set_head="ridge", regime="mixture", regime_stride_max=5, regime_noise_max=1e-3,
                     regime_max_drifters=2,
                     batch_size=64, lr=1e-2, warmup=0, cosine_decay=False, tau=0.1)
    model = build_model(config, N_OBS, pairs.k1, pairs.k2, pairs.meta())
    graphdef, params, buffers = nnx.split(model, nnx.Param, ...)
    tx = make_optimizer(config, 80)
    opt_state = tx.init(params)
    step = make_train_step(config, 80)
    coef, positions = jnp.asarray(pairs.coef), jnp.asarray(pairs.positions)
    for i in range(80):
        params, opt_state, loss = step(graphdef, params, buffers, opt_state, coef, positions, None,
                                       regime_key(config, 0, i))
    encoder = nnx.merge(graphdef, params, buffers).encoder
    mask = np.zeros(pairs.positions.shape[:3], bool)
    mask[:, 0, ::5] = True  # the fixed-release drifter, every 5th observation
    emb = embed_tracks(encoder, pairs.positions, 64, mask=mask)
    keep = jnp.asarray(similarity_mask(pairs.k1, pairs.k2, True))
    scores = retrieval_metrics(embed_coefficients(coef) * keep[None], jnp.asarray(emb) * keep[None], ks=(1,),
                               batch_size=64)
    assert binom.sf(11, 64, 1 / 64) < 1e-8
    hits = [round(64 * float(scores[f"{d}/R@1"])) for d in ("coef_to_traj", "traj_to_coef")]
    assert min(hits) >= 12, hits


def test_mixture_run_resumes_bit_for_bit_and_loads(pairs, tmp_path):
    settings = dict(set_head="ridge", regime="mixture", batch_size=32, eval_library=0, warmup=0,
                    cosine_decay=False)  # lr independent of epochs
    config = learned(epochs=2, **settings)
    train(config, pairs, None, tmp_path / "straight", progress=False)
    train(learned(epochs=1, **settings), pairs, None, tmp_path / "split", progress=False)
    train(config, pairs, None, tmp_path / "split", resume=True, progress=False)
    a, b = (jax.tree.leaves(nnx.state(load_run(tmp_path / r)[0])) for r in ("straight", "split"))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    encoder, loaded, meta = load_run(tmp_path / "straight")
    assert isinstance(encoder, SetEncoder) and loaded.regime == "mixture" and meta["n_drifters"] == 2
    assert embed_tracks(encoder, pairs.positions[:5]).shape == (5, 18)


def test_config_rejects_mixtures_the_transformer_cannot_read():
    with pytest.raises(ValueError, match="needs encoder = 'set'"):
        tiny(regime="mixture")
    with pytest.raises(ValueError, match="set encoder is pure-learned"):
        learned(physics=True)


def test_ridge_head_with_the_basis_design_is_least_squares_in_a_chosen_basis():
    # In a chosen basis (Legendre factors in time, the uniform current first) the velocity is linear in the token
    # features phi (set_encoder.velocity_design). With that design as W (set_init "basis"), the identity readout and
    # a vanishing ridge, the head is the least-squares inversion of the tracks' increments: it returns the
    # coefficients of a flow of the basis
    from lagda.assimilation.methods.observations import simulate_observed
    from simulate.flow import circular_modes, in_time
    from simulate.qg.projection import with_current

    k1s, k2s = circular_modes(2)
    k1, k2, omega, time = in_time(*with_current(k1s, k2s)[:2], np.zeros(len(k1s) + 1), 1, 0.0, 0.1,
                                  with_current(k1s, k2s)[2])
    n = len(k1)
    rng = np.random.default_rng(3)
    x = rng.normal(size=2 * n) / (1.0 + np.hypot(np.concatenate([k1, k1]), np.concatenate([k2, k2])) ** 2)
    n_drifter, n_obs, dt = 24, 400, 0.1 / 400
    z0 = rng.uniform(size=(n_drifter, 2))
    with jax.enable_x64(True):
        index = jnp.tile(jnp.arange(n_obs)[None], (n_drifter, 1))
        tracks = simulate_observed(jnp.asarray(x), jnp.asarray(z0), jnp.zeros(n_drifter), index, k1, k2, omega, dt,
                                   n_obs, 1, time)
    positions = np.concatenate([z0[:, None], np.asarray(tracks)], axis=1)[None]  # (1, drifter, 1 + obs, 2)
    times = dt * np.arange(n_obs + 1)
    meta = {"k1": k1, "k2": k2, "omega": omega, "time": times,
            "time_basis": {"degree": time.degree.tolist(), "start": 0.0, "length": 0.1,
                           "current": time.current.astype(bool).tolist()}}
    encoder = SetEncoder(2 * n, learned(set_head="ridge", set_init="basis"), meta,
                         rngs=nnx.Rngs(0))  # velocity_design, identity
    encoder.log_ridge[...] = jnp.asarray(np.log(1e-7), jnp.float32)
    estimate = np.asarray(encoder(jnp.asarray(positions), jnp.asarray(times)[None, None]))[0]
    # float32 features and midpoint increments (measured 9e-6); without the Legendre factors it fails (1.06)
    assert np.linalg.norm(estimate - x) < 1e-4 * np.linalg.norm(x)
    flat = SetEncoder(2 * n, learned(set_head="ridge", set_rank=2 * n), {**meta, "time_basis": None}, rngs=nnx.Rngs(0))
    flat.design[...], flat.readout[...] = encoder.design[...], encoder.readout[...]
    flat.log_ridge[...] = encoder.log_ridge[...]
    wrong = np.asarray(flat(jnp.asarray(positions), jnp.asarray(times)[None, None]))[0]
    assert np.linalg.norm(wrong - x) > 0.5 * np.linalg.norm(x)
