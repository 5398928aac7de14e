"""Do a map's tile edges show? The change of u, v and their std across the tiles' core edges against the map's
cell-to-cell change everywhere else.

For each map variable, the absolute difference between the neighbouring cells that straddle a tile's core edge
(east-west and north-south, every day, where both have a value) is set beside the mean difference of the parallel
pairs one cell either side of it; the ratio of their medians and of their 99th percentiles is 1 when the edges do
not show (a seam makes the edge pairs' larger).

    python -m experiments.basin.seams STORE [STORE ...]
"""

from __future__ import annotations

import json
import sys

import numpy as np
import xarray as xr


def edge_pairs(lon, lat, tiles) -> tuple[np.ndarray, np.ndarray]:
    """Returns bool `(lon - 1,)` and `(lat - 1,)`: which east-west and north-south neighbour pairs of cells (centres
    lon, lat degrees) straddle a core edge of `tiles` (lagda.mapping.tiles.Tile) inside the grid."""
    def straddles(centres, edges):
        lo, hi = centres[:-1], centres[1:]
        return np.array([np.any((edges > a) & (edges < b)) for a, b in zip(lo, hi)], bool)

    east = np.unique([t.core[1] for t in tiles] + [t.core[0] for t in tiles])
    north = np.unique([t.core[3] for t in tiles] + [t.core[2] for t in tiles])
    return straddles(np.asarray(lon), east), straddles(np.asarray(lat), north)


def edge_change(maps: xr.Dataset, names=("u", "v", "u_std", "v_std")) -> dict:
    """Returns {name: (median ratio, 99th-percentile ratio)} of the change across the tiles' core edges over the
    change between the parallel neighbour pairs one cell either side of them (the same place in the field, off the
    edge), on the pairs where one of the three changes exceeds 1e-4 m/s (far from every drifter a sparse map is
    the smooth prior and the changes vanish), for a `lagda map` dataset (its tiles from its settings)."""
    from lagda.mapping.settings import MapSettings

    settings = json.loads(maps.attrs["settings"])
    settings = MapSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    x_edge, y_edge = edge_pairs(maps.lon.values, maps.lat.values, settings.tiles())
    out = {}
    for name in names:
        values = maps[name].values.astype(np.float64)
        at, off = [], []
        for axis, edges in ((2, x_edge), (1, y_edge)):
            change = np.abs(np.diff(values, axis=axis))
            for i in np.flatnonzero(edges):
                if 1 <= i < change.shape[axis] - 1:
                    here, before, after = (np.take(change, k, axis=axis) for k in (i, i - 1, i + 1))
                    alive = np.maximum(here, np.maximum(before, after)) > 1e-4
                    at.append(here[alive])
                    off.append(0.5 * (before[alive] + after[alive]))
        at, off = np.concatenate(at), np.concatenate(off)
        ok = np.isfinite(at) & np.isfinite(off)
        at, off = at[ok], off[ok]
        out[name] = (float(np.median(at) / np.median(off)), float(np.percentile(at, 99) / np.percentile(off, 99)))
    return out


def main(argv=None) -> int:
    from lagda.mapping.store import open_map

    for path in (argv if argv is not None else sys.argv[1:]):
        with open_map(path) as maps:
            ratios = edge_change(maps)
        print(path + ": " + "; ".join(f"{k} {m:.2f} (median) {p:.2f} (99%)" for k, (m, p) in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
