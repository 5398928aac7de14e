"""The tile method interface: how `lagda map` makes one tile's piece of the map, whatever the method.

A method is built from the map's settings (`TileMethod(settings)`), readied once on the map's fixes (`prepare`:
the data its tiles select theirs from, and what every tile shares, such as a prior covariance), then sent with each
tile to a Dask worker, where `map_tile` fits the tile's data and returns the mean and std on the tile's cells. Once
every tile is made, `summarise` words what the tiles did. The methods by name are
lagda.mapping.methods.registry.TILE_METHODS; a new method is one module and one line there.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar


@dataclasses.dataclass(frozen=True)
class TileSummary:
    """What a method's tiles did, said once the map is written.

    Attributes
    ----------
    notes : list of str
        Note lines, said after the map's own notes.
    skipped : int
        Tiles that gave no piece (not inverted); the run's summary counts the others as inverted.
    warning : str
        A warning line ("" for none), said after the notes.
    """

    notes: list[str]
    skipped: int = 0
    warning: str = ""


class TileMethod(abc.ABC):
    """One tile's method: built from the map's settings, readied on the map's fixes, then called on each tile.

    The object is pickled to the Dask workers with each tile: keep on it only what every tile needs (the settings,
    a prior), never the map's data (those go to each worker as the tile's own, `data.in_tile(tile)`).

    Attributes
    ----------
    name : str
        The method's name: `MapSettings.method` and `lagda map --tile-method`.
    summary : str
        What it does, in a few words for `--tile-method`'s help.
    std_meaning : str
        The words that end the long name of u_std and v_std, after "total predictive standard deviation".
    takes_background : bool
        Whether a background product (`MapSettings.background`) is its prior mean; a method that does not refuses
        one.
    settings : lagda.mapping.settings.MapSettings
        The map's settings, region and period given or found.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    std_meaning: ClassVar[str] = ""
    takes_background: ClassVar[bool] = False

    def __init__(self, settings):
        self.settings = settings

    @abc.abstractmethod
    def prepare(self, fixes) -> tuple[object, tuple[str, ...]]:
        """Readies the method on the map's fixes, once, before any tile is sent.

        Parameters
        ----------
        fixes : lagda.io.fixes.Fixes
            The fixes the map is made from: selected, cleaned, low-passed, less any withheld drifters.

        Returns
        -------
        data : object
            What the tiles are fitted to: `data.in_tile(tile)` gives a tile's own (which has a `len()`, and goes to
            `map_tile`).
        notes : tuple of str
            Note lines on what was prepared (kept in the map's notes), possibly empty.
        """

    @abc.abstractmethod
    def map_tile(self, data, tile, grid) -> dict:
        """Returns the tile's piece of the map: {"u", "v", "u_std", "v_std"} `(day, lat, lon)` float32 m/s on the
        cells of `grid.window(tile)`, and "info" (a JSON-able dict of what the tile chose, its "tile" key the
        tile's); or {"info": {..., "skipped": why}} alone for a tile with nothing to map.

        Parameters
        ----------
        data : object
            The tile's own data (`prepare`'s data, `.in_tile(tile)`).
        tile : lagda.mapping.tiles.Tile
            The tile: its box and window.
        grid : lagda.mapping.tiles.Grid
            The map's cells and times.

        Raises
        ------
        ValueError
            Data the method cannot map: the tile is recorded as skipped, with the message.
        """

    @abc.abstractmethod
    def summarise(self, infos: list[dict]) -> TileSummary:
        """Returns what the tiles did, from their pieces' infos in layout order."""

    def is_fallback(self, info: dict) -> bool:
        """Returns whether a piece enters the blend only on the cells where no other piece has any weight (it fills
        gaps, never blends into a better piece); False unless the method says otherwise."""
        return False

    def local_gp_lines(self, infos: list[dict]) -> list[str]:
        """Returns the lines on the tiles' local Gaussian processes (the map's `local_gp` attribute: "off" for
        none); [] unless the method fits one."""
        return []
