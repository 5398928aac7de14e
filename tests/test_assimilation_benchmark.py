"""The benchmark's per-regime verdict (experiments/assimilation_benchmark.summary) on hand-made rows."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _benchmark():
    spec = importlib.util.spec_from_file_location("assimilation_benchmark", ROOT / "experiments" / "assimilation_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(regime, method, err, seconds):
    return {"regime": regime, "drifters": "1", "method": method, "velocity_rel_l2": str(err), "seconds_per_track": str(seconds)}


def test_summary_names_the_best_of_each_family_and_the_time_ratios():
    rows = [_row("noisy", "linear", 0.9, 0.01), _row("noisy", "var", 0.8, 2.0), _row("noisy", "enkf", 1.2, 8.0),
            _row("noisy", "embed", 1.1, 0.02), _row("noisy", "hybrid:none", 0.95, 0.1), _row("noisy", "hybrid", 0.7, 0.5),
            _row("sparse", "linear", 0.5, 0.01), _row("sparse", "var", 0.6, 3.0)]  # no learned method: no verdict
    lines = _benchmark().summary(rows).splitlines()
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["noisy", "1", "var", "0.8", "hybrid", "0.7", "0.875", "2", "0.5", "4.0", "20"]
