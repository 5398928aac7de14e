"""The misfit head of the set encoder: with the velocity's own design its inner product with the quadratic
coefficient embedding is minus the velocity misfit, training it from a random design improves retrieval, and
the assimilation methods refuse its runs in one line."""
import json

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import binom

from lagda.learning import losses
from lagda.learning.config import learned
from lagda.learning.encoders import embed_coefficients, encode_tracks, similarity_mask
from lagda.learning.evaluate import retrieval_scores
from lagda.learning.model import build_model
from lagda.learning.set_encoder import quadratic_features, triangle
from lagda.learning.train import train
from simulate.flow import velocity_basis
from tests.test_set_encoder import N_OBS, make_pairs


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(64, seed=5)


def test_quadratic_features_give_the_quadratic_form():
    rng = np.random.default_rng(0)
    x, b, a = rng.normal(size=5), rng.normal(size=5), rng.normal(size=(5, 5))
    a = a + a.T
    track = np.concatenate([2 * b, np.asarray(triangle(jnp.asarray(a))), [-3.0]])
    np.testing.assert_allclose(np.asarray(quadratic_features(jnp.asarray(x))) @ track, 2 * b @ x + x @ a @ x - 3.0,
                               rtol=1e-12)


def test_inner_product_with_the_velocity_design_is_minus_the_misfit(pairs):
    """misfit_ij = sum over tokens of dt |dz / dt - G(midpoint, mid-time) x_j|^2 / T, in float64 numpy from the tracks
    (G: simulate.flow.velocity_basis), against the model's masked inner product of g_u(c_j) and g_v(track_i)."""
    config = learned(set_init="basis")
    model = build_model(config, N_OBS, pairs.k1, pairs.k2, pairs.meta())
    n = 12
    mask = jnp.asarray(model.mask[...])
    v_emb = encode_tracks(model.encoder, jnp.asarray(pairs.positions[:n])) * mask[None]
    u_emb = embed_coefficients(jnp.asarray(pairs.coef[:n]), "quadratic") * mask[None]
    score = np.asarray(losses.similarity(u_emb, v_emb, "inner"), np.float64)  # (coef j, track i)

    z = np.asarray(pairs.positions[:n], np.float64)  # (field, drifter, obs, 2)
    t = np.asarray(pairs.time, np.float64)
    dz, dt = np.diff(z, axis=2), np.diff(t)
    mid, t_mid = 0.5 * (z[:, :, 1:] + z[:, :, :-1]), 0.5 * (t[1:] + t[:-1])
    g = velocity_basis(mid, np.broadcast_to(t_mid, mid.shape[:-1]), pairs.k1, pairs.k2, pairs.omega)
    x = np.concatenate([pairs.coef[:n].real, pairs.coef[:n].imag], axis=-1).astype(np.float64)
    total = dt.sum() * z.shape[1]
    velocity = dz / dt[:, None]  # (field, drifter, token, 2)
    predicted = np.einsum("fdtcm,jm->fjdtc", g, x)  # field i's tracks under coefficients j
    misfit = np.einsum("t,fjdtc->fj", dt, (velocity[:, None] - predicted) ** 2) / total  # (track i, coef j)
    assert np.all(np.argmin(misfit, axis=1) == np.arange(n))  # the truth fits best: the check is not vacuous
    np.testing.assert_allclose(-score.T, misfit, rtol=1e-4, atol=1e-5 * misfit.max())


@pytest.fixture(scope="module")
def misfit_run(pairs, tmp_path_factory):
    """A misfit head trained from a random design: 10 epochs of 64 pairs, evaluated on its 64 training pairs."""
    config = learned(epochs=10, batch_size=16, eval_library=64, eval_batch=64, eval_every=10, warmup=0,
                     negatives=32)
    run_dir = tmp_path_factory.mktemp("misfit") / "run"
    train(config, pairs, pairs, run_dir, progress=False)
    return config, run_dir


