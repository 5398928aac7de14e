"""lagda.learning.retrieval on hand-made rankings and against unbatched references."""
import jax.numpy as jnp
import numpy as np
import pytest

from lagda.learning import losses, retrieval

_RNG_W = np.random.default_rng(123).standard_normal((5, 5))


def bilinear_similarity(u_emb, v_emb):
    """An asymmetric s(u, v) = u W v^T, so that swapped roles would be caught."""
    return u_emb @ jnp.asarray(_RNG_W) @ v_emb.T


# ---------------------------------------------------------------- recall_at_k by hand

def test_recall_hand_made_ranks_with_ties():
    # Pessimistic 0-based rank of the diagonal entry in each row:
    #   row 0: true 0.9 is the largest                      -> rank 0
    #   row 1: one item (0.8) above the true 0.5            -> rank 1
    #   row 2: all three others above                       -> rank 3
    #   row 3: one other item ties with the true 0.7        -> rank 1 (tie counts against)
    similarity = np.array(
        [
            [0.9, 0.1, 0.2, 0.3],
            [0.8, 0.5, 0.1, 0.2],
            [0.5, 0.6, 0.1, 0.7],
            [0.7, 0.2, 0.1, 0.7],
        ]
    )
    assert retrieval.recall_at_k(similarity, ks=(1, 2, 3, 4)) == {1: 0.25, 2: 0.75, 3: 0.75, 4: 1.0}


def test_recall_constant_scores_never_count_as_hits():
    similarity = np.ones((5, 5))
    assert retrieval.recall_at_k(similarity, ks=(1, 4, 5)) == {1: 0.0, 4: 0.0, 5: 1.0}


