"""Writing files so that a failure never leaves a half-written output: temporary name, then rename."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_atomic(path, write: Callable[[Path], None]) -> Path:
    """Returns `path` after `write(tmp_path)` filled a temporary file beside it, renamed into place.

    The temporary file lives in the same directory (so the rename is atomic) and is removed
    if `write` fails or is interrupted.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
