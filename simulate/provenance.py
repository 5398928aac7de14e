"""Which code made an output: a digest of lagda's own source files, recorded where a job resumes from saved work.

Every release so far is numbered 0.1.0, so the version cannot tell two installs apart; the digest can. `lagda
simulate` records it in its partial run's manifest, `lagda map` there and in each tile a worker makes, so that a run
resumed after an upgrade, or one whose Dask workers run another install, is refused instead of joining the work of
two codes into one output. It lives here, beside simulate.atomic, so that both packages can use it.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib

PACKAGES = ("lagda", "simulate")  # the installed packages (pyproject's packages.find)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """Returns the first 16 hex digits of the SHA-256 of the PACKAGES' Python source: each `.py` file's path (relative
    to the packages' folder, `/`-separated) and bytes, in path order. The same code gives the same digest on every
    machine; an edit to any module changes it (data files, such as the shipped example tracks, do not count).

    >>> len(code_digest()) == 16 and code_digest() == code_digest()
    True
    """
    from importlib.util import find_spec

    digest = hashlib.sha256()
    for name in PACKAGES:  # found, not imported (simulate's import starts jax)
        root = pathlib.Path(find_spec(name).origin).parent
        for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def other_code(recorded: str | None) -> str:
    """Returns "other lagda code (source digest X; this is Y)": what a saved run made with the digest `recorded` (None:
    saved before lagda recorded one) is, said in a refusal or a note."""
    made = f"source digest {recorded}" if recorded else "no source digest recorded: made before lagda recorded one"
    return f"other lagda code ({made}; this is {code_digest()})"
