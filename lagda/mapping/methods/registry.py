"""The tile methods of `lagda map` by name: `TILE_METHODS`, read by `MapSettings.method` and `--tile-method`.

A new method is a `TileMethod` (lagda.mapping.methods.interface) in its own module and one entry here.
"""

from __future__ import annotations

from lagda.mapping.methods.basis import BasisMethod
from lagda.mapping.methods.interface import TileMethod
from lagda.mapping.methods.objective import ObjectiveMethod

TILE_METHODS: dict[str, type[TileMethod]] = {method.name: method for method in (ObjectiveMethod, BasisMethod)}


def tile_methods_help() -> str:
    """Returns the methods and what each does, for `--tile-method`'s help: "a (...), b (...) or c (...)".

    Examples
    --------
    >>> tile_methods_help().startswith("objective (an objective map")
    True
    """
    words = [f"{name} ({method.summary})" for name, method in TILE_METHODS.items()]
    return " or ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else words[0]
