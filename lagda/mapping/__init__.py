"""From a drifter archive to daily velocity maps: `lagda map`.

The archive is read once, lazily, for the fixes of a region and period (`archive.select_fixes`); the region is
cut into overlapping space tiles and time windows (`tiles.tile_layout`); each tile is mapped on its own by the
settings' tile method (`methods`: by default an objective map with the archive's own covariance, or the `linear`
method in a chosen basis with a local GP); the tiles run on Dask (`dask_driver`), each saved as it finishes
(`resume`), and are blended with tapered weights into one CF dataset on (time, lat, lon) (`blend`, `write`;
`run.map_archive` drives the stages).
"""

from lagda.mapping.run import map_archive
from lagda.mapping.settings import MapSettings

__all__ = ["MapSettings", "map_archive"]
