"""experiments/ in folders by family: every study sits in a family folder, and imports of experiments stay inside
its own family or experiments.common (tests/test_architecture.py keeps the layers and the absence of circles)."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
FAMILIES = ("common", "basin", "globe", "qg", "learning", "assimilation", "drifters")


def _imported(tree: ast.Module) -> list[str]:
    """Returns the dotted names of `experiments` modules and packages the syntax tree imports, lazy ones included."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.split(".")[0] == "experiments"]


def test_every_module_is_in_a_family_folder():
    loose = [p.name for p in EXPERIMENTS.glob("*.py") if p.name != "__init__.py"]
    folders = sorted(p.name for p in EXPERIMENTS.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert not loose, f"modules outside a family folder: {loose}"
    assert folders == sorted(FAMILIES)


def test_a_study_imports_its_own_family_and_common_only():
    crossing = []
    for path in sorted(EXPERIMENTS.glob("*/*.py")):
        family = path.parent.name
        for name in _imported(ast.parse(path.read_text())):
            parts = name.split(".")
            if len(parts) < 2 or parts[1] not in (family, "common"):
                crossing.append(f"{path.relative_to(ROOT)} -> {name}")
    assert not crossing, crossing


def test_the_check_sees_an_import_across_families():
    tree = ast.parse("from experiments.basin.year import make\nimport experiments.qg.benchmark\n")
    assert _imported(tree) == ["experiments.basin.year", "experiments.basin.year.make", "experiments.qg.benchmark"]
