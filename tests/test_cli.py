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