def test_training_from_a_random_design_improves_retrieval(pairs, misfit_run):
    """R@1 of the untrained model against that after training, on 64 pairs: under chance each direction's
    hits are Binomial(64, 1/64); the trained model must do better than the start and than chance
    (P(X >= 12) < 1e-8) in both directions."""
    config, run_dir = misfit_run
    start = retrieval_scores(build_model(config, N_OBS, pairs.k1, pairs.k2, pairs.meta()), pairs, config, 64, "test")
    end = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert binom.sf(11, 64, 1 / 64) < 1e-8
    for direction in ("coef_to_traj", "traj_to_coef"):
        key = f"test/{direction}/R@1"
        assert end[key] > start[key] and round(64 * end[key]) >= 12, (direction, start[key], end[key])


def test_assimilation_refuses_a_misfit_run_in_one_line(misfit_run):
    from lagda.assimilation.methods.learned import scorer_from_run

    with pytest.raises(ValueError, match="misfit head") as error:
        scorer_from_run(misfit_run[1])
    assert "\n" not in str(error.value)


def test_config_pairs_the_misfit_head_with_its_embedding():
    assert learned().set_head == "misfit" and learned(set_head="ridge").coef_embedding == "re_im"
    with pytest.raises(ValueError, match="go together"):
        learned(coef_embedding="re_im")
    with pytest.raises(ValueError, match="similarity = 'inner'"):
        learned(similarity="cosine")


def test_the_lifted_mask_is_the_quadratic_embedding_of_the_masked_coefficients(pairs):
    keep = similarity_mask(pairs.k1, pairs.k2, True)
    lifted = similarity_mask(pairs.k1, pairs.k2, True, kind="quadratic")
    x = embed_coefficients(jnp.asarray(pairs.coef[:3]))
    np.testing.assert_allclose(embed_coefficients(jnp.asarray(pairs.coef[:3]), "quadratic") * lifted[None],
                               quadratic_features(x * keep[None]), rtol=1e-6)


@pytest.mark.parametrize("method", [["retrieve"], ["hybrid"], ["sample", "--start", "learned"]])
def test_lagda_assimilate_refuses_a_misfit_run_in_one_line(misfit_run, method, tmp_path, capsys):
    from lagda.cli import main
    from lagda.examples import shipped

    out = tmp_path / "r.nc"
    code = main(["assimilate", "--tracks", str(shipped("example_tracks.nc")), "--method", *method, "--model",
                 str(misfit_run[1]), "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code != 0 and not out.exists()
    assert len(err) == 1 and "misfit head" in err[0], err


def test_a_step_s_negatives_are_other_pairs_of_the_epoch():
    """The negatives of step i are the epoch's next samples after batch i, cyclically: never one of the batch's own
    pairs (whose coefficient would tie with the positive), never twice the same pair, the same on every call."""
    import jax

    from lagda.learning.train import _epoch_batches, _step_negatives

    batches = _epoch_batches(jax.random.key(0), 3, 70, 16)  # 4 steps of 16; 6 pairs left out of this epoch
    for step in range(len(batches)):
        negatives = _step_negatives(batches, step, 48)
        assert len(set(negatives)) == 48 and not set(negatives) & set(batches[step])
        assert set(negatives) <= set(batches.reshape(-1))
        np.testing.assert_array_equal(negatives, _step_negatives(batches, step, 48))


def test_training_refuses_more_negatives_than_the_epoch_has_in_one_line(pairs, tmp_path):
    expected = "negatives = 2048 and batch_size = 16 exceed the 64 pairs an epoch uses: set negatives to at most 48"
    with pytest.raises(ValueError, match=expected) as error:
        train(learned(batch_size=16, eval_library=0), pairs, None, tmp_path / "run", progress=False)
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


def test_negatives_go_with_the_conditional_loss_only():
    with pytest.raises(ValueError, match="negatives = 2048 go with loss = 'cond' only: set negatives = 0"):
        learned(loss="joint").validate()
    assert learned(loss="joint", negatives=0).validate().negatives == 0
    with pytest.raises(ValueError, match="negatives must be >= 0"):
        learned(negatives=-1).validate()