def test_recall_nan_true_score_is_a_miss_and_nan_others_do_not_outrank():
    similarity = np.array([[np.nan, 0.0, 0.0], [np.nan, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert retrieval.recall_at_k(similarity, ks=(1, 3)) == {1: 2 / 3, 3: 2 / 3}


def test_recall_rectangular_library_larger_than_queries():
    # 2 queries, 4 library items: true match of query i is item i.
    # row 0: 0.9 above the true 0.2 -> rank 1; row 1: 0.95, 0.97 above 0.9 -> rank 2.
    similarity = np.array([[0.2, 0.9, 0.1, 0.0], [0.0, 0.9, 0.95, 0.97]])
    assert retrieval.recall_at_k(similarity, ks=(1, 2, 3)) == {1: 0.0, 2: 0.5, 3: 1.0}


def test_recall_rejects_more_queries_than_library_items():
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        retrieval.recall_at_k(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="ks"):
        retrieval.recall_at_k(np.zeros((3, 3)), ks=(0,))


# ---------------------------------------------------------------- batched == unbatched

@pytest.fixture(scope="module")
def random_pairs():
    rng = np.random.default_rng(0)
    u = rng.standard_normal((37, 5))
    v = u + 1.2 * rng.standard_normal((37, 5))  # correlated: recalls strictly between 0 and 1
    return u, v


@pytest.mark.parametrize(
    "sim_fn", [losses.cosine_similarity, bilinear_similarity], ids=["cosine", "asymmetric_bilinear"]
)
def test_batched_recall_equals_unbatched(random_pairs, sim_fn):
    u, v = random_pairs
    ks = (1, 5, 10)
    full = np.asarray(sim_fn(u, v))  # full[i, j] = s(u_i, v_j)
    expected_u = retrieval.recall_at_k(full, ks)
    expected_v = retrieval.recall_at_k(full.T, ks)
    assert 0.0 < expected_u[5] < 1.0 and 0.0 < expected_v[5] < 1.0
    assert retrieval.batched_recall(u, v, sim_fn, ks, batch_size=8, query_is_u=True) == expected_u
    assert retrieval.batched_recall(v, u, sim_fn, ks, batch_size=8, query_is_u=False) == expected_v
    metrics = retrieval.retrieval_metrics(u, v, sim_fn, ks, batch_size=8)
    assert metrics == {
        **{f"coef_to_traj/R@{k}": expected_u[k] for k in ks},
        **{f"traj_to_coef/R@{k}": expected_v[k] for k in ks},
    }
    if sim_fn is bilinear_similarity:
        assert expected_u != expected_v  # the two directions genuinely differ here


def test_batched_recall_compiles_once_for_all_chunks(random_pairs):
    u, v = random_pairs
    kernel = retrieval._rank_kernel(losses.inner_product_similarity, True)
    before = kernel._cache_size()
    retrieval.batched_recall(u, v, losses.inner_product_similarity, batch_size=8)  # 5 chunks, last padded
    assert kernel._cache_size() == before + 1


def test_retrieval_metrics_planted_pairs_are_perfect():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((50, 6))
    v = 2.0 * u + 1e-3 * rng.standard_normal((50, 6))
    metrics = retrieval.retrieval_metrics(u, v, losses.cosine_similarity, ks=(1, 5), batch_size=16)
    assert set(metrics) == {"coef_to_traj/R@1", "coef_to_traj/R@5", "traj_to_coef/R@1", "traj_to_coef/R@5"}
    assert all(value == 1.0 for value in metrics.values())


def test_blockwise_recall_of_unrelated_embeddings_is_k_over_the_library():
    # With v independent of u the true match's rank is uniform on 0..B-1, so E R@k = k / B: a
    # library of B = 128 gives 5/128 where the whole 12,800-pair set gives 5/12,800.
    rng = np.random.default_rng(2)
    u, v = rng.standard_normal((12_800, 8)), rng.standard_normal((12_800, 8))
    blocks = retrieval.blockwise_retrieval_metrics(u, v, 128, losses.cosine_similarity, ks=(1, 5), batch_size=128)
    sd = np.sqrt(5 / 128 * (1 - 5 / 128) / 12_800)  # over 2 x 12,800 queries, per direction 12,800
    for direction in ("coef_to_traj", "traj_to_coef"):
        assert abs(blocks[f"{direction}/R@5"] - 5 / 128) < 4 * sd
        assert abs(blocks[f"{direction}/R@1"] - 1 / 128) < 4 * np.sqrt(1 / 128 / 12_800)
    whole = retrieval.retrieval_metrics(u, v, losses.cosine_similarity, ks=(5,), batch_size=1024)
    assert whole["coef_to_traj/R@5"] < 0.002


def test_blockwise_recall_leaves_out_the_tail_and_rejects_bad_blocks():
    rng = np.random.default_rng(3)
    u = rng.standard_normal((10, 4))
    v = u.copy()
    v[8:] = -u[8:]  # the 2 pairs after the last whole library of 4 would be misses
    assert all(x == 1.0 for x in retrieval.blockwise_retrieval_metrics(u, v, 4, losses.cosine_similarity).values())
    with pytest.raises(ValueError, match="block"):
        retrieval.blockwise_retrieval_metrics(u, v, 11)


def test_retrieval_metrics_rejects_unpaired_shapes():
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(5, 3\)"):
        retrieval.retrieval_metrics(np.zeros((4, 3)), np.zeros((5, 3)))


# ---------------------------------------------------------------- top_k over a bank

@pytest.mark.parametrize("batch_size", [64, 1000, 4096], ids=["chunked_uneven", "one_chunk", "chunk_gt_bank"])
def test_top_k_equals_full_argsort(batch_size):
    rng = np.random.default_rng(2)
    bank = rng.standard_normal((1000, 5))  # 1000 = 15 * 64 + 40: last chunk overlaps
    query = rng.standard_normal((3, 5))
    k = 7
    indices, scores = retrieval.top_k(query, bank, k, losses.cosine_similarity, batch_size, dtype="float64")
    full = np.asarray(losses.cosine_similarity(bank, query)).T  # (q, n_bank)
    expected_indices = np.argsort(-full, axis=1)[:, :k]
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(scores, np.take_along_axis(full, expected_indices, axis=1), rtol=1e-12)


def test_top_k_finds_the_planted_item_first_in_float32():
    rng = np.random.default_rng(3)
    bank = rng.standard_normal((20_000, 8)).astype(np.float32)
    planted = 12_345
    query = bank[planted] + 1e-3 * rng.standard_normal(8).astype(np.float32)  # 1-D query
    indices, scores = retrieval.top_k(query, bank, 5, losses.cosine_similarity, batch_size=4096)
    assert indices.shape == (5,) and scores.shape == (5,) and scores.dtype == np.float32
    assert int(indices[0]) == planted
    assert np.all(np.diff(np.asarray(scores)) <= 0)
    assert len(set(np.asarray(indices).tolist())) == 5  # no duplicates from the overlapping last chunk


@pytest.mark.parametrize("n", [2, 6, 40], ids=["chunk_lt_k", "chunk_eq_k", "chunk_gt_k"])
def test_merge_top_k_equals_a_stable_sort_of_everything_seen(n):
    """Merging chunk by chunk keeps the k best of all items seen, the earliest first among ties."""
    rng = np.random.default_rng(5)
    k, q = 6, 3
    scores = rng.integers(0, 4, size=(q, 3 * n)).astype(np.float64)  # few values: many ties
    items = np.stack([np.arange(3 * n), -np.arange(3 * n)], axis=1)  # (item, 2): vector-valued items
    top_s, top_i = jnp.full((q, k), -jnp.inf), jnp.zeros((q, k, 2), items.dtype)
    for start in range(0, 3 * n, n):
        top_s, top_i = retrieval.merge_top_k(top_s, top_i, jnp.asarray(scores[:, start:start + n]),
                                             jnp.asarray(items[start:start + n]), k)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(top_s, np.take_along_axis(scores, order, axis=1))
    np.testing.assert_array_equal(top_i, items[order])


def test_top_k_rejects_bad_k_and_shapes():
    bank = np.zeros((10, 3))
    with pytest.raises(ValueError, match="k must be"):
        retrieval.top_k(np.zeros(3), bank, 11)
    with pytest.raises(ValueError, match=r"\(4,\).*\(10, 3\)"):
        retrieval.top_k(np.zeros(4), bank, 1)


def test_softmax_weights_are_eq_28_weights():
    scores = np.array([[2.0, 1.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    expected = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    weights = retrieval.softmax_weights(scores)
    np.testing.assert_allclose(weights, expected, rtol=1e-12)
    np.testing.assert_allclose(retrieval.softmax_weights(scores + 1000.0), expected, rtol=1e-12)  # shift-invariant
