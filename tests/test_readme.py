"""The README: its Python example runs as written, its two commands are the ones CI runs, every `lagda` command
in it is a valid command of today's CLI, and it stays short."""

import pathlib
import re
import shlex

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def test_python_example_runs(tmp_path, monkeypatch, capsys):
    (example,) = _blocks("python")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "(4, 1, 200)" in out
    error = float(re.search(r"velocity-field error ([0-9.]+)", out).group(1))
    assert 0.0 <= error < 1.0  # a 200-step dense track: the linear posterior beats the prior mean (error 1)
    assert (tmp_path / "result.nc").exists()


def test_two_commands_are_there():
    commands = _blocks("bash")[:2]
    assert "lagda demo" in commands[0] and "pip install" in commands[0]
    assert "pytest" in commands[1] and "pip install" in commands[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python -m pytest -q" in ci and 'pip install --quiet -e ".[test]"' in ci


def _lagda_commands() -> list[str]:
    """Returns every `lagda ...` command line of the README's bash blocks (comments dropped)."""
    lines = [line.split("  #")[0].strip() for block in _blocks("bash") for line in block.splitlines()]
    return [line for line in lines if line.startswith("lagda ")]


def test_every_lagda_command_is_a_valid_command():
    from lagda.cli import _given_method_options, build_parser

    commands = _lagda_commands()
    assert {c.split()[1] for c in commands} >= {"simulate", "train", "evaluate", "assimilate", "map"}
    parser = build_parser()
    for command in commands:
        try:
            args = parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"the README's command does not parse: {command}")
        if args.command == "assimilate":
            _given_method_options(args)  # every method setting given applies to the method


def test_readme_is_short():
    text = README.read_text()
    assert len(text.splitlines()) <= 150 and len(text) <= 9000
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    assert max(len(line) for line in prose.splitlines()) <= 120


def test_readme_shows_the_drifter_jobs_first_and_links_the_docs():
    text = README.read_text()
    assimilate = [c for c in _lagda_commands() if c.startswith(("lagda assimilate", "lagda map"))]
    first = assimilate[0]
    assert first.startswith("lagda assimilate --tracks gdp_like.nc") and "--method" not in first
    assert any(c.startswith("lagda map ") for c in assimilate)
    for link in re.findall(r"\]\(([^)#]+)", text):
        if not link.startswith("http"):
            assert (README.parent / link).exists(), link
