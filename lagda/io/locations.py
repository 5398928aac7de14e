"""Where a track file lies: a local file, a local Zarr store (a folder), or a Zarr store at a URL.

lagda reads any track file from a local path, and Zarr stores at a URL too (`open_zarr_url`, lazily); every other
file is downloaded first.
"""

from __future__ import annotations

import os
import re


def is_url(path) -> bool:
    """Returns whether `path` is a URL (https://..., s3://...) rather than a local path.

    Examples
    --------
    >>> is_url("https://noaa-oar-hourly-gdp-pds.s3.amazonaws.com/latest/gdp-v2.01.1.zarr"), is_url("gdp.nc")
    (True, False)
    """
    return isinstance(path, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path) is not None


def is_zarr(path: str) -> bool:
    """Returns whether the local folder `path` is a Zarr store (version 2 or 3 metadata, or consolidated).

    Parameters
    ----------
    path : str
        A local path.

    Returns
    -------
    bool
        True when `path` holds `.zgroup`, `zarr.json` or `.zmetadata`.
    """
    return any(os.path.exists(os.path.join(path, name)) for name in (".zgroup", "zarr.json", ".zmetadata"))


def open_zarr_url(url: str):
    """Returns the Zarr store at `url` opened lazily (xarray through fsspec: https:// needs aiohttp, the `cloud`
    extra; s3:// needs s3fs).

    Raises
    ------
    ValueError
        one line, if the store cannot be opened (a missing package named, or what the server said).
    """
    import xarray as xr

    try:
        return xr.open_zarr(url, decode_times=False, consolidated=None)
    except ImportError as error:
        fix = ("pip install s3fs, or give the bucket's https:// address" if url.startswith("s3:")
               else "pip install 'lagda[cloud]'")
        raise ValueError(f"{url}: reading a store over the network needs a package lagda does not install by "
                         f"default ({error}): {fix}") from None
    except Exception as error:  # lagda reads Zarr stores at URLs; other files are downloaded first
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{url}: cannot be opened as a Zarr store ({type(error).__name__}: {reason[:200]}); at a "
                         "URL lagda reads Zarr stores only: download other files first") from None
