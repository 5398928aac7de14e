"""One docstring style, NumPy's (as clouddrift and xarray write theirs): sections titled `Parameters`, `Returns`,
`Raises`, `Examples`, ... and underlined with dashes of the title's length, never Google's `Args:` / `Returns:`.

mkdocstrings renders the API reference with `docstring_style: numpy` (mkdocs.yml), so a Google section would show
as plain text there. ruff's pydocstyle section rules (pyproject.toml) check the sections' layout beside this test;
they do not see `Args:`, which is no NumPy section name, and this test does.
"""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("lagda", "simulate", "experiments", "benchmarks")
GOOGLE_HEADER = re.compile(r"^\s*(Args|Arguments|Keyword Args|Keyword Arguments|Returns|Raises|Yields|Example|Examples"
                           r"|Note|Notes|Attributes):\s*$")
NUMPY_TITLE = re.compile(r"^(\s*)(Parameters|Other Parameters|Returns|Yields|Receives|Raises|Warns|Warnings|Attributes"
                         r"|Methods|See Also|Notes|References|Examples)\s*$")


def docstrings(tree: ast.Module):
    """Yields (line number, text) of every docstring: a module's, class's or function's, and an attribute's (a string
    right after a module- or class-level assignment, as mkdocstrings reads it)."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for k, item in enumerate(node.body):
            after_assignment = k > 0 and isinstance(node.body[k - 1], (ast.Assign, ast.AnnAssign)) \
                and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if (k == 0 or after_assignment) and isinstance(item, ast.Expr) \
                    and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                yield item.lineno, item.value.value


def style_problems(source: str, path: str) -> list[str]:
    """Returns 'path:line: what' for each Google section header and each NumPy section title not underlined by
    dashes of its length (at its indent) in the docstrings of `source`."""
    problems = []
    for first_line, text in docstrings(ast.parse(source)):
        lines = text.splitlines()
        for k, line in enumerate(lines):
            where = f"{path}:{first_line + k}"
            if GOOGLE_HEADER.match(line):
                problems.append(f"{where}: Google section header {line.strip()!r}")
            elif title := NUMPY_TITLE.match(line):
                underline = title.group(1) + "-" * len(title.group(2))
                below = lines[k + 1].rstrip() if k + 1 < len(lines) else ""
                if below != underline:
                    problems.append(f"{where}: section {title.group(2)!r} is not underlined by {underline.strip()!r} "
                                    f"at its indent (the next line is {below.strip()!r})")
    return problems


def python_files() -> list[pathlib.Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_the_check_finds_google_sections_and_bad_underlines():
    source = '''
"""A module.

Example:
    >>> 1
    1
"""


def f(a, b):
    """Adds.

    Args:
        a: a number.

    Raises
    ------
    ValueError
        never.

    Returns
    ----
    int
        the sum.
    """


X = 1
"""An attribute.

Notes
  -----
Indented unlike its title.
"""


def g(a):
    """Fine.

    Parameters
    ----------
    a
        a number.

    Examples
    --------
    >>> g(1)
    """
'''
    assert style_problems(source, "toy.py") == [
        "toy.py:4: Google section header 'Example:'",
        "toy.py:31: section 'Notes' is not underlined by '-----' at its indent (the next line is '-----')",
        "toy.py:13: Google section header 'Args:'",
        "toy.py:21: section 'Returns' is not underlined by '-------' at its indent (the next line is '----')",
    ]


def test_every_docstring_is_in_numpy_style():
    files = python_files()
    assert ROOT / "lagda" / "api.py" in files and ROOT / "simulate" / "flow.py" in files
    problems = [p for path in files for p in style_problems(path.read_text(), str(path.relative_to(ROOT)))]
    assert not problems, (f"{len(problems)} docstring lines in Google style or with a bad underline (NumPy style: "
                          "a title such as Parameters, Returns, Raises, Examples on its own line, underlined by "
                          "dashes of its length):\n" + "\n".join(problems))
