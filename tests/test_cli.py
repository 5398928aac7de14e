"""Every subcommand: --help works; a bad path or a bad file gives one clear line and exit 2."""

import pytest

from lagda.cli import main

SUBCOMMANDS = ("simulate", "train", "evaluate", "assimilate", "demo")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_works(command, capsys):
    assert main([command, "--help"]) == 0
    assert f"lagda {command}" in capsys.readouterr().out


@pytest.fixture
def not_netcdf(tmp_path):
    path = tmp_path / "garbage.nc"
    path.write_bytes(b"\x00\x01 definitely not netCDF \xff" * 10)
    return path


def _bad_path_cases(tmp_path, garbage):
    missing = tmp_path / "missing.nc"
    run = tmp_path / "no-run"
    return {
        "simulate": ["simulate", "--n-samples", "2", "--out", str(tmp_path / "no-such-dir" / "x.nc")],
        "train": ["train", "--preset", "cpu", "--train", str(missing), "--test", str(missing), "--run-dir",
                  str(tmp_path / "run")],
        "train-garbage": ["train", "--preset", "cpu", "--train", str(garbage), "--test", str(garbage), "--run-dir",
                          str(tmp_path / "run")],
        "evaluate": ["evaluate", "--model", str(run), "--data", str(missing)],
        "assimilate": ["assimilate", "--method", "linear", "--tracks", str(missing), "--out", str(tmp_path / "r.nc")],
        "assimilate-garbage": ["assimilate", "--method", "linear", "--tracks", str(garbage), "--out",
                               str(tmp_path / "r.nc")],
        "demo": ["demo", "--model", str(run), "--tracks", str(missing), "--out-dir", str(tmp_path / "demo")],
    }


@pytest.mark.parametrize("case",
                         ["simulate", "train", "train-garbage", "evaluate", "assimilate", "assimilate-garbage", "demo"])
def test_bad_path_or_file_is_one_line_and_exit_2(case, capsys, tmp_path, not_netcdf):
    argv = _bad_path_cases(tmp_path, not_netcdf)[case]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lagda {argv[0]}: error: "), err
    assert not (tmp_path / "r.nc").exists()


