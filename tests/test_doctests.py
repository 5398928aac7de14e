"""The examples in the public entry points' docstrings run and print what they say."""

import ast
import doctest
import importlib
import inspect
import tempfile

import pytest

MODULES = ["simulate.tracks", "simulate.generate", "lagda.io.formats", "lagda.io.tracks", "lagda.io.physical",
           "lagda.io.clean", "lagda.io.land", "lagda.io.lowpass", "lagda.report", "lagda.assimilation.methods.registry",
           "lagda.assimilation.assimilate", "lagda.cli", "lagda.learning.model", "lagda.learning.train",
           "lagda.mapping.settings", "lagda.assimilation.gaussian_process", "lagda.mapping.archive",
           "lagda.mapping.check", "lagda.mapping.covariance", "lagda.mapping.methods.objective",
           "lagda.mapping.methods.registry", "lagda.assimilation.local_gp", "lagda.io.background", "lagda.arguments",
           "lagda.io.fixes", "lagda.examples", "lagda.assimilation.settings", "lagda.io.locations",
           "lagda.io.cf_time", "lagda.io.readers.registry", "lagda.assimilation.background"]
# module-level names documented by a string after their assignment (an attribute docstring, as mkdocstrings reads
# it), which doctest.testmod does not collect
ATTRIBUTES = ["lagda.assimilation.methods.registry.METHODS"]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' mkdtemp() folders go under tmp_path
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0


def attribute_docstring(module, name: str) -> str | None:
    """Returns the string literal that follows the module-level assignment of `name` in `module`, else None."""
    body = ast.parse(inspect.getsource(module)).body
    for node, after in zip(body, body[1:]):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            return after.value.value
    return None


@pytest.mark.parametrize("path", ATTRIBUTES)
def test_attribute_docstring_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    module_name, name = path.rsplit(".", 1)
    module = importlib.import_module(module_name)
    text = attribute_docstring(module, name)
    assert text is not None, f"{path} has no docstring"
    test = doctest.DocTestParser().get_doctest(text, dict(vars(module)), path, module.__file__, 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test)
    assert runner.summarize(verbose=False).attempted > 0, f"{path} has no example"
    assert runner.failures == 0
