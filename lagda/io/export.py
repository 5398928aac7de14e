"""`lagda export-tracks`: any track file (a lagda dataset included) to a CF trajectory file.

The export can place model-unit tracks in the real world (a box in degrees, a start date and
a time scale: a `lagda.io.physical.Mapping`) and cut gaps into them, which is how the project
makes realistic synthetic drifter files from its own flows (data/README.md).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from lagda.io.formats import read_tracks
from lagda.io.physical import Mapping, box_of_size, parse_time
from lagda.io.sources import source_name
from lagda.io.tracks import Tracks, id_text, pack_tracks, write_tracks


def export_tracks(source, out, *, n_fields: int | None = None, box=None, start: str | None = None,
                  time_scale: float | None = None, gaps: tuple[int, int] | None = None,
                  layout: str = "multidimensional", centre=None, plain: bool = False,
                  seed: int = 0, overwrite: bool = False, history: str = "") -> Tracks:
    """Returns the tracks written to `out` after reading `source`, selecting, mapping and cutting gaps.

    Parameters
    ----------
    source
        a track file in any format `read_tracks` reads (a lagda dataset included), or several, or a folder
        of them (physical tracks only: `read_raw`).
    out
        the netCDF file to write (temporary name, then rename).
    n_fields
        keep the first `n_fields` flows only.
    box, start, time_scale
        place model-unit tracks in the world: (west, east, south, north)
        degrees, the ISO 8601 date of model time 0, seconds per model time unit (all three).
    centre
        (lon, lat) degrees: place tracks in projected metres (a QG file) on the sphere, their box the
        same lengths on the tangent plane at `centre`; with `start`, re-dated so that the file's time origin
        is `start` (the time scale is kept: the same velocities in m/s).
    gaps
        (count, longest): per trajectory, `count` gaps of 1..`longest` consecutive missing
        fixes (lengths uniform), one in each of `count` equal stretches of the track, drawn
        from `seed`; the fixes are removed (no time, no position), as in real drifter records.
    layout
        "multidimensional" or "ragged" (clouddrift's contiguous ragged array).
    plain
        write what another tool would: the fixes only, without lagda's mapping attributes, release
        points or truth (a reader infers the box and time scale).
    history
        the CF `history` line (the command).

    Raises
    ------
    ValueError
        one line for an existing output without `overwrite`, a partial or misplaced
        mapping, or bad selections.
    """
    if os.path.exists(out) and not overwrite:
        raise ValueError(f"{out} exists; pass --overwrite to replace it")
    tracks = read_tracks(source)
    source = source_name(source)
    if n_fields is not None:
        tracks = _first_fields(tracks, n_fields)
    given = [value is not None for value in (box, start, time_scale)]
    if centre is not None:
        if box is not None or time_scale is not None:
            raise ValueError("--centre places tracks in metres on the sphere: it takes no --box or --time-scale")
        if tracks.mapping is None or tracks.mapping.coordinates != "projected":
            raise ValueError(f"--centre needs tracks in projected metres (x, y in m), and {source} holds "
                             f"{'model units' if tracks.mapping is None else 'longitude/latitude'}")
        old = tracks.mapping
        mapping = Mapping(box_of_size(centre, old.lengths_m, "lonlat"), "lonlat",
                          parse_time(start) if start is not None else old.time_origin, old.time_scale_s)
        tracks = dataclasses.replace(tracks, mapping=mapping, notes=(f"placed on the sphere: {mapping.describe()}",))
    elif any(given):
        if not all(given):
            raise ValueError("placing tracks in the world needs --box, --start and --time-scale together")
        if tracks.mapping is not None:
            raise ValueError(f"{source} is already in physical units; --box, --start and --time-scale apply to model "
                             "units")
        mapping = Mapping(tuple(float(b) for b in box), "lonlat", parse_time(start), float(time_scale))
        tracks = dataclasses.replace(tracks, mapping=mapping)
    if gaps is not None:
        tracks = cut_gaps(tracks, *gaps, seed=seed)
    attrs = {"history": history} if history else {}
    if plain:
        tracks = dataclasses.replace(tracks, release=None, true_coef=None, k1=None, k2=None, omega=None)
    write_tracks(tracks, out, attrs=attrs, layout=layout, mapping_attrs=not plain)
    return tracks


def _first_fields(tracks: Tracks, n_fields: int) -> Tracks:
    """Returns the trajectories of fields 0..n_fields-1 (and their truth)."""
    if not 1 <= n_fields <= tracks.n_field:
        raise ValueError(f"--n-fields {n_fields} must be in 1..{tracks.n_field} (the file's flows)")
    keep = np.flatnonzero(np.asarray(tracks.field) < n_fields)
    return dataclasses.replace(
        tracks, positions=tracks.positions[keep], times=tracks.times[keep], field=tracks.field[keep],
        trajectory_id=tracks.trajectory_id[keep], release=None if tracks.release is None else tracks.release[keep],
        true_coef=None if tracks.true_coef is None else tracks.true_coef[:n_fields])


def cut_gaps(tracks: Tracks, count: int, longest: int, seed: int = 0) -> Tracks:
    """Returns `tracks` with `count` gaps of 1..`longest` removed fixes per trajectory (see `export_tracks`).

    The first and last fix of each stretch are kept, so a track keeps its extent.

    Raises
    ------
    ValueError
        if count < 1, longest < 1, or a stretch is too short for the longest gap.
    """
    if count < 1 or longest < 1:
        raise ValueError(f"--gaps COUNT LONGEST must be positive, got {count} {longest}")
    rng = np.random.default_rng(seed)
    times, positions = [], []
    for i in range(tracks.n_trajectory):
        valid = np.flatnonzero(np.isfinite(tracks.times[i]))
        stretch = len(valid) // count
        if stretch < longest + 2:
            raise ValueError(f"trajectory {id_text(tracks.trajectory_id[i])}: {len(valid)} fixes are too few for "
                             f"{count} gaps of up to {longest}")
        drop = np.zeros(len(valid), bool)
        for g in range(count):
            length = int(rng.integers(1, longest + 1))
            first = g * stretch + int(rng.integers(1, stretch - length))
            drop[first : first + length] = True
        times.append(tracks.times[i][valid][~drop])
        positions.append(tracks.positions[i][valid][~drop])
    truth = {name: getattr(tracks, name) for name in ("true_coef", "k1", "k2", "omega", "mapping", "notes")}
    return pack_tracks(times, positions, tracks.trajectory_id, tracks.field, tracks.release, **truth)
