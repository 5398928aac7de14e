"""The layering the code promises: no private name imported across modules, no arrow from the file layer
(lagda.io) up into the methods (lagda.assimilation), inside lagda.assimilation imports that go one way down its
layers (ASSIMILATION_LAYERS), and the track file read once by `assimilate_file`."""

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
              if module.startswith("lagda.io") and source.startswith(("lagda.assimilation", "lagda.mapping"))]
    assert not upward, upward


# lagda.assimilation's layers, lowest first: a module may import its own layer and those below, never one above.
# A module belongs to the layer of the longest prefix that names it.
ASSIMILATION_LAYERS = (
    ("lagda.assimilation.methods.config",),  # the methods' settings, no JAX
    ("lagda.assimilation.model", "lagda.assimilation.posterior", "lagda.assimilation.fields",
     "lagda.assimilation.scores", "lagda.assimilation.plot"),  # what a method takes and returns, and its fields
    ("lagda.assimilation.methods",),  # the methods, and the chosen basis whose prior they fit
    ("lagda.assimilation.assimilate", "lagda.assimilation.evaluation", "lagda.assimilation.__init__"),  # entry points
)


def _assimilation_layer(module: str) -> int | None:
    """Returns the index in ASSIMILATION_LAYERS of `module`'s layer (longest matching prefix), None outside."""
    matches = [(len(prefix), layer) for layer, prefixes in enumerate(ASSIMILATION_LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1] if matches else None


def test_assimilation_layers_import_downward_only():
    upward = [(module, source) for module, source, _ in _imports()
              if None not in (_assimilation_layer(module), _assimilation_layer(source))
              and _assimilation_layer(source) > _assimilation_layer(module)]
    assert not upward, upward


def test_every_assimilation_module_has_a_layer():
    """A new module of lagda.assimilation is placed in a layer on purpose (its folder follows its imports)."""
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts)
               for path in (ROOT / "lagda" / "assimilation").rglob("*.py")}
    unplaced = sorted(module for module in modules if _assimilation_layer(module) is None)
    assert not unplaced, unplaced


def test_the_chosen_basis_sits_with_the_methods_it_uses():
    basis = "lagda.assimilation.methods.basis"
    used = {source for module, source, _ in _imports() if module == basis}
    assert any(source.startswith("lagda.assimilation.methods.") for source in used), used
    assert _assimilation_layer(basis) == _assimilation_layer("lagda.assimilation.methods.linear")


def test_assimilation_layer_of_a_module():
    assert _assimilation_layer("lagda.assimilation.methods.config") == 0
    assert _assimilation_layer("lagda.assimilation.methods.linear") == 2
    assert _assimilation_layer("lagda.assimilation.posterior") == 1
    assert _assimilation_layer("lagda.assimilation.assimilate") == 3
    assert _assimilation_layer("lagda.io.tracks") is None


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
