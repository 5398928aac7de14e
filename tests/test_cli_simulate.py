"""`lagda simulate`: flags override the preset, errors are one line + exit 2, Ctrl-C resumes."""

import dataclasses

import numpy as np
import pytest

from lagda import __version__, cli
from simulate import generate, schema
from simulate.config import small

# K = 9 modes, 200 steps, 10 fields in chunks of 3 (the statics of tests/test_generate.py)
FLAGS = ["--preset", "small", "--n-samples", "10", "--k1-range", "-1", "1", "--k2-range", "-1", "1",
         "--t-final", "0.02", "--chunk-size", "3", "--seed", "5"]
CONFIG = small(n_samples=10, k1_min=-1, k1_max=1, k2_min=-1, k2_max=1, t_final=0.02, chunk_size=3, seed=5)


def run(capsys, *argv):
    """Returns (exit code, stdout, stderr) of `lagda simulate ...`."""
    code = cli.main(["simulate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_line(err):
    """Returns the last stderr line, checking it is the only non-progress-bar line."""
    lines = [line for line in err.splitlines() if line.strip() and "field/s" not in line and "it/s" not in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A file made by the CLI, its summary line."""
    out = tmp_path_factory.mktemp("cli") / "a.nc"
    code = cli.main(["simulate", *FLAGS, "--out", str(out)])
    assert code == 0
    return out


def test_simulate_writes_the_configured_dataset(made):
    with schema.open_dataset(made) as ds:
        assert schema.config_from_attrs(ds) == CONFIG
        assert ds.attrs["history"].endswith("lagda simulate " + " ".join(FLAGS) + f" --out {made}")


def test_summary_line_reports_the_wander_statistic(capsys, tmp_path):
    code, out, err = run(capsys, *FLAGS, "--out", str(tmp_path / "b.nc"))
    assert code == 0
    assert out.count("\n") == 1 and "median displacement at T = 0.02" in out and "leaving the unit square" in out
    assert "field/s" in err  # the tqdm bar counts fields


def test_flags_override_only_what_they_name(capsys, tmp_path):
    out = tmp_path / "c.nc"
    code, _, _ = run(capsys, *FLAGS, "--release-point", "0.25", "0.5", "--steady", "--precision", "float64",
                     "--out", str(out))
    assert code == 0
    with schema.open_dataset(out) as ds:
        expected = dataclasses.replace(CONFIG, release_x=0.25, release_y=0.5, steady=True, precision="float64")
        assert schema.config_from_attrs(ds) == expected
        assert np.all(ds["omega"].values == 0) and np.all(ds["x0"].values == 0.25)


@pytest.mark.parametrize("extra, message", [
    (["--dt=-0.001"], "dt must be > 0"),
    (["--stride", "7"], "stride = 7 does not divide the 200 steps"),
    (["--k1-range", "1", "0"], "empty mode set"),
    (["--out", "/nonexistent-dir/x.nc"], "cannot write /nonexistent-dir/x.nc"),
    (["--like", "/nonexistent-dir/like.nc"], "no such dataset file"),
], ids=["negative-dt", "stride", "empty-modes", "unwritable", "missing-like"])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, extra, message):
    argv = [*FLAGS, "--out", str(tmp_path / "x.nc"), *extra]
    code, out, err = run(capsys, *argv)
    assert code == 2
    line = error_line(err)
    assert line.startswith("lagda simulate: error: ") and message in line
    assert not list(tmp_path.iterdir())


def test_existing_output_needs_overwrite(capsys, made):
    before = made.read_bytes()
    code, _, err = run(capsys, *FLAGS, "--out", str(made))
    assert code == 2 and "already exists: pass --overwrite" in error_line(err)
    assert made.read_bytes() == before


def test_interrupt_then_resume(capsys, monkeypatch, made, tmp_path):
    out = tmp_path / "r.nc"
    real = generate.generate_dataset

    def interrupted(*args, progress, **kwargs):
        def progress_then_ctrl_c(done, total):
            progress(done, total)
            if done >= 3:
                raise KeyboardInterrupt
        return real(*args, progress=progress_then_ctrl_c, **kwargs)

    monkeypatch.setattr(generate, "generate_dataset", interrupted)
    code, _, err = run(capsys, *FLAGS, "--out", str(out))
    assert code == 130 and "rerun the same command with --resume" in err
    monkeypatch.setattr(generate, "generate_dataset", real)
    code, _, err = run(capsys, *FLAGS, "--seed", "6", "--out", str(out), "--resume")
    assert code == 2 and "cannot resume" in error_line(err) and "(seed)" in err
    code, _, err = run(capsys, *FLAGS, "--out", str(out))
    assert code == 2 and "pass --resume to continue it" in error_line(err)
    code, _, _ = run(capsys, *FLAGS, "--out", str(out), "--resume")
    assert code == 0 and not generate.partial_dir(out).exists()
    with schema.open_dataset(out) as resumed, schema.open_dataset(made) as whole:
        for name in ("coef_re", "coef_im", "x", "y", "omega"):
            np.testing.assert_array_equal(resumed[name].values, whole[name].values)


def test_like_copies_frequencies_and_refuses_conflicts(capsys, made, tmp_path):
    like_flags = ["--preset", "small", "--n-samples", "10", "--t-final", "0.02", "--chunk-size", "3",
                  "--seed", "8", "--like", str(made)]
    code, _, _ = run(capsys, *like_flags, "--out", str(tmp_path / "test.nc"))
    assert code == 0  # the mode set (k ranges) comes from the --like file, not the preset
    with schema.open_dataset(tmp_path / "test.nc") as test, schema.open_dataset(made) as train:
        np.testing.assert_array_equal(test["omega"].values, train["omega"].values)
        assert test.sizes["mode"] == 9 and test.attrs["seed"] == 8
    code, _, err = run(capsys, *like_flags, "--k1-range", "-2", "2", "--out", str(tmp_path / "bad.nc"))
    assert code == 2 and "conflicts with k1_min = -1 of the --like file" in error_line(err)


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lagda {__version__}"


def test_shard_flag_writes_one_block_and_bad_shards_are_one_line(capsys, tmp_path, made):
    code, out, _ = run(capsys, *FLAGS, "--shard", "1/3", "--out", str(tmp_path / "s1.nc"))
    assert code == 0 and "shard 1/3 (3 of 10 fields)" in out
    with schema.open_dataset(tmp_path / "s1.nc", load=True) as shard, schema.open_dataset(made, load=True) as whole:
        np.testing.assert_array_equal(shard["x"].values, whole["x"].values[3:6])
    for bad in ("3/3", "x/2"):
        code, _, err = run(capsys, *FLAGS, "--shard", bad, "--out", str(tmp_path / "bad.nc"))
        assert code == 2 and "shard" in error_line(err) and not (tmp_path / "bad.nc").exists()
