"""The examples in the public entry points' docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = ["simulate.tracks", "simulate.generate", "lagda.io.formats", "lagda.io.tracks", "lagda.io.physical",
           "lagda.io.clean", "lagda.report", "lagda.assimilation.methods.registry", "lagda.assimilation.assimilate",
           "lagda.learning.model", "lagda.learning.train", "lagda.mapping.run"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
