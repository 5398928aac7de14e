"""experiments/assimilation/benchmark.py: the per-regime verdict and truth-map ratios on hand-made rows,
and a smoke run of the script (--quick, one regime, the cheap methods)."""

import csv
import math

import pytest


@pytest.fixture(scope="module")
def bench():
    from experiments.assimilation import benchmark as assimilation_benchmark

    return assimilation_benchmark


def _row(regime, method, median, seconds):
    return {"regime": regime, "drifters": "1", "method": method, "velocity_rel_l2": str(2 * median),
            "velocity_rel_l2_median": str(median), "seconds_per_track": str(seconds), "velocity_calibration": "0.9",
            "velocity_calibration_se": "0.01"}


def test_summary_names_the_best_of_each_family_against_truth_map(bench):
    rows = [_row("noisy", "truth-map", 0.4, 1.0), _row("noisy", "linear", 0.9, 0.01), _row("noisy", "var", 0.8, 2.0),
            _row("noisy", "enkf", 1.2, 8.0), _row("noisy", "search:prior", 0.6, 3.0), _row("noisy", "embed", 1.1, 0.02),
            _row("noisy", "hybrid:none", 0.95, 0.1), _row("noisy", "hybrid", 0.5, 0.5),
            _row("noisy", "posterior-mean", 0.45, 20.0), _row("sparse", "linear", 0.5, 0.01),
            _row("sparse", "var", 0.6, 3.0)]  # no oracle, no learned method
    bench.add_truth_ratios(rows)
    ratios = {(r["regime"], r["method"]): r["vs_truth_map"] for r in rows}
    assert ratios[("noisy", "var")] == pytest.approx(2.0) and ratios[("noisy", "truth-map")] == 1.0
    assert math.isnan(ratios[("sparse", "linear")])
    lines = bench.summary(rows).splitlines()
    assert len(lines) == 4
    noisy = [c.strip() for c in lines[2].strip("|").split("|")]
    assert noisy == ["noisy", "0.4", "0.45", "var", "0.8", "2", "search:prior", "0.6", "1.5", "hybrid", "0.5", "1.25",
                     "1.11", "0.900 +- 0.010 below 0.95", "2", "0.5", "4.0"]
    sparse = [c.strip() for c in lines[3].strip("|").split("|")]
    assert sparse[:6] == ["sparse", "nan", "nan", "linear", "0.5", "nan"] and sparse[6:] == ["-"] * 11


def test_method_families(bench):
    assert [bench.family(m) for m in ("hybrid:none", "hybrid+search", "search:prior", "truth-map", "var")] == \
        ["hybrid", "hybrid", "search", "truth-map", "var"]


def test_quick_run_writes_the_tables_with_truth_map_as_the_reference(bench, tmp_path):
    out = tmp_path / "bench.csv"
    assert bench.main(["--quick", "--regimes", "sparse100", "--methods", "truth-map,linear,search:linear,nonsense",
                       "--out", str(out)]) == 0
    with open(out, newline="") as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert list(rows) == ["truth-map", "linear", "search:linear"]  # the unknown method is skipped
    assert float(rows["truth-map"]["vs_truth_map"]) == 1.0
    for r in rows.values():
        assert float(r["vs_truth_map"]) == pytest.approx(float(r["velocity_rel_l2_median"])
                                                         / float(rows["truth-map"]["velocity_rel_l2_median"]))
    # the oracle starts in the truth's basin: no method beats it by much on these exact sparse tracks
    assert all(float(r["vs_truth_map"]) > 0.5 for r in rows.values())
    assert float(rows["search:linear"]["basin_fraction"]) == 1.0  # one start: alone in its basin
    assert math.isnan(float(rows["linear"]["map_cost"])) and float(rows["truth-map"]["map_cost"]) > 0
    assert "| sparse100 |" in out.with_suffix(".md").read_text()


def test_a_run_where_every_method_is_skipped_is_an_error_and_writes_nothing(bench, tmp_path, capsys):
    out = tmp_path / "bench.csv"
    assert bench.main(["--quick", "--regimes", "sparse100", "--methods", "nonsense", "--out", str(out)]) == 2
    assert "error: no method ran" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_ratios_to_both_references_per_regime(bench):
    """vs_truth_map and vs_posterior_mean divide each row's median error by the reference row's of its regime."""
    rows = [{"regime": "a", "method": "truth-map", "velocity_rel_l2_median": 0.2},
            {"regime": "a", "method": "posterior-mean", "velocity_rel_l2_median": 0.4},
            {"regime": "a", "method": "hybrid", "velocity_rel_l2_median": 0.5},
            {"regime": "b", "method": "hybrid", "velocity_rel_l2_median": 0.3}]
    bench.add_truth_ratios(rows)
    assert [r["vs_truth_map"] for r in rows[:3]] == [1.0, 2.0, 2.5] and math.isnan(rows[3]["vs_truth_map"])
    assert [r["vs_posterior_mean"] for r in rows[:3]] == [0.5, 1.0, 1.25] and math.isnan(rows[3]["vs_posterior_mean"])
    # --yardstick: the posterior mean of another start (here var's Laplace Gaussian) is the reference instead
    rows.append({"regime": "a", "method": "posterior-mean:var", "velocity_rel_l2_median": 0.25})
    bench.add_truth_ratios(rows, "posterior-mean:var")
    assert [r["vs_posterior_mean"] for r in rows[:3]] == [0.8, 1.6, 2.0] and rows[4]["vs_posterior_mean"] == 1.0
    assert bench.summary(rows, "posterior-mean:var").splitlines()[2].split("|")[3].strip() == "0.25"


