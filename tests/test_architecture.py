"""The layering the code promises: no private name imported across modules, no arrow from the file layer
(lagda.io) up into the methods (lagda.assimilation), and the track file read once by `assimilate_file`."""

import ast
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("lagda", "simulate")


def _imports():
    """Yields (module, imported module, imported name or None) for every absolute import in lagda and simulate."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    yield from ((module, node.module, alias.name) for alias in node.names)
                elif isinstance(node, ast.Import):
                    yield from ((module, alias.name, None) for alias in node.names)


def test_no_private_name_is_imported_across_modules():
    private = [(module, source, name) for module, source, name in _imports()
               if source.split(".")[0] in PACKAGES and name and name.startswith("_") and not name.startswith("__")]
    assert not private, private


def test_the_file_layer_does_not_import_the_methods():
    upward = [(module, source) for module, source, _ in _imports()
              if module.startswith("lagda.io") and source.startswith("lagda.assimilation")]
    assert not upward, upward


def test_assimilate_file_opens_the_track_file_once(tmp_path, monkeypatch):
    """Two fields: a file opened again per field would be opened twice."""
    import netCDF4

    from lagda.assimilation.assimilate import assimilate_file
    from lagda.testing import make_twin, write_twin_tracks

    path, opened, real = str(tmp_path / "tracks.nc"), [], netCDF4.Dataset
    write_twin_tracks(make_twin(n_field=2, n_drifter=1, n_obs=10, stride=6, seed=2), path)

    class Counting(type):  # a stand-in class whose calls return real Datasets: instances of a Python subclass of
        def __call__(cls, filename, *args, **kwargs):  # the extension type are freed by the cyclic GC, which
            opened.append(str(filename))  # segfaulted in netCDF4's dealloc during a later test
            return real(filename, *args, **kwargs)

        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

    monkeypatch.setattr(netCDF4, "Dataset", Counting("Dataset", (), {}))
    assimilate_file(path, tmp_path / "r.nc", "linear", n_grid=4)
    assert opened.count(path) == 1, opened


def _code_files():
    """Yields every .py, .sh and .ipynb file of the checkout outside hidden folders (.venv, .git) and build output."""
    skip = {"runs", "site", "build", "dist", "node_modules", "__pycache__"}
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not (d.startswith(".") or d in skip or d.endswith(".egg-info"))]
        yield from (pathlib.Path(folder) / f for f in files if f.endswith((".py", ".sh", ".ipynb")))


def test_no_code_edits_the_import_path():
    """experiments and benchmarks are packages run as `python -m`; tests import them: nothing edits sys.path."""
    needles = ("sys.path" + ".insert", "sys.path" + ".append", "spec_from_file" + "_location")
    found = [f"{path.relative_to(ROOT)}: {needle}" for path in _code_files()
             for needle in needles if needle in path.read_text(errors="replace")]
    assert not found, found
