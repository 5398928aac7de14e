"""The tile methods of `lagda map`, each behind one interface (`interface.TileMethod`) and found by name in
`registry.TILE_METHODS`: `objective` (the default: an objective map with the archive's own covariance) and `basis`
(the `linear` posterior in a Fourier-Legendre basis of the tile's box with a local GP)."""
