"""The shipped mixture-trained set encoder (lagda/shipped/learned) reads any observation regime:
gaps are masked, not read; sparse multi-drifter tracks give hybrid a learned conditional."""

import dataclasses

import jax
import numpy as np
import pytest

from lagda.assimilation.methods.learned import field_queries, scorer_from_run
from lagda.assimilation.methods.registry import Hybrid
from lagda.assimilation.model import flow_model
from lagda.examples import shipped
from lagda.io.formats import read_tracks

STRIDE = 100  # RK4 steps between kept positions: the sparse regime of the benchmark


@pytest.fixture(scope="module")
def learned():
    scorer, meta = scorer_from_run(shipped("learned"))
    return scorer, meta


@pytest.fixture(scope="module")
def sparse():
    """Two flows of the demo tracks, every 100th position kept (10 per drifter)."""
    tracks = read_tracks(shipped("example_tracks.nc"))
    keep = np.isin(tracks.field, [0, 1])
    return dataclasses.replace(tracks, positions=tracks.positions[keep][:, STRIDE - 1::STRIDE],
                               times=tracks.times[keep][:, STRIDE - 1::STRIDE], field=tracks.field[keep],
                               trajectory_id=tracks.trajectory_id[keep], true_coef=tracks.true_coef[:2],
                               release=None if tracks.release is None else tracks.release[keep])


def test_gaps_and_padding_are_masked_not_read(learned, sparse):
    scorer, _ = learned
    assert scorer.any_regime and scorer.times is None
    plain, problems = field_queries(sparse, scorer)
    assert problems == [None, None]
    # the same observations with NaN gap rows interleaved and NaN padding at the end
    n_traj, n_obs = sparse.times.shape
    slots = np.full((n_traj, 2 * n_obs + 3), np.nan)
    positions = np.full((*slots.shape, 2), np.nan)
    slots[:, 1:2 * n_obs:2] = sparse.times
    positions[:, 1:2 * n_obs:2] = sparse.positions
    gappy = dataclasses.replace(sparse, positions=positions, times=slots)
    again, _ = field_queries(gappy, scorer)
    for a, b in zip(plain, again):  # float32 sums over other padded shapes: agreement to rounding
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # the learned conditional depends on which observations there are
    fewer, _ = field_queries(dataclasses.replace(sparse, positions=sparse.positions[:, ::2],
                                                 times=sparse.times[:, ::2]),
                             scorer)
    assert np.max(np.abs(fewer[0] - plain[0])) > 1e-2


def test_hybrid_uses_the_learned_conditional_on_sparse_tracks(learned, sparse):
    scorer, meta = learned
    model = flow_model(meta["k1"], meta["k2"], meta["omega"], meta["prior_scale"], float(meta["time"][0]))
    hybrid = Hybrid(scorer, members=8, bank_size=4096, bank_batch=4096, refine="none")
    post = hybrid(sparse, model, jax.random.key(0))
    assert all(info["learned_conditional"] and "learned_fallback" not in info for info in post.info)
