"""experiments/learning/fig14_retrieval.py reads the per-split evaluations of
experiments/learning/evaluate_whole_sets.sh."""

from experiments.learning.fig14_retrieval import csv_rows, merge_splits


def _final(split: str, library: int, libraries: int, value: float) -> dict:
    return {f"{split}/library": library, f"{split}/libraries": libraries,
            **{f"{split}/{d}/R@{k}": value for d in ("traj_to_coef", "coef_to_traj") for k in (1, 5)}}


def test_the_splits_of_one_library_size_make_one_final_evaluation():
    finals = [_final("test", 32268, 1, 0.9), _final("test", 128, 252, 0.99), _final("train", 32268, 1, 0.8),
              _final("train", 128, 252, 0.98)]
    merged = merge_splits(finals)
    assert len(merged) == 2
    whole, blocks = merged
    assert whole["test/traj_to_coef/R@1"] == 0.9 and whole["train/traj_to_coef/R@1"] == 0.8
    assert blocks["test/libraries"] == 252 and blocks["train/coef_to_traj/R@5"] == 0.98
    assert finals[0] == _final("test", 32268, 1, 0.9)  # the inputs are left as they were
    records = [{"epoch": 3, **_final("test", 16, 1, 0.5), **_final("train", 16, 1, 0.6)}]
    rows = csv_rows(records, [1, 5], 16, merged)
    assert [row.split(",")[:3] for row in rows[1:]] == [["3", "16", "16"], ["3", "32268", "32268"],
                                                       ["3", "128x252", "128x252"]]


def test_two_evaluations_of_the_same_split_stay_apart():
    merged = merge_splits([_final("test", 4096, 1, 0.5), _final("test", 4096, 1, 0.6)])
    assert [m["test/traj_to_coef/R@1"] for m in merged] == [0.5, 0.6]
