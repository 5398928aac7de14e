"""The shipped examples from any directory: `lagda.examples` (path, names, copy), the command `lagda example`, and
the README's drifter commands run as written from a folder outside the checkout."""

import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from lagda import examples
from lagda.cli import build_parser, main

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = (README, ROOT / "docs" / "getting-started.md")  # the pages whose commands a new user types first
JOB_PAGES = tuple(sorted((ROOT / "docs" / "jobs").glob("*.md")))  # each page's commands, typed in order
YOURS = ("your_", "https://", "s3://")  # a path the page names as the user's own file or a remote store

# Options appended to a README command before the test runs it, so that it takes seconds: argparse keeps the last
# value of a repeated option, so the README's own paths (--tracks, --out, --plot) are the ones used.
SMALL = {
    # a basis of wavenumbers up to 4, linear in time, on a 16 x 16 grid: about 6 s on 2 cores, the default 12 s
    "assimilate": ["--k-max", "4", "--degree", "1", "--n-grid", "16"],
    # 5 days at 1-degree cells in this process's one worker: about 7 s on 2 cores
    "map": ["--period", "2025-03-01", "2025-03-05", "--resolution", "1", "--workers", "1", "--no-progress"],
}
INPUTS = ("tracks", "train", "test", "model", "data", "background", "climatology")  # options that name a file read
OUTPUTS = ("out", "run_dir", "plot", "out_dir")  # options that name a file or folder written


