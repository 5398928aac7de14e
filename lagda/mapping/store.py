"""A written map store (a .nc file or a .zarr folder): opening it (`open_map`), adding attributes to it."""

from __future__ import annotations

import os


def open_map(path):
    """Returns a `lagda map` store (.zarr folder or .nc file) as a lazy xarray Dataset.

    Raises
    ------
    FileNotFoundError
        no such store.
    """
    import xarray as xr

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such map: {path}")
    return xr.open_zarr(path) if os.path.isdir(path) else xr.open_dataset(path)


def add_attributes(path, attrs: dict) -> None:
    """Adds global attributes to a written map (.nc file or .zarr folder, its consolidated metadata too)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        import zarr

        zarr.open_group(path, mode="r+").attrs.update(attrs)
        zarr.consolidate_metadata(path)
        return
    import netCDF4

    with netCDF4.Dataset(path, "a") as nc:
        nc.setncatts(attrs)
