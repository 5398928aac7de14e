"""`lagda train` stopped (Ctrl-C) at each checkpoint transition, then resumed: the uninterrupted run's
checkpoints and losses, no temporary file left; a complete run is left untouched ("already complete")."""

import json

import jax
import numpy as np
import pytest
from flax import nnx

from lagda.learning.config import tiny
from lagda.learning.model import load_run
from lagda.learning.train import train
from lagda.testing import make_pairs
from simulate import atomic

CONFIG = tiny(eval_library=0)  # 2 epochs of 3 steps


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(24, seed=1)


@pytest.fixture(scope="module")
def straight(pairs, tmp_path_factory):
    run = tmp_path_factory.mktemp("straight") / "run"
    train(CONFIG, pairs, None, run, progress=False)
    return run


def params(run):
    return [np.asarray(leaf) for leaf in jax.tree.leaves(nnx.state(load_run(run)[0]))]


def losses(run):
    return [(r["epoch"], r["train_loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]


def temporaries(run):
    return [p for p in run.rglob("*") if ".tmp-" in p.name or "orbax-checkpoint-tmp" in p.name]


@pytest.mark.parametrize("point", ["config:written", "dataset:renamed", "metrics:written@1", "metrics:renamed@1",
                                   "checkpoint:saved@1", "metrics:renamed@2", "checkpoint:saved@2"])
def test_ctrl_c_at_each_transition_then_resume_equals_the_uninterrupted_run(point, pairs, straight, monkeypatch,
                                                                            capsys, tmp_path):
    run = tmp_path / "run"
    monkeypatch.setenv(atomic.FAULT_ENV, f"{point}:interrupt")
    atomic.reset_fault_counts()
    with pytest.raises(KeyboardInterrupt):
        train(CONFIG, pairs, None, run, progress=False)
    assert not temporaries(run)
    monkeypatch.delenv(atomic.FAULT_ENV)
    train(CONFIG, pairs, None, run, resume=True, progress=False)
    err = capsys.readouterr().err
    assert ("already complete" in err) == (point == "checkpoint:saved@2")
    assert losses(run) == losses(straight)
    for a, b in zip(params(run), params(straight), strict=True):
        np.testing.assert_array_equal(a, b)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == sorted(
        p.name for p in (straight / "checkpoints").iterdir())
    assert not temporaries(run)


def test_resume_of_a_complete_run_changes_nothing(pairs, straight, capsys):
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in straight.rglob("*") if p.is_file()}
    train(CONFIG, pairs, None, straight, resume=True, progress=False)
    assert "already complete (2 epochs): nothing changed" in capsys.readouterr().err
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in straight.rglob("*") if p.is_file()} == before


def test_resume_with_nothing_saved_starts_afresh_and_says_so(pairs, straight, capsys, tmp_path):
    train(CONFIG, pairs, None, tmp_path / "run", resume=True, progress=False)
    assert "nothing to resume" in capsys.readouterr().err
    assert losses(tmp_path / "run") == losses(straight)


def test_resume_on_other_training_data_is_refused_naming_it(pairs, monkeypatch, tmp_path):
    monkeypatch.setenv(atomic.FAULT_ENV, "checkpoint:saved@1:interrupt")
    atomic.reset_fault_counts()
    with pytest.raises(KeyboardInterrupt):
        train(CONFIG, pairs, None, tmp_path / "run", progress=False)
    monkeypatch.delenv(atomic.FAULT_ENV)
    with pytest.raises(ValueError, match=r"training data differs from the saved run's in \['n_pairs'\]"):
        train(CONFIG, pairs.subset(slice(0, 16)), None, tmp_path / "run", resume=True, progress=False)


def test_a_stale_orbax_temporary_is_removed_and_reported(pairs, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(atomic.FAULT_ENV, "checkpoint:saved@1:interrupt")
    atomic.reset_fault_counts()
    with pytest.raises(KeyboardInterrupt):
        train(CONFIG, pairs, None, tmp_path / "run", progress=False)
    monkeypatch.delenv(atomic.FAULT_ENV)
    stale = tmp_path / "run" / "checkpoints" / "2.orbax-checkpoint-tmp-1234"  # what SIGKILL during a save leaves
    stale.mkdir()
    train(CONFIG, pairs, None, tmp_path / "run", resume=True, progress=False)
    assert f"removed {stale}" in capsys.readouterr().err and not stale.exists()


def test_a_second_run_into_the_same_folder_is_refused_before_it_writes(pairs, tmp_path):
    run = tmp_path / "run"
    with atomic.OutputLock(run, "lagda train"):  # a run writing it (another process's lock: lagda simulate's test)
        with pytest.raises(atomic.Busy, match=f"another lagda train is writing {run} "):
            train(CONFIG, pairs, None, run, resume=True, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
