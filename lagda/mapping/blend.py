"""The blend of the tiles' pieces into the map: their weighted mean and the std of their mixture, a block of map
times at a time.

The weight of a tile at a cell and day is its space taper times its time taper (lagda.mapping.tiles.Tile); the
pieces are read in layout order, so a resumed run blends the same map as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np

from lagda.mapping.methods.interface import TileMethod
from lagda.mapping.resume import load_piece
from lagda.mapping.tiles import Grid


def blend_block(partial, tiles, grid: Grid, method: TileMethod, lo: int, hi: int,
                land: np.ndarray | None = None) -> np.ndarray:
    """Returns u, v, u_std, v_std `(4, hi - lo, lat, lon)` float32 of map times lo..hi-1: the pieces' weighted
    mean, and the std of their mixture (NaN where no piece has a value, and on the `land` cells `(lat, lon)`). The
    pieces that fill gaps only (`method.is_fallback`: in the basis method, those of one drifter segment) make their
    own blend, taken only where the others have no weight."""
    shape = (hi - lo, len(grid.lat), len(grid.lon))
    sums = {False: [np.zeros(shape) for _ in range(5)]}  # w, w u, w v, w E[u^2], w E[v^2]; True: of lone pieces
    for tile in tiles:
        days, rows, cols = grid.window(tile)
        first, last = max(days.start, lo), min(days.stop, hi)
        if first >= last:
            continue
        piece = load_piece(partial, tile.key)
        if "u" not in piece:
            continue
        mine, block = slice(first - days.start, last - days.start), (slice(first - lo, last - lo), rows, cols)
        lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
        w = tile.time_weight(grid.days[first:last])[:, None, None] * tile.space_weight(lon2, lat2)[None]
        u, v = piece["u"][mine].astype(np.float64), piece["v"][mine].astype(np.float64)
        kind = method.is_fallback(piece["info"])
        if kind not in sums:  # made only when a lone piece comes: most maps have none
            sums[kind] = [np.zeros(shape) for _ in range(5)]
        sw, swu, swv, swu2, swv2 = sums[kind]
        sw[block] += w
        swu[block] += w * u
        swv[block] += w * v
        swu2[block] += w * (piece["u_std"][mine].astype(np.float64) ** 2 + u**2)
        swv2[block] += w * (piece["v_std"][mine].astype(np.float64) ** 2 + v**2)
    sw, swu, swv, swu2, swv2 = sums[False]
    if True in sums:
        gap = sw == 0
        sw, swu, swv, swu2, swv2 = (np.where(gap, lone, full) for full, lone in zip(sums[False], sums[True]))
    with np.errstate(invalid="ignore", divide="ignore"):
        u, v = swu / sw, swv / sw
        u_std = np.sqrt(np.maximum(swu2 / sw - u**2, 0.0))
        v_std = np.sqrt(np.maximum(swv2 / sw - v**2, 0.0))
    blended = np.stack([u, v, u_std, v_std])
    if land is not None:
        blended[:, :, land] = np.nan
    return blended.astype(np.float32)