def test_coverage_over_flows_with_its_standard_error_against_the_calibrated_095(bench):
    """The summary's coverage of a row is its mean over flows +- the standard error; 0.95 three se away is flagged."""
    records = [{"regime": "a", "method": "posterior-mean", "field": str(f), "drifters": 1, "obs": 4,
                "velocity_rel_l2": 0.5, "velocity_calibration": c, "seconds_per_track": 1.0, "basin_fraction": "nan",
                "map_cost": "nan", "wall_s": 1.0, "track_velocity_rel_l2": 0.1, "resim_rms_true": 0.1,
                "forecast_rms": 0.1} for f, c in enumerate((0.86, 0.88, 0.90, 0.92))]
    row = bench.summarise(records)[0]
    se = math.sqrt(((0.03**2 + 0.01**2) * 2) / 3) / 2  # sample std (ddof 1) / sqrt(4) around the mean 0.89
    assert row["velocity_calibration"] == pytest.approx(0.89) and row["velocity_calibration_se"] == pytest.approx(se)
    assert bench.calibration(row) == f"0.890 +- {se:.3f} below 0.95"  # 0.89 + 3 * 0.0129 < 0.95
    assert bench.calibration({**row, "velocity_calibration": 0.93}) == f"0.930 +- {se:.3f}"
    assert bench.calibration({**row, "velocity_calibration": 0.995}) == f"0.995 +- {se:.3f} above 0.95"
    assert bench.calibration({**row, "velocity_calibration_se": float("nan")}) == "0.890"  # one flow: no se
    # records written before the central-interval coverage existed: not measured, not zero
    assert math.isnan(row["velocity_quantile_calibration"]) and math.isnan(row["velocity_quantile_calibration_se"])
    assert math.isnan(row["divergent_max"])
    # a regime merged from older files and newer ones: the largest divergence measured, not nan
    mixed = records[:2] + [{**r, "divergent_max": d} for r, d in zip(records[2:], (0.2, 0.05))]
    assert bench.summarise(mixed)[0]["divergent_max"] == 0.2


def test_yardstick_flows_keep_only_the_flows_the_sampler_ran_on(bench):
    """--yardstick-flows: a sampler run on some flows is compared flow for flow, every method on those flows only."""
    records = [{"regime": regime, "method": method, "field": str(f)}
               for regime in ("a", "b") for method in ("hybrid", "linear") for f in range(4)]
    records += [{"regime": "a", "method": "posterior-mean:var", "field": "2"},
                {"regime": "b", "method": "posterior-mean:var", "field": "0"},
                {"regime": "b", "method": "posterior-mean:var", "field": "3"}]
    kept = bench.on_yardstick_flows(records, "posterior-mean:var")
    assert {(r["regime"], r["field"]) for r in kept} == {("a", "2"), ("b", "0"), ("b", "3")}
    assert sorted(r["method"] for r in kept if r["regime"] == "b") == ["hybrid"] * 2 + ["linear"] * 2 + [
        "posterior-mean:var"] * 2
    with pytest.raises(SystemExit):
        bench.parse_args(["--yardstick-flows"])  # only a merge has flows to choose


def test_the_yardstick_sampler_is_given_the_true_noise(bench, monkeypatch):
    """posterior-mean is the posterior given the regime's noise, on exact tracks the misfit's floor (the evidence
    cannot tell noise from signal there); with @estimated it estimates, as a user's run does; --sample-set settings
    reach the sampler, typed."""
    import argparse

    given = []

    def sampler(**options):
        given.append((options["noise_std"], options["final_moves"], options["target_acceptance"]))
        raise RuntimeError("only the options are checked")

    monkeypatch.setitem(bench.METHODS, "sample", sampler)
    settings = argparse.Namespace(sample_particles=8, sample_runs=2, sample_batch=0, scorer=None, run=None,
                                  sample_set=["final_moves=3", "target_acceptance=0.7"])
    for method, regime in (("posterior-mean", "sparse100"), ("posterior-mean:var", "sparse10-noisy"),
                           ("posterior-mean@estimated", "sparse100")):
        with pytest.raises(RuntimeError):
            bench.run_method(method, None, None, bench.REGIMES[regime], settings)
    assert bench.SampleConfig().final_moves != 3 and bench.SampleConfig().target_acceptance != 0.7  # not the defaults
    assert given == [(bench.SampleConfig().sigma_floor, 3, 0.7), (1e-3, 3, 0.7), (None, 3, 0.7)]


def test_sample_set_is_typed_checked_and_recorded_in_the_rows(bench):
    """--sample-set NAME=VALUE: typed as `lagda assimilate` reads the option, one error line for a bad pair, and a
    summary row names the settings its flows ran with (none for records written before the column existed)."""
    assert bench.sample_settings(["final_moves=4", "target_acceptance=0.9", "mass_matrix=diagonal"]) == {
        "final_moves": 4, "target_acceptance": 0.9, "mass_matrix": "diagonal"}
    for bad, reason in ((["final_moves"], "expects NAME=VALUE"), (["leapfrog=3"], "no setting leapfrog"),
                        (["final_moves=x"], "invalid int"), (["final_moves=0"], "final_moves must be >= 1"),
                        (["mass_matrix=full"], "invalid choice")):
        with pytest.raises(ValueError, match=reason):
            bench.sample_settings(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--sample-set", "leapfrog=3"])
    record = {"regime": "a", "method": "posterior-mean", "drifters": 1, "obs": 4, "velocity_rel_l2": 0.5,
              "velocity_calibration": 0.9, "seconds_per_track": 1.0, "wall_s": 1.0}
    records = [{**record, "field": "0", "sampler_settings": "final_moves=4"}, {**record, "field": "1"}]
    assert bench.summarise(records)[0]["sampler_settings"] == "final_moves=4"
    assert bench.summarise(records[1:])[0]["sampler_settings"] == ""
