"""What assimilation decides is said, not silent: the trained temperature is used, tracks the encoder
cannot read are refused (hybrid falls back and says why), guessed settings come with notes, each
field's decisions go to the result file and one CLI line, and --debug shows tracebacks."""

import dataclasses
import json

import numpy as np
import pytest

from lagda.assimilation.assimilate import assimilate_file
from lagda.assimilation.methods.learned import scorer_from_run
from lagda.assimilation.methods.registry import METHODS
from lagda.assimilation.model import flow_model, model_settings
from lagda.assimilation.settings import AssimilateSettings
from lagda.cli import build_parser, main
from lagda.io.results import read_result
from lagda.io.tracks import Tracks, write_tracks
from lagda.learning.config import tiny
from lagda.learning.model import load_trained, run_identity, trained_tau
from lagda.learning.train import train
from lagda.testing import make_pairs, make_twin, write_twin_tracks

FAST = dict(bank_size=256, bank_batch=256, top_k=4, members=8)  # the bank of every learned method


@pytest.fixture(scope="module")
def pairs():
    return make_pairs(8, seed=3)


@pytest.fixture(scope="module")
def run(pairs, tmp_path_factory):
    """A one-epoch tiny run that learns its temperature (observed at t_j = j 1e-3, j = 1..100)."""
    run_dir = tmp_path_factory.mktemp("runs") / "learn_tau"
    train(tiny(eval_library=0, epochs=1, learn_tau=True, lr=3e-2), pairs, None, run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="module")
def scorer(run):
    return scorer_from_run(run)[0]


def _tracks(pairs, times=None):
    """Returns the pairs' tracks (one drifter per field) as Tracks, at `times` `(obs,)` (default: the true ones)."""
    positions = np.asarray(pairs.positions[:, 0], np.float64)
    times = pairs.time if times is None else times
    n = len(positions)
    return Tracks(positions, np.tile(times, (n, 1)), np.arange(n), np.arange(n))


def _assimilate(pairs, tracks, method, scorer):
    options = {**FAST, "refine": "none"} if method == "hybrid" else FAST
    model = flow_model(pairs.k1, pairs.k2, pairs.omega, pairs.prior_scale, 1e-3)
    return METHODS[method](scorer, **options)(tracks, model)


def test_learned_methods_use_the_trained_temperature(run, scorer):
    model, config, _ = load_trained(run)
    assert scorer.tau == pytest.approx(trained_tau(model), rel=1e-6)
    assert abs(scorer.tau / config.tau - 1.0) > 1e-3  # training moved it away from the initial value


def test_other_observation_times_or_gaps_are_refused_by_retrieve_and_embed(pairs, scorer):
    assert _assimilate(pairs, _tracks(pairs), "retrieve", scorer).n_field == 8  # the training times are read
    stride_2 = _tracks(pairs, 2 * pairs.time)  # as many positions, claimed at twice the spacing
    shifted = _tracks(pairs, pairs.time + 5e-3)
    gap = _tracks(pairs)
    gap.positions[3, 40:45] = np.nan
    for tracks, message in ((stride_2, "field 0: drifter 0 is observed at 100 times from 0.002 to 0.2, but the "
                                       "encoder reads 100 times from 0.001 to 0.1"),
                            (shifted, "field 0: drifter 0 is observed at 100 times from 0.006"),
                            (gap, "field 3: drifter 0 has 5 missing positions")):
        for method in ("retrieve", "embed"):
            with pytest.raises(ValueError, match=message):
                _assimilate(pairs, tracks, method, scorer)


def test_hybrid_falls_back_per_field_and_records_why(pairs, scorer):
    tracks = _tracks(pairs)
    tracks.positions[3, 40:45] = np.nan
    post = _assimilate(pairs, tracks, "hybrid", scorer)
    info = post.diagnostics()
    assert [i["learned_conditional"] for i in info] == [True] * 3 + [False] + [True] * 4
    assert info[3]["learned_fallback"].startswith("prior instead: drifter 0 has 5 missing positions")
    assert "mean" not in info[0] and "var" not in info[0]  # the learned moments stay out of the diagnostics
    json.dumps(info, allow_nan=False)


def _with_stride(tracks: Tracks, stride: int) -> Tracks:
    return dataclasses.replace(tracks, positions=tracks.positions[:, stride - 1 :: stride],
                               times=tracks.times[:, stride - 1 :: stride])


