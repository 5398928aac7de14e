"""Evaluation: JSON keys through the CLI, and clear errors for bad runs or mismatched data."""
import json

import numpy as np
import pytest

from lagda.cli import main
from lagda.learning.config import tiny
from lagda.learning.train import train
from lagda.testing import make_pairs


def _save_npz(data, path):
    np.savez(path, coef=data.coef, positions=data.positions, time=data.time, k1=data.k1, k2=data.k2,
             omega=data.omega, prior_scale=data.prior_scale)


@pytest.fixture(scope="module")
def run_and_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    data = make_pairs(16, seed=3)
    _save_npz(data, root / "test.npz")
    train(tiny(epochs=1, eval_library=0), data, None, root / "run", progress=False)
    return root


def test_cli_writes_metric_keys(run_and_data, capsys):
    out = run_and_data / "metrics.json"
    assert main(["evaluate", "--model", str(run_and_data / "run"), "--data", str(run_and_data / "test.npz"),
                 "--out", str(out), "--batch-size", "8"]) == 0
    metrics = json.loads(out.read_text())
    recall = {f"test/{d}/R@{k}" for d in ("coef_to_traj", "traj_to_coef") for k in (1, 5, 10)}
    assert set(metrics) == recall | {"test/library", "test/libraries"}
    assert (metrics["test/library"], metrics["test/libraries"]) == (16, 1)
    assert all(0.0 <= metrics[key] <= 1.0 for key in recall)
    assert metrics["test/coef_to_traj/R@5"] >= metrics["test/coef_to_traj/R@1"]
    assert "libraries (test: 16 pairs x 1)" in capsys.readouterr().out


def test_cli_blocks_average_over_disjoint_libraries(run_and_data, capsys):
    out = run_and_data / "blocks.json"
    assert main(["evaluate", "--model", str(run_and_data / "run"), "--data", str(run_and_data / "test.npz"),
                 "--out", str(out), "--library-size", "5", "--blocks", "--no-progress"]) == 0
    assert "%|" not in capsys.readouterr().err  # no bar
    metrics = json.loads(out.read_text())
    assert (metrics["test/library"], metrics["test/libraries"]) == (5, 3)
    assert metrics["test/coef_to_traj/R@5"] == 1.0  # R@5 in a library of 5 counts every query
    assert main(["evaluate", "--model", str(run_and_data / "run"), "--data", str(run_and_data / "test.npz"),
                 "--blocks"]) == 2
    assert "blocks needs a library size" in capsys.readouterr().err


def test_errors_are_one_line(run_and_data, tmp_path, capsys):
    assert main(["evaluate", "--model", str(tmp_path), "--data", str(run_and_data / "test.npz")]) == 2
    assert "not a lagda run directory" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(run_and_data / "run"), "--data", str(tmp_path / "no.nc")]) == 2
    assert "no such dataset file" in capsys.readouterr().err
    other = make_pairs(8, seed=4)
    other = type(other)(**{**vars(other), "omega": other.omega + 1.0})
    _save_npz(other, tmp_path / "other.npz")
    assert main(["evaluate", "--model", str(run_and_data / "run"), "--data", str(tmp_path / "other.npz")]) == 2
    err = capsys.readouterr().err
    assert "frequencies omega that differ" in err and len(err.strip().splitlines()) == 1
