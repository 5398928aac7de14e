"""The track file formats lagda reads, in the order they are tried (`READERS`), and the dispatch over them.

A file's format is told by its content, not its name (`read_file`): the first reader whose `recognises` holds of
the file's head (`lagda.io.readers.reader.FileHead`) reads it. A folder is read through the files whose names end
in one of the readers' suffixes (`track_suffixes`).

Adding a format is one module that defines its `lagda.io.readers.reader.Reader`, and one line in `READERS`.
"""

from __future__ import annotations

from lagda.io.readers import cf_dataset, csv, gdp_text, parquet
from lagda.io.readers.reader import NOT_TRACKS, FileHead, Reader
from lagda.io.tracks import RawTracks, Tracks

READERS: list[Reader] = [
    cf_dataset.NETCDF,  # netCDF-3 or -4: CF trajectory files, clouddrift's and the GDP's ragged arrays, lagda datasets
    cf_dataset.ZARR,  # a Zarr store, local or at a URL (Parcels v3 output, the GDP's ragged archive)
    parquet.PARQUET,  # Parcels v4 output
    gdp_text.GDP_TEXT,  # the GDP's 6-hourly text files (buoydata_*.dat, gzip-compressed too)
    csv.CSV,  # CSV of fixes, ERDDAP's too; recognises any file, so it comes last
]
"""The readers, in the order the dispatch tries them; a format's reader is one line here."""


def read_file(path: str) -> RawTracks | Tracks:
    """Returns what one track file holds, as the first reader of `READERS` that recognises its head reads it.

    Parameters
    ----------
    path : str
        A local file, a Zarr store (a folder), or the URL of a Zarr store.

    Returns
    -------
    RawTracks or Tracks
        The fixes as read (not cleaned), or the `Tracks` of a lagda dataset.

    Raises
    ------
    ValueError
        One line naming the file, when no reader recognises it (`NOT_TRACKS`) or its reader cannot read it.
    """
    head = FileHead.of(path)
    for reader in READERS:
        if reader.recognises(head):
            return reader.read(head)
    raise ValueError(f"{path} {NOT_TRACKS}")


def track_suffixes() -> tuple[str, ...]:
    """Returns what the names of the track files of a folder end in: every reader's suffixes, in `READERS` order.

    Examples
    --------
    >>> track_suffixes()[:3]
    ('.nc', '.nc4', '.cdf')
    """
    return tuple(dict.fromkeys(suffix for reader in READERS for suffix in reader.suffixes))
