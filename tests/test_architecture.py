"""The layering the code promises: one table of layers (LAYERS) that every import of lagda, simulate, experiments
and benchmarks follows downward, lazy imports inside functions included; no import cycle; no private name imported
across modules; inside lagda.assimilation imports that go one way down its layers (ASSIMILATION_LAYERS); and the
track file read once by `assimilate_file`."""

import ast
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("lagda", "simulate")
ALL_PACKAGES = ("lagda", "simulate", "experiments", "benchmarks")


def _module_name(path: pathlib.Path, root=ROOT) -> str:
    """Returns the dotted name of the module in `path` (a package's `__init__.py` gives `package.__init__`)."""
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _modules(packages=ALL_PACKAGES, root=ROOT) -> set[str]:
    """Returns the dotted names of every module of `packages` under `root` (a package's `__init__` as
    `package.__init__`)."""
    return {_module_name(path, root) for package in packages for path in (root / package).rglob("*.py")}


def _imports(packages=PACKAGES, root=ROOT):
    """Yields (module, imported module, imported name or None) for every import in `packages`.

    The whole syntax tree is walked, so imports inside functions (lazy ones) and under `if TYPE_CHECKING:` count.
    A relative import is resolved against the module's package. A package `__init__` that re-exports names lazily
    (its `_LAZY` table of name -> submodule, served by `lagda._lazy.lazy_getattr`) imports those submodules.
    """
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(path, root)
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    source = node.module
                    if node.level:  # from . import x, from ..y import z
                        base = module.split(".")[:-node.level]
                        source = ".".join(base + ([node.module] if node.module else []))
                    yield from ((module, source, alias.name) for alias in node.names)
                elif isinstance(node, ast.Import):
                    yield from ((module, alias.name, None) for alias in node.names)
            if path.name == "__init__.py":
                yield from _lazy_exports(module.removesuffix(".__init__"), tree)


def _lazy_exports(package: str, tree: ast.Module):
    """Yields (package `__init__`, package.submodule, name) for each entry of the module-level `_LAZY` table."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(target, ast.Name) and target.id == "_LAZY" for target in node.targets)):
            yield from ((f"{package}.__init__", f"{package}.{value.value}", key.value)
                        for key, value in zip(node.value.keys, node.value.values)
                        if isinstance(key, ast.Constant) and isinstance(value, ast.Constant))


def _target(source: str, name: str | None, modules: set[str]) -> str | None:
    """Returns the module of ours that `from source import name` (or `import source`) loads, None for a module
    outside the project (numpy, jax): `name` when it is a submodule, else `source` (a package: its `__init__`)."""
    for candidate in ([f"{source}.{name}"] if name else []) + [source]:
        if candidate in modules:
            return candidate
        if f"{candidate}.__init__" in modules:
            return f"{candidate}.__init__"
    return None


def _edges(packages=ALL_PACKAGES, root=ROOT) -> set[tuple[str, str]]:
    """Returns the (module, imported module) pairs among the modules of `packages`, lazy imports included."""
    modules = _modules(packages, root)
    edges = {(module, _target(source, name, modules)) for module, source, name in _imports(packages, root)}
    return {(module, target) for module, target in edges if target is not None and target != module}


# The package layering, lowest first: a module may import its own layer and those below, never one above. A module
# belongs to the layer of the longest prefix that names it (`lagda.io` holds `lagda.io.__init__` and
# `lagda.io.tracks`).
LAYERS = (
    ("simulate", "lagda.settings", "lagda.report", "lagda.progress", "lagda.arguments", "lagda._lazy", "lagda.version",
     "lagda.examples"),  # the flow and the shared utilities
    ("lagda.io", "lagda.learning"),  # every file lagda reads or writes; the encoders, losses and training
    ("lagda.assimilation",  # the methods behind one registry, the posterior, the scores
     "lagda.testing"),  # the twins that tests and studies build: a FlowModel, pairs, track files (nothing in lagda
    # imports it)
    ("lagda.mapping",),  # select, tile, invert, blend, write; the Dask driver
    ("lagda.cli", "lagda.demo", "lagda.api", "lagda.__init__", "lagda.__main__"),  # the command and the entry points
    ("experiments", "benchmarks"),  # the studies and the timings, above everything
)


def _layer(module: str, layers=LAYERS) -> int | None:
    """Returns the index in `layers` of `module`'s layer (longest matching prefix), None outside every layer."""
    matches = [(len(prefix), layer) for layer, prefixes in enumerate(layers) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1] if matches else None


def _upward(edges: set[tuple[str, str]], layers=LAYERS) -> list[str]:
    """Returns 'module -> imported module (layer a -> layer b)' for every import in `edges` that goes up `layers`."""
    return sorted(f"{module} -> {target} (layer {_layer(module, layers)} -> {_layer(target, layers)})"
                  for module, target in edges
                  if None not in (_layer(module, layers), _layer(target, layers))
                  and _layer(target, layers) > _layer(module, layers))


