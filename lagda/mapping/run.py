"""`lagda map`: the archive's fixes selected, cleaned and low-passed, the tiles mapped on Dask by the settings' tile
method, each finished tile written at once, then blended into one CF dataset on (time, lat, lon).

`map_archive` walks through the stages, each a module: the settings (lagda.mapping.settings), the partial run and
its resume (lagda.mapping.resume), the tile method (lagda.mapping.methods), the Dask driver
(lagda.mapping.dask_driver), the blend and the written map (lagda.mapping.blend, lagda.mapping.write). The final
dataset is written to a temporary name and renamed; the partial folder is removed after.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from lagda.arguments import given
from lagda.io.fixes import Fixes, unsegmented_text
from lagda.io.land import sea_fraction
from lagda.io.sources import source_name, track_files
from lagda.mapping.archive import archive_extent, clean, select_fixes
from lagda.mapping.dask_driver import TileFailed, run_tiles
from lagda.mapping.resume import interrupted_state, prepare_partial, run_manifest, start_partial
from lagda.mapping.settings import MapSettings
from lagda.mapping.store import open_map
from lagda.mapping.tiles import Tile
from lagda.mapping.write import check_notes, land_note, write_map
from lagda.report import counted
from simulate.atomic import OutputLock, remove_tree


def map_archive(archive, out, settings: MapSettings, workers: int | None = None, scheduler: str | None = None,
                resume: bool = False, overwrite: bool = False, progress: bool = True, say=print) -> dict:
    """Maps the archive's drifters to daily velocity maps with their std; writes `out` (.zarr or .nc); returns a
    summary of the run.

    A region or period left None in `settings` is the extent of the archive's fixes (the same on a resume); a
    note says what was chosen.

    Parameters
    ----------
    archive
        a ragged netCDF file or Zarr store read in slices, any lon/lat track file, several, or a folder
        of them (lagda.io.archive).
    out
        the output path, ending in .zarr or .nc.
    settings
        what the map is made of (`MapSettings`); a resume compares every field.
    workers
        Dask LocalCluster worker processes (default: the CPUs); ignored with `scheduler`.
    scheduler
        the address of a running Dask scheduler (tcp://HOST:8786) to use instead of a local cluster.
    resume
        finish an interrupted run from the tiles saved in `OUT.partial/` (a finished one is left as it
        is).
    overwrite
        start again, discarding an existing output or unfinished run.
    progress
        show progress bars (reading the archive, the tiles) on stderr.
    say
        where the progress notes go (one line each; default: print).

    Returns
    -------
    dict
        A summary dict: "tiles" (their count), "inverted" and "skipped" (tiles), "seconds" (wall), "notes" (the
        note lines said) and "check" (the withheld drifters' check with `settings.withhold`, else None); for
        an output already complete, {"tiles", "already_complete": True, "seconds": 0.0, "notes": []}.

    Raises
    ------
    FileNotFoundError
        missing archive.
    ValueError
        bad settings, an existing output, a resume with other settings, no fix in the region and
        period; another run writing `out` (Busy, a ValueError).
    TileFailed
        a tile's Dask worker was lost each time it was sent (a lost worker is otherwise made good:
        its tiles are sent again); the finished tiles are kept, the message says how to go on.
    OSError
        the scheduler lost (ConnectionError) or a tile not saved; the finished tiles are kept, the
        message says how to go on.

    Examples
    --------
    A month of the North Atlantic from a drifter archive, on 2 local worker processes (the call `lagda map`
    makes; not run here):

    ```python
    from lagda.mapping import MapSettings, map_archive

    settings = MapSettings(region=(-60, -20, 20, 60), period=("2025-01-01", "2025-01-31"))
    summary = map_archive("gdp_hourly.nc", "maps.zarr", settings, workers=2)
    ```

    `lagda.map` makes the same call and returns the map as an xarray Dataset.
    """
    out = os.fspath(out)
    if not out.endswith((".zarr", ".nc")):
        raise ValueError(f"{given('out', out)}: the map store must end in .zarr or .nc")
    name = source_name(track_files(archive))  # a missing path or an empty folder is said before anything else
    with OutputLock(out, "lagda map"):  # a second run on this output refuses, naming this one
        return _map_archive(archive, out, name, settings, workers, scheduler, resume, overwrite, progress, say)


def _map_archive(archive, out: str, name: str, settings: MapSettings, workers, scheduler, resume: bool,
                 overwrite: bool, progress: bool, say) -> dict:
    """`map_archive` once its output is locked."""
    start = time.perf_counter()
    chosen = []
    if settings.region is None or settings.period is None:
        region, period, chosen = archive_extent(archive, settings.resolution, settings.cadence_s, settings.region,
                                                settings.period, settings.keep_undrogued, progress=progress)
        settings = dataclasses.replace(settings, region=region, period=period)
    crossing = settings.region_note()  # a region across the dateline is said, given or found
    chosen = [*chosen, crossing] if crossing else chosen
    tiles = settings.tiles()
    manifest = run_manifest(archive, settings)
    partial, complete = prepare_partial(out, manifest, resume, overwrite, say)
    if complete:
        say(f"{out} is already complete: nothing to do")
        with open_map(out) as done:
            if "check" in done.attrs:  # made with --withhold: its check said again
                for line in check_notes(done.attrs):
                    say(f"note: {line}")
        return {"tiles": len(tiles), "already_complete": True, "seconds": 0.0, "notes": []}
    grid = settings.grid()
    fixes, held = _withhold(map_fixes(archive, settings, tiles, progress), settings.withhold)
    if not len(fixes):  # what the cleaning did is why
        said = "; ".join(n.removeprefix("clean: ") for n in fixes.notes if n.startswith("clean: "))
        raise ValueError(f"{name}: the cleaning kept none of the fixes in the region and period ({said})")
    if not fixes.segments():
        raise ValueError(f"{name}: none of the {len(fixes)} fixes the cleaning kept in "
                         f"the region and period lies in a drifter segment the map can use ({unsegmented_text()})")
    cadence = fixes.cadence_note()
    if cadence:
        fixes = dataclasses.replace(fixes, notes=(*fixes.notes, cadence))
    sea = sea_fraction(grid.lon, grid.lat, settings.resolution)
    land = land_note(sea, fixes, grid, settings)
    method = settings.tile_method()
    data, method_notes = method.prepare(fixes)
    fixes = dataclasses.replace(fixes, notes=(*chosen, *fixes.notes, land, *method_notes))  # kept in the map
    start_partial(partial, manifest)
    for line in fixes.notes:
        say(f"note: {line}")
    done = {name[:-4] for name in os.listdir(os.path.join(partial, "tiles")) if name.endswith(".npz")}
    pending = [t for t in tiles if t.key not in done]
    say(f"note: {counted(len(tiles), 'tile')} of {settings.tile_deg:g} degrees with {settings.halo_deg:g}-degree "
        f"halos, {settings.window_days:g}-day windows every {settings.step_days:g} days (--tile-size, --window-days)"
        + (f"; {len(done)} done before" if done else ""))
    try:
        run_tiles(pending, data, grid, method, partial, len(done), len(tiles), workers, scheduler, progress, say)
        infos, check = write_map(out, partial, tiles, grid, settings, method, fixes, manifest, sea, held)
    except (TileFailed, OSError) as error:  # a tile, the scheduler or the disk: what is saved, how to go on
        raise type(error)(f"{error}; {interrupted_state(out)}") from error
    remove_tree(partial, fault="map-partial-removal")
    summary = method.summarise(infos)
    notes = list(fixes.notes) + summary.notes + (check_notes(check) if check is not None else [])
    for line in notes[len(fixes.notes):]:
        say(f"note: {line}")
    if summary.warning:
        say(f"warning: {summary.warning}")
    return {"tiles": len(tiles), "inverted": len(infos) - summary.skipped, "skipped": summary.skipped,
            "seconds": time.perf_counter() - start, "notes": notes, "check": check}


def map_fixes(archive, settings: MapSettings, tiles: list[Tile], progress: bool = False) -> Fixes:
    """Returns the fixes a map of `settings` (region and period given or found) is made from, before `--withhold`
    splits them: those of the tiles' boxes and windows, cleaned (archive.clean) and low-passed (`low_pass`)."""
    south, north = settings.region[2:]
    fixes = select_fixes(archive, settings.region, (min(t.start_s for t in tiles), max(t.end_s for t in tiles)),
                         margin_deg=settings.halo_deg / np.cos(np.deg2rad(max(abs(south), abs(north)))),
                         progress=progress)
    fixes = clean(fixes, settings.keep_undrogued)
    return fixes.low_passed() if settings.low_pass else fixes


def _withhold(fixes: Fixes, fraction: float) -> tuple[Fixes, Fixes | None]:
    """Returns (the fixes to map, those of the withheld drifters or None), a note on what was withheld added to the
    first's."""
    if not fraction:
        return fixes, None
    from lagda.mapping.check import withheld

    out = withheld(fixes, fraction)
    held, kept = fixes.subset(out), fixes.subset(~out)
    n_held, n_all = len(np.unique(held.traj)), len(np.unique(fixes.traj))
    note = (f"withheld {n_held} of {n_all} drifters ({len(held):,} fixes; --withhold {fraction:g}) from the map, to "
            "check it against their daily velocities at the end")
    return dataclasses.replace(kept, notes=(*kept.notes, note)), held
