"""From a drifter archive to daily velocity maps: `lagda map`.

The archive is read once, lazily, for the fixes of a region and period (`archive.select_fixes`); the region is
cut into overlapping space tiles and time windows (`tiles.tile_layout`); each tile is an independent inversion
in its own tangent plane (`invert.invert_tile`: the `linear` method in a chosen basis, its prior and error model
chosen from the tile's tracks); the tiles run on Dask and are blended with tapered weights into one CF dataset on
(time, lat, lon) (`run.map_archive`).
"""

from lagda.mapping.run import MapSettings, map_archive

__all__ = ["MapSettings", "map_archive"]