def test_every_module_has_a_layer():
    """A new module is placed in a layer on purpose: each module of lagda, simulate, experiments and benchmarks."""
    unplaced = sorted(module for module in _modules() if _layer(module) is None)
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_imports_go_down_the_layers():
    """No module imports one of a higher layer, at the top of the file or inside a function."""
    upward = _upward(_edges())
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_the_checks_see_imports_in_functions_relative_imports_and_lazy_re_exports(tmp_path):
    """A toy package: an import inside a function and a relative one, each going up, are found; the import of a
    layer below passes; a cycle closed by a lazy re-export (`_LAZY`) and an import inside a function is found."""
    files = {"__init__.py": "", "high/__init__.py": "", "high/top.py": "import toy.low.inner\n",
             "low/__init__.py": '_LAZY = {"g": "lazy"}\n',
             "low/lazy.py": "def g():\n    from ..high import top\n    return top\n",
             "low/inner.py": "from toy.low import g\n",
             "low/other.py": "def f():\n    from toy.high.top import h\n    return h\n"}
    for name, text in files.items():
        (tmp_path / "toy" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "toy" / name).write_text(text)
    edges = _edges(("toy",), tmp_path)
    assert _upward(edges, (("toy.low", "toy.__init__"), ("toy.high",))) == [
        "toy.low.lazy -> toy.high.top (layer 0 -> 1)", "toy.low.other -> toy.high.top (layer 0 -> 1)"]
    assert _cycles(edges) == [["toy.high.top", "toy.low.inner", "toy.low.__init__", "toy.low.lazy", "toy.high.top"]]


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Returns one cycle (a list of modules, the first repeated at the end) for each strongly connected set of two
    or more modules of the import graph `edges` (Tarjan's algorithm, iterative)."""
    graph: dict[str, list[str]] = {}
    for module, target in sorted(edges):
        graph.setdefault(module, []).append(target)
        graph.setdefault(target, [])
    index, low, stack, on_stack, components = {}, {}, [], set(), []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(set(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [_cycle_in(component, graph) for component in components]


def _cycle_in(component: set[str], graph: dict[str, list[str]]) -> list[str]:
    """Returns a shortest cycle through the first (sorted) module of `component`, by breadth-first search."""
    start = min(component)
    previous = {start: None}
    queue = [start]
    for node in queue:
        for child in graph[node]:
            if child == start:
                path = [node]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child in component and child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def test_no_import_cycle():
    """No two modules of lagda, simulate, experiments and benchmarks import each other, directly or through others."""
    cycles = [" -> ".join(cycle) for cycle in _cycles(_edges())]
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def test_a_cycle_is_found():
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "a")}
    assert sorted(_cycles(edges)) == [["a", "b", "c", "a"], ["d", "e", "d"]]
    assert _cycles({("a", "b"), ("b", "c"), ("a", "c")}) == []


def test_layer_of_a_module():
    assert _layer("simulate.flow") == 0
    assert _layer("lagda.examples") == 0
    assert _layer("lagda.io.__init__") == _layer("lagda.learning.losses") == 1
    assert _layer("lagda.assimilation.methods.linear") == _layer("lagda.testing") == 2
    assert _layer("lagda.mapping.run") == 3
    assert _layer("lagda.__init__") == _layer("lagda.demo") == 4
    assert _layer("experiments.basin.year") == 5
    assert _layer("lagda.unknown") is None


def test_no_private_name_is_imported_across_modules():
    private = [(module, source, name) for module, source, name in _imports()
               if source.split(".")[0] in PACKAGES and name and name.startswith("_") and not name.startswith("__")]
    assert not private, private


# lagda.assimilation's layers, lowest first: a module may import its own layer and those below, never one above.
# A module belongs to the layer of the longest prefix that names it.
ASSIMILATION_LAYERS = (
    ("lagda.assimilation.methods.config",),  # the methods' settings, no JAX
    ("lagda.assimilation.model", "lagda.assimilation.posterior", "lagda.assimilation.fields",
     "lagda.assimilation.scores", "lagda.assimilation.plot",  # what a method takes and returns, and its fields
     "lagda.assimilation.gaussian_process",  # the space-time GP
     "lagda.assimilation.background"),  # a background product as the prior mean (the model's, lagda assimilate's)
    ("lagda.assimilation.methods",  # the methods, and the chosen basis whose prior they fit
     "lagda.assimilation.local_gp"),  # the local GP of what a basis leaves out (lagda map's tiles, assimilate's box)
    ("lagda.assimilation.settings", "lagda.assimilation.assimilate", "lagda.assimilation.evaluation",
     "lagda.assimilation.__init__"),  # entry points and their settings
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
    modules = {module for module in _modules(("lagda",)) if module.startswith("lagda.assimilation.")}
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
    from lagda.assimilation.settings import AssimilateSettings
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
    assimilate_file(path, tmp_path / "r.nc", AssimilateSettings("linear", n_grid=4))
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
