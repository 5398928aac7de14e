"""The basin-year archive: a year of QG drifter tracks with GDP-like problems, written as a GDP-hourly ragged file.

From the year's tracks (experiments.basin.ocean, uniform at day 0, recorded every dt) each drifter gets a release
day (uniform in [0, `release_days`)) and a life (uniform in [`min_life_days`, days]), ending at the year's end at
the latest; the track cut there is a drifter released at its first fix. A track that crosses the periodic domain's
edge is split there (each piece its own id), so no drifter jumps across the map; pieces shorter than `min_fixes`
fixes are dropped. Then the GDP's problems (experiments.common.gdp_problems: noise, written in degrees as
`err_lon`, `err_lat`; gaps and missing fixes; spikes; duplicated times), per piece, and:

- **undrogued tails**: a fraction `undrogued` of drifters lose their drogue at a uniform fraction in [0.3, 0.9] of
  their life; from then `drogue_status` is 0 and their fixes are moved by the integral of a windage slip of
  `slip_speed` m/s in a direction of their own that swings +-0.5 rad over a week (the slip is added to the
  water-following track: the undrogued fixes' velocities are the water's plus the slip).

The file (`to_gdp_dataset`) is a CF contiguous ragged array as clouddrift's GDP-hourly has it
(experiments.common.gdp_problems.gdp_dataset).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments.basin.ocean import EARTH_RADIUS_M, OceanConfig, plane_to_lonlat
from experiments.common.gdp_problems import GdpProblems, corrupt, gdp_dataset, slip_angle

ID_BASE = 300534060000000  # GDP-like 15-digit ids: ID_BASE + 1000 drifter + piece
START = np.datetime64("2001-01-01T00:00:00", "ms")  # the time of the year's first record


@dataclasses.dataclass(frozen=True)
class ArchiveConfig(GdpProblems):
    """The archive's release, life and GDP-like problems (module docstring)."""

    release_days: float = 300.0  # releases uniform over the first release_days days
    min_life_days: float = 60.0  # lives uniform in [min_life_days, days]
    min_fixes: int = 24  # pieces (between domain-edge crossings) shorter than this are dropped
    seed: int = 1


def _pieces(track: np.ndarray, L: float) -> list[slice]:
    """Returns the slices of `track` `(obs, 2)` m (unwrapped) between crossings of the periodic domain's edge."""
    cell = np.floor(track / L).astype(np.int64)
    breaks = np.flatnonzero(np.any(np.diff(cell, axis=0) != 0, axis=1)) + 1
    edges = np.concatenate([[0], breaks, [len(track)]])
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _slip(n: int, dt: float, rng) -> np.ndarray:
    """Returns the cumulative windage displacement `(n, 2)` m of an undrogued drifter over n steps of dt s."""
    theta0, t = rng.uniform(0, 2 * np.pi), np.arange(n) * dt
    theta = slip_angle(t, theta0, rng.uniform(0, 2 * np.pi))
    velocity = np.stack([np.cos(theta), np.sin(theta)], -1)
    return np.cumsum(velocity, axis=0) * dt


def make_archive(ocean: OceanConfig, acfg: ArchiveConfig, positions: np.ndarray, dt: float, start) -> tuple:
    """Returns (rows, stats): the archive's rows as a dict of per-fix and per-trajectory arrays, and the counts.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)` m, unwrapped, at start + j dt (j = 0..obs - 1).
    start
        numpy datetime64 of the first record.
    """
    rng = np.random.default_rng(acfg.seed)
    n_drifter, n_obs = positions.shape[:2]
    metre_lat = np.rad2deg(1.0 / EARTH_RADIUS_M)
    fixes = {k: [] for k in ("time", "lon", "lat", "err_lon", "err_lat", "drogue_status")}
    ids, rowsize = [], []
    stats = dict(drifters=0, pieces=0, dropped_short_pieces=0, spikes=0, exact_duplicates=0,
                 conflicting_duplicates=0, undrogued_drifters=0, undrogued_fixes=0, edge_splits=0)
    for i in range(n_drifter):
        first = int(rng.uniform(0, acfg.release_days) * 86400.0 / dt)
        life = int(rng.uniform(acfg.min_life_days, n_obs * dt / 86400.0) * 86400.0 / dt)
        last = min(n_obs, first + life)
        track = positions[i, first:last]
        moved = track.copy()
        drogue = np.ones(len(track), np.int8)
        if rng.random() < acfg.undrogued:
            loss = int(rng.uniform(0.3, 0.9) * len(track))
            drogue[loss:] = 0
            moved[loss:] += acfg.slip_speed * _slip(len(track) - loss, dt, rng)
            stats["undrogued_drifters"] += 1
        stats["drifters"] += 1
        pieces = _pieces(track, ocean.L)
        stats["edge_splits"] += len(pieces) - 1
        for p, piece in enumerate(pieces):
            n = piece.stop - piece.start
            if n < acfg.min_fixes:
                stats["dropped_short_pieces"] += 1
                continue
            xy = moved[piece] - np.floor(track[piece] / ocean.L) * ocean.L
            rows, s, fix, counts = corrupt(xy, acfg, dt, rng)
            for name, count in counts.items():
                stats[name] += count
            lon, lat = plane_to_lonlat(ocean, rows[:, 0], rows[:, 1])
            fixes["time"].append(start + ((first + piece.start + fix) * dt * 1e3).astype("timedelta64[ms]"))
            fixes["lon"].append(lon)
            fixes["lat"].append(lat)
            fixes["err_lat"].append(s * metre_lat)
            fixes["err_lon"].append(s * metre_lat / np.cos(np.deg2rad(lat)))
            fixes["drogue_status"].append(drogue[piece][fix])
            stats["undrogued_fixes"] += int((drogue[piece][fix] == 0).sum())
            ids.append(ID_BASE + 1000 * i + p)
            rowsize.append(fix.size)
            stats["pieces"] += 1
    rows = {k: np.concatenate(v) for k, v in fixes.items()}
    rows["id"], rows["rowsize"] = np.asarray(ids, np.int64), np.asarray(rowsize, np.int64)
    stats["fixes"] = int(rowsize and sum(rowsize))
    stats["trajectories"] = len(ids)
    return rows, stats


def to_gdp_dataset(rows: dict, deploy: bool = True):
    """Returns the GDP-hourly-like xarray Dataset (dims traj, obs) of `make_archive`'s rows; `deploy` False leaves
    out `deploy_date`, `deploy_lon`, `deploy_lat`."""
    return gdp_dataset(rows, "Global Drifter Program hourly-like drifting buoy data (synthetic basin-year archive)",
                       "hourly positions of drifters in a pyqg-jax QG ocean placed on the sphere, with position "
                       "noise, gaps, spikes, duplicated times and undrogued segments", deploy)
