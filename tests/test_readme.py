"""The README's Python example runs as written, and its two commands are the ones CI runs."""

import pathlib
import re

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
