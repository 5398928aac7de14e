"""The example drifter files shipped with lagda, found from any directory.

Each example is a netCDF file installed with the package (package data under `lagda/shipped/`). `path(name)`
returns where it is, `names()` which there are, `copy(name, folder)` puts a copy in a folder (as the command
`lagda example NAME --out DIR` does). `shipped(name)` finds any shipped file, such as the trained run
`DEFAULT_MODEL` that the learned methods read when given no `--model`.

Examples
--------
>>> import lagda.examples
>>> lagda.examples.names()
('gdp_like', 'example_tracks')
>>> lagda.examples.path("gdp_like").name
'gdp_like.nc'
"""

from __future__ import annotations

import pathlib

SHIPPED = pathlib.Path(__file__).resolve().parent / "shipped"  # package data: installed with lagda
DEFAULT_MODEL = "learned"  # the shipped run the learned methods use without --model: it reads any times, gaps, drifters

# name -> what the file holds, one line (`lagda example --list` prints these)
EXAMPLES = {
    "gdp_like": "8 drifters in a quasi-geostrophic ocean with a mean current, hourly lon/lat fixes with gaps over "
                "30 days from 2025-03-01 near 40 W, 34 N: a clouddrift ragged netCDF, as the GDP writes it",
    "example_tracks": "the tracks of the twin experiment (lagda demo --twin): one drifter in each of 8 flows of "
                      "lagda's own model, in model units (x and y in 0..1), with the flows' true coefficients",
}


def names() -> tuple[str, ...]:
    """Returns the names of the shipped example files, in the order `lagda example --list` shows them.

    Examples
    --------
    >>> "gdp_like" in names()
    True
    """
    return tuple(EXAMPLES)


def path(name: str) -> pathlib.Path:
    """Returns the absolute path of the shipped example file `name` (a netCDF file; read it, do not write it).

    Parameters
    ----------
    name
        one of `names()`; the file name (`"gdp_like.nc"`) is taken too.

    Returns
    -------
    pathlib.Path
        The installed file, e.g. `.../site-packages/lagda/shipped/gdp_like.nc`: the same from any directory.

    Raises
    ------
    ValueError
        `name` is not an example; the message lists the known ones.
    FileNotFoundError
        the installation lacks the file (a broken install: reinstall lagda).

    Examples
    --------
    >>> import xarray as xr
    >>> with xr.open_dataset(path("gdp_like")) as ds:
    ...     print(ds.sizes["traj"], "drifters")
    8 drifters
    """
    stem = str(name).removesuffix(".nc")
    if stem not in EXAMPLES:
        raise ValueError(f"no example named {name!r}: the examples are {', '.join(names())}")
    return shipped(f"{stem}.nc")


def shipped(name: str) -> pathlib.Path:
    """Returns the absolute path of `name` under the package's shipped data (lagda/shipped/: the examples, the
    shipped encoder and model runs).

    Raises
    ------
    FileNotFoundError
        the installation lacks it (a broken install: reinstall lagda).
    """
    found = SHIPPED / name
    if not found.exists():
        raise FileNotFoundError(f"{found} not found: the lagda installation is incomplete; reinstall lagda")
    return found

def copy(name: str, folder: str | pathlib.Path = ".") -> tuple[pathlib.Path, bool]:
    """Copies the shipped example `name` into `folder`; returns (the file, whether it was written).

    The file keeps its name (`gdp_like.nc`); `folder` is made if missing. A file already there that is the same
    byte for byte is left as it is (returned with False); a different one is never replaced.

    Parameters
    ----------
    name
        one of `names()`.
    folder
        the folder to copy into (default: the current directory).

    Returns
    -------
    tuple[pathlib.Path, bool]
        The copy's path, and True when this call wrote it, False when an identical file was already there.

    Raises
    ------
    ValueError
        `name` is not an example, or `folder` names a netCDF file rather than a folder.
    FileExistsError
        a different file of that name is in `folder`, or `folder` is a file.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> target, written = copy("gdp_like", folder)
    >>> target.name, written, copy("gdp_like", folder)[1]
    ('gdp_like.nc', True, False)
    """
    import filecmp
    import os
    import shutil

    source = path(name)
    folder = pathlib.Path(folder)
    if folder.suffix == ".nc" and not folder.is_dir():
        raise ValueError(f"{folder} is a file name: give the folder to copy into (the copy is named {source.name})")
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{folder} is a file, not a folder to copy {source.name} into")
    target = folder / source.name
    if target.exists():
        if target.is_file() and filecmp.cmp(source, target, shallow=False):
            return target, False
        raise FileExistsError(f"{target} exists and differs from the example {source.stem}: remove it, or copy "
                              "into another folder")
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{source.name}.partial-{os.getpid()}"  # renamed once whole: never a half-written copy
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target, True