def test_model_settings_without_a_run_say_what_they_guessed():
    twin = make_twin(n_field=1, n_drifter=1, n_obs=400)
    tracks = Tracks(twin.positions[0], twin.times, np.zeros(1, np.int64), np.arange(1), k1=twin.model.k1,
                    k2=twin.model.k2, omega=twin.model.omega)
    model = model_settings(_with_stride(tracks, 100), None)  # spacing 0.01
    assert model.dt == pytest.approx(1e-4) and np.array_equal(model.k1, twin.model.k1)
    assert np.allclose(model.scale, twin.model.scale)  # the generator's default spectrum
    assert any(n.startswith("prior: the generator's default spectrum") for n in model.notes)
    assert any(n.startswith("time step dt 0.0001 for the methods") for n in model.notes)
    stated = dataclasses.replace(tracks, dt=1e-3)  # the file's dt attribute
    assert model_settings(_with_stride(stated, 100), None).dt == 1e-3
    assert "dt 0.001 from the track file's dt attribute" in model_settings(stated, None).notes
    assert model_settings(tracks, None, dt=5e-5).dt == 5e-5
    assert model_settings(_with_stride(tracks, 3), None).dt == pytest.approx(1e-4)  # spacing 3e-4 in 3 steps
    with pytest.raises(ValueError, match=r"pass a trained model \(--model RUN\)"):
        model_settings(dataclasses.replace(tracks, k1=None), None)


@pytest.fixture(scope="module")
def twin_file(tmp_path_factory):
    """Two fields of exact dense tracks (K = 9, dt 1e-4) as a CF file with modes and truth, no dt attribute."""
    path = tmp_path_factory.mktemp("tracks") / "twin.nc"
    write_twin_tracks(make_twin(n_field=2, n_drifter=1, n_obs=120), path)
    return path


def test_result_file_holds_each_fields_decisions_and_the_cli_one_line(twin_file, tmp_path, capsys):
    out = tmp_path / "r.nc"
    assert main(["assimilate", "--method", "linear", "--tracks", str(twin_file), "--out", str(out), "--members",
                 "8"]) == 0
    stdout, stderr = capsys.readouterr()
    result = read_result(out)
    assert len(result.diagnostics) == 2 and all(d["lag"] == 1 and "velocity_noise_std" in d for d in result.diagnostics)
    assert json.loads(result.attrs["settings_notes"])[1].startswith("time step dt 0.0001 for the methods")
    lines = [line for line in stdout.splitlines() if line.startswith("linear:")]
    assert len(lines) == 1 and lines[0].startswith("linear: field 0: velocities from order-6 differences over 1 fix")
    assert "velocity noise" in lines[0] and "m/s" not in lines[0]  # model-unit tracks: no physical units
    assert "lagda assimilate: note: time step dt 0.0001 for the methods" in stderr


def test_check_fits_model_warnings_are_printed(twin_file, tmp_path, capsys):
    from lagda.io.formats import read_tracks

    tracks = read_tracks(twin_file)
    tracks.positions[0, 50] = np.nan
    gappy = tmp_path / "gappy.nc"
    write_tracks(tracks, gappy)
    assert main(["assimilate", "--method", "linear", "--tracks", str(gappy), "--out", str(tmp_path / "r.nc"),
                 "--members", "8"]) == 0
    assert "lagda assimilate: warning: trajectory 0: 1 missing position" in capsys.readouterr().err


def test_result_records_the_run_identity_not_a_local_path(twin_file, run, tmp_path):
    out = tmp_path / "r.nc"
    summary = assimilate_file(twin_file, out, AssimilateSettings("linear", {"members": 8}, run_dir=run, dt=1e-4))
    assert read_result(out).attrs["model_run"] == run_identity(run)
    assert str(run.parent) not in read_result(out).attrs["model_run"]
    assert summary.notes == ("dt 0.0001 given (the model run's is 0.001)",
                             "11 grid times over the window (pass --times to choose)")


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_errors_are_one_line_unless_debug(debug, monkeypatch, tmp_path, twin_file, capsys):
    import lagda.assimilation.assimilate as module

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "assimilate_file", broken)
    argv = ["assimilate", "--method", "linear", "--tracks", str(twin_file), "--out", str(tmp_path / "r.nc")]
    assert main(argv + ["--debug"] * debug) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("lagda assimilate: unexpected error: RuntimeError: boom")
    assert ("Traceback" in err) == debug and (len(err.strip().splitlines()) == 1) != debug


@pytest.mark.parametrize("command", ["simulate", "train", "evaluate", "assimilate", "demo"])
def test_every_subcommand_takes_debug(command, capsys):
    assert main([command, "--help"]) == 0
    assert "--debug" in capsys.readouterr().out


def test_train_flags_default_cpu_choices_strict_booleans_and_meanings(capsys):
    parser = build_parser()
    base = ["train", "--train", "a.nc", "--run-dir", "r"]
    args = parser.parse_args(base + ["--learn-tau", "TRUE", "--physics", "false", "--similarity", "l2"])
    assert args.preset == "cpu" and args.learn_tau is True and args.physics is False and args.similarity == "l2"
    for bad in (["--learn-tau", "yes"], ["--physics", "1"], ["--similarity", "cosin"], ["--pooling", "max"]):
        with pytest.raises(SystemExit):
            parser.parse_args(base + bad)
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--tau TAU temperature (dimensionless)" in help_text and "--lr LR peak learning rate" in help_text