def test_the_command_keeps_compiled_programs_in_a_per_user_cache(tmp_path):
    """`lagda` points JAX's persistent compilation cache at LAGDA_COMPILE_CACHE (default ~/.cache/lagda/jax), so a
    second run skips the compilations; "off" turns it off. The same result either way."""
    import os
    import subprocess
    import sys

    from lagda.examples import shipped

    def run(cache: str, out: str) -> None:
        env = {**os.environ, "LAGDA_COMPILE_CACHE": cache, "JAX_PLATFORMS": "cpu"}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        argv = ["assimilate", "--tracks", str(shipped("example_tracks.nc")), "--method", "linear", "--n-grid", "4",
                "--out", str(tmp_path / out)]
        done = subprocess.run([sys.executable, "-m", "lagda", *argv], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    cache = tmp_path / "cache"
    run(str(cache), "a.nc")
    assert cache.is_dir() and len(list(cache.iterdir())) > 0  # the compiled programs
    run("off", "b.nc")
    import numpy as np
    import xarray as xr

    with xr.open_dataset(tmp_path / "a.nc") as a, xr.open_dataset(tmp_path / "b.nc") as b:
        np.testing.assert_array_equal(a["coef_mean_re"].values, b["coef_mean_re"].values)


def test_assimilate_help_lists_a_method_s_settings_only_when_asked(capsys):
    from lagda.cli import main

    assert main(["assimilate", "--help"]) == 0
    short = capsys.readouterr().out
    assert "--tracks" in short and "--iterations" not in short and "--method M --help" in short
    assert main(["assimilate", "--method", "var", "--help"]) == 0
    var = capsys.readouterr().out
    assert "settings of --method var" in var and "--iterations" in var and "--fd-lag" not in var
    assert len(short.splitlines()) < 120


def test_assimilate_refuses_an_existing_output_in_one_line(tmp_path, capsys):
    """The library's check (assimilate_file) is the command's: one line, exit 2, the file left as it was."""
    from lagda.examples import shipped

    out = tmp_path / "r.nc"
    out.write_bytes(b"kept")
    argv = ["assimilate", "--method", "linear", "--tracks", str(shipped("example_tracks.nc")), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lagda assimilate: error: {out} exists; pass --overwrite to replace it"]
    assert out.read_bytes() == b"kept"


def test_assimilate_refuses_a_chosen_basis_for_a_method_without_one_in_one_line(tmp_path, capsys):
    """retrieve compares tracks with a trained model's flows: the refusal comes before a run is looked for."""
    from lagda.examples import shipped

    argv = ["assimilate", "--method", "retrieve", "--basis", "circular", "--tracks", str(shipped("example_tracks.nc")),
            "--out", str(tmp_path / "r.nc")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lagda assimilate: error: retrieve compares tracks with a trained model's flows, which have no time "
                   "basis: use linear, var, enkf or sample with a chosen basis"]
    assert not (tmp_path / "r.nc").exists()


# ---------------------------------------------------------------- options declared once (lagda.arguments.OPTIONS)

# flags both `lagda assimilate` and `lagda map` take for different things, each declared per command: the input (a
# track file, an archive), the output (a result file, a map store), the figure, what --overwrite discards (a map's
# partial run too), and each command's own basis (its default and the box its wavenumbers count over)
NAMESAKES = {"--tracks", "--out", "--plot", "--plot-day", "--overwrite", "--k-max", "--degree"}


def _parser_options(command: str) -> dict:
    """Returns {flag: argparse action} of the `lagda COMMAND` parser."""
    from lagda.cli import build_parser

    parser = build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    return {flag: action for action in commands.choices[command]._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", ["assimilate", "map"])
def test_every_option_of_the_table_is_the_command_s_with_its_help_and_flags_come_from_it(command):
    from lagda.arguments import FLAGS, OPTIONS

    parsed = _parser_options(command)
    assert FLAGS[command] == {name: option.flag for name, option in OPTIONS[command].items()}
    for name, option in OPTIONS[command].items():
        action = parsed[option.flag]
        assert action.dest == option.dest and action.help.startswith(option.help.split("{")[0]), option.flag


def test_an_option_both_commands_take_for_one_thing_is_declared_once():
    from lagda.arguments import OPTIONS, SHARED

    assimilate, mapped = ({option.flag: option for option in OPTIONS[c].values()} for c in ("assimilate", "map"))
    both = set(assimilate) & set(mapped)
    shared = {option.flag for option in SHARED.values()}
    assert both == shared | NAMESAKES and not shared & NAMESAKES
    for flag in shared:
        assert assimilate[flag] is mapped[flag]
        assert _parser_options("assimilate")[flag].help == _parser_options("map")[flag].help
    assert {"--keep-undrogued", "--no-low-pass", "--no-local-gp"} <= shared


def test_the_command_lines_build_the_settings_the_python_calls_do():
    from lagda.arguments import on_command_line
    from lagda.assimilation.settings import AssimilateSettings
    from lagda.cli import _given_method_options, build_parser, settings_from
    from lagda.mapping.settings import MapSettings

    args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--method", "linear",
                                      "--members", "8", "--model", "RUN", "--n-grid", "16", "--basis", "circular",
                                      "--k-max", "4", "--no-low-pass", "--keep-undrogued", "--times", "6h"])
    with on_command_line("assimilate"):
        settings = settings_from(args, "assimilate", AssimilateSettings, config=_given_method_options(args))
    assert settings == AssimilateSettings("linear", {"members": 8}, run_dir="RUN", n_grid=16, basis="circular",
                                          k_max=4.0, times="6h", keep_undrogued=True, low_pass=False)
    args = build_parser().parse_args(["map", "--tracks", "a.nc", "--out", "m.zarr", "--region", "-42", "-36", "32",
                                      "37", "--tile-size", "4", "--window-step", "10", "--no-local-gp",
                                      "--tile-method", "basis"])
    with on_command_line("map"):
        settings = settings_from(args, "map", MapSettings, region=tuple(args.region), cadence_s=86400.0)
    assert settings == MapSettings(region=(-42, -36, 32, 37), tile_deg=4.0, step_days=10.0, local_gp=False,
                                   method="basis")
    args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--n-grid", "1"])
    with on_command_line("assimilate"), pytest.raises(ValueError, match=r"^--n-grid 1: must be at least 2$"):
        settings_from(args, "assimilate", AssimilateSettings)
