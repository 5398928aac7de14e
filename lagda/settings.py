"""Declared settings: a config dataclass's field carries its meaning and units, which the command line reads.

    n_blocks: int = setting(12, "M, residual attention blocks")

`lagda.cli` makes one option per field from this metadata (type and choices from the annotation), so a
new setting is one line here and never a second declaration elsewhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def setting(default: Any, help: str) -> Any:
    """Returns a dataclass field with `default` whose metadata holds `help` (meaning and units)."""
    return dataclasses.field(default=default, metadata={"help": help})


def setting_help(config_class, name: str) -> str:
    """Returns the declared help of field `name` of a config class ("" if it declares none)."""
    return next((f.metadata.get("help", "") for f in dataclasses.fields(config_class) if f.name == name), "")