def _section(text: str, title: str) -> str:
    """Returns the part of a markdown page under `## title`, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"no section '## {title}'"
    return match.group(1)


def _lagda_commands(text: str) -> list[str]:
    """Returns the `lagda ...` lines of the ```bash blocks of `text`, comments dropped, in order."""
    lines = [line.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
             for line in re.sub(r"\\\n\s*", " ", block).splitlines()]  # continued lines joined
    return [line for line in lines if line.startswith("lagda ")]


def _paths(args, names) -> list[str]:
    """Returns the paths the parsed command `args` gives under the options `names` (each a path, a list or None)."""
    found = []
    for name in names:
        value = getattr(args, name, None)
        found += [] if value is None else [value] if isinstance(value, str) else list(value)
    return found


def _written(args) -> set[pathlib.PurePath]:
    """Returns the files and folders the parsed command `args` writes (`lagda example`: the copy in its folder)."""
    if args.command == "example":
        return {pathlib.PurePath(args.out, examples.path(args.name).name)} if args.name else set()
    return {pathlib.PurePath(path) for path in _paths(args, OUTPUTS)}


# ---------------------------------------------------------------- lagda.examples


def test_every_example_is_a_shipped_track_file():
    assert examples.names() == ("gdp_like", "example_tracks")
    for name in examples.names():
        path = examples.path(name)
        assert path.is_absolute() and path.is_file() and path.name == f"{name}.nc", path
        with xr.open_dataset(path) as ds:
            assert ds.attrs["featureType"] == "trajectory", name
    shipped = {path.stem for path in (ROOT / "lagda" / "shipped").glob("*.nc")}
    assert shipped == set(examples.names()), "a shipped .nc file without a name in lagda.examples.EXAMPLES"


def test_path_is_the_same_from_any_directory(tmp_path, monkeypatch):
    here = examples.path("gdp_like")
    monkeypatch.chdir(tmp_path)
    assert examples.path("gdp_like") == here == examples.path("gdp_like.nc")


def test_the_example_is_the_gdp_like_file_the_docs_describe():
    """README: 8 drifters, hourly lon/lat fixes with gaps over 30 days from 2025-03-01 near 40 W, 34 N."""
    with xr.open_dataset(examples.path("gdp_like")) as ds:
        assert ds.sizes["traj"] == 8 and int(ds["rowsize"].sum()) == ds.sizes["obs"]
        times = ds["time"].values
        days = (times.max() - times.min()) / np.timedelta64(1, "D")
        assert str(times.min())[:10] == "2025-03-01" and 29 <= days <= 30
        assert abs(float(ds["lon"].mean()) + 40) < 3 and abs(float(ds["lat"].mean()) - 34) < 3


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"no example named 'gdp'.*gdp_like, example_tracks"):
        examples.path("gdp")


def test_copy_writes_once_and_never_replaces_a_different_file(tmp_path):
    target, written = examples.copy("gdp_like", tmp_path / "new")
    assert written and target == tmp_path / "new" / "gdp_like.nc"
    assert target.read_bytes() == examples.path("gdp_like").read_bytes()
    assert examples.copy("gdp_like", tmp_path / "new") == (target, False)
    target.write_bytes(b"my own file")
    with pytest.raises(FileExistsError, match="differs from the example gdp_like"):
        examples.copy("gdp_like", tmp_path / "new")
    assert target.read_bytes() == b"my own file"
    assert sorted(p.name for p in target.parent.iterdir()) == ["gdp_like.nc"]  # no partial copy left
    with pytest.raises(ValueError, match="is a file name"):
        examples.copy("gdp_like", tmp_path / "mine.nc")


# ---------------------------------------------------------------- lagda example


def test_lagda_example_copies_into_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["example", "gdp_like"]) == 0
    assert capsys.readouterr().out.strip() == "wrote gdp_like.nc"
    assert (tmp_path / "gdp_like.nc").read_bytes() == examples.path("gdp_like").read_bytes()
    assert main(["example", "gdp_like"]) == 0  # the same file again: said, left as it is
    assert "already there, the same as the example" in capsys.readouterr().out


def test_lagda_example_refuses_to_replace_a_different_file(tmp_path, capsys):
    (tmp_path / "example_tracks.nc").write_text("mine")
    assert main(["example", "example_tracks", "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "lagda example: error:" in err and "example_tracks.nc exists and differs" in err
    assert (tmp_path / "example_tracks.nc").read_text() == "mine"


def test_lagda_example_refuses_an_unknown_name(tmp_path, capsys):
    assert main(["example", "drifters", "--out", str(tmp_path)]) == 2
    assert "no example named 'drifters': the examples are gdp_like, example_tracks" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["example"], ["example", "--list"]], ids=["no-name", "list"])
def test_lagda_example_lists_the_examples(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(examples.names())
    assert all(len(line.split()) > 5 for line in lines)  # each with what it holds
    assert list(tmp_path.iterdir()) == []  # listing copies nothing


# ---------------------------------------------------------------- the pages' commands


@pytest.mark.parametrize("page", PAGES + JOB_PAGES, ids=lambda page: page.name)
def test_every_file_a_command_reads_is_made_by_a_command_before_it(page):
    """A user who types the page's commands in order, in an empty folder, has every file each of them reads: no
    path into the source tree, no file the page never makes (the `lagda example` copy counts as made)."""
    parser = build_parser()
    made: set[pathlib.PurePath] = set()
    for command in _lagda_commands(page.read_text()):
        args = parser.parse_args(shlex.split(command)[1:])
        for path in [p for p in _paths(args, INPUTS) if not p.startswith(YOURS)]:
            assert pathlib.PurePath(path) in made, f"{page.name}: `{command}` reads {path}, which no command before " \
                                                   "it makes"
        made |= _written(args)


def test_the_readme_drifter_commands_run_from_outside_the_checkout(tmp_path):
    """Runs every command of the README's "Recover velocities from drifters", the section a drifter user follows:
    `lagda example` (the copy every later command reads), `lagda assimilate` (the first job) and `lagda map` (the
    map example), each in a fresh folder outside the checkout, with SMALL's settings appended. A path that does not
    exist there (one into the source tree, a file never made) makes the command exit 2. Not run: the install
    commands, `lagda demo` (a minute or more) and the test suite (the "Two commands"), and the simulate and
    train jobs (minutes; their files are checked by the test above)."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    commands = _lagda_commands(_section(README.read_text(), "Recover velocities from drifters"))
    assert [command.split()[1] for command in commands] == ["example", "assimilate", "map"], commands
    parser = build_parser()
    for command in commands:
        words = shlex.split(command)[1:]
        done = subprocess.run([sys.executable, "-m", "lagda", *words, *SMALL.get(words[0], [])], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"`{command}` failed in {tmp_path}:\n{done.stderr[-3000:]}"
        for path in _written(parser.parse_args(words)):
            assert (tmp_path / path).exists(), f"`{command}` did not write {path}"
    assimilate, mapped = (parser.parse_args(shlex.split(c)[1:]) for c in commands[1:])
    with xr.open_dataset(tmp_path / assimilate.out) as result:
        assert result["u"].attrs["units"] == "m s-1" and np.isfinite(result["u"].values).any()
    with xr.open_dataset(tmp_path / mapped.out, engine="zarr") as maps:
        assert maps.sizes["time"] == 5 and np.isfinite(maps["u"].values).any()
