"""lagda from Python: one call maps drifters or assimilates their tracks and returns an `xarray.Dataset`.

    import lagda

    maps = lagda.map(lagda.examples.path("gdp_like"), period=("2025-03-01", "2025-03-31"), resolution=0.25)
    maps.u.sel(time="2025-03-15").plot()          # eastward velocity, m/s
    result = lagda.assimilate(lagda.examples.path("gdp_like"))

Both calls are `lagda.map` and `lagda.assimilate` (loaded on first use, so `import lagda` stays quick). With
`out` the Dataset is opened lazily from the file or store written there; without it the output is written to a
temporary folder, read into memory and removed. Both run from a plain script with no `if __name__ == "__main__":`
guard: the map's Dask worker processes start without running the script again (lagda.mapping.dask_driver). Their errors
name the Python arguments (`resolution=0: must be positive`), as the command line's name its flags.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import xarray


def _quiet(line: str) -> None:
    """Says nothing (`say=None`)."""


def map(tracks, *, region=None, period=None, resolution: float = 0.25, out=None, workers: int | None = None,
        scheduler: str | None = None, resume: bool = False, overwrite: bool = False, progress: bool = True,
        say: Callable[[str], None] | None = print, **settings) -> xarray.Dataset:
    """Returns daily velocity maps with their std on (time, lat, lon), mapped from a drifter archive.

    The map of `lagda map` (lagda.mapping.run.map_archive): overlapping tiles on Dask, each an objective map of the
    drifters' velocities with the covariance they show, blended into one CF dataset: u, v (m/s), u_std, v_std
    (m/s), n_fixes, distance_to_fix (km), sea_area_fraction.

    Parameters
    ----------
    tracks
        a drifter archive: a ragged netCDF file or Zarr store (clouddrift, GDP), any longitude/latitude track
        file lagda reads, several such files or a folder of them.
    region
        (west, east, south, north) in degrees; west > east crosses the dateline when that band is at most
        180 degrees wide, and is refused when wider. None: the extent of the fixes (a note says which).
    period
        (first, last) map time, each an ISO 8601 string ("2025-03-01"), a numpy.datetime64, a
        pandas.Timestamp, a datetime or seconds since 1970-01-01T00:00:00Z. None: from the first to the last
        fix.
    resolution
        cell size in degrees of longitude and latitude.
    out
        the store to write, ending in .zarr or .nc; the Dataset is then opened lazily from it. None: written
        to a temporary folder, returned in memory, and removed.
    workers
        Dask worker processes on this machine (default: the CPUs).
    scheduler
        the address of a running Dask scheduler (tcp://host:8786) to use instead.
    resume
        finish an interrupted run from the tiles saved beside `out` (a finished map is opened as it is).
    overwrite
        start again, replacing `out` and any interrupted run.
    progress
        show progress bars on stderr.
    say
        where the notes go, one line each (default: print); None says nothing.
    **settings
        the other fields of lagda.mapping.settings.MapSettings (cadence_s, tile_deg, halo_deg, window_days,
        step_days, withhold, low_pass, land_mask, keep_undrogued, method, background, k_max, degree, local_gp).

    Returns
    -------
    xarray.Dataset
        The map as an `xarray.Dataset`. Its attrs hold what the store records (settings, manifest, the check with
        `withhold`), and "notes": every note line the run said, as a JSON list.

    Raises
    ------
    TypeError
        a keyword that is not a setting (the message lists them).
    ValueError
        one line naming the argument and the value refused (`resolution=0: must be positive`); an
        existing `out` without `resume=True` or `overwrite=True`; `resume` or `overwrite` without `out`; no fix
        in the region and period. Nothing is written.
    FileNotFoundError
        no such archive.

    Examples
    --------
    From a plain script (no `__main__` guard needed); a few days of the shipped example, coarse:

    ```python
    import lagda

    maps = lagda.map(lagda.examples.path("gdp_like"), period=("2025-03-01", "2025-03-05"), resolution=0.5)
    print(float(abs(maps.u).max()), "m/s")
    ```
    """
    from lagda.mapping import MapSettings, map_archive
    from lagda.mapping.store import open_map

    fields = {field.name for field in dataclasses.fields(MapSettings)} - {"region", "period", "resolution"}
    unknown = sorted(set(settings) - fields)
    if unknown:
        raise TypeError(f"lagda.map() got an unknown setting {unknown[0]}={settings[unknown[0]]!r}; the settings "
                        f"are {', '.join(sorted(fields))}")
    chosen = MapSettings(region=region, period=period, resolution=resolution, **settings)
    notes = []

    def note(line: str) -> None:  # said, and kept for the Dataset's attrs
        if line.startswith("note: "):
            notes.append(line.removeprefix("note: "))
        (say or _quiet)(line)

    run = dict(workers=workers, scheduler=scheduler, progress=progress, say=note)
    if out is not None:
        map_archive(tracks, out, chosen, resume=resume, overwrite=overwrite, **run)
        return _with_notes(open_map(out), notes)
    if resume or overwrite:
        raise ValueError(f"{'resume' if resume else 'overwrite'}=True needs out=STORE: without out the map is made "
                         "in a temporary folder and returned in memory")
    with tempfile.TemporaryDirectory(prefix="lagda-map-") as folder:
        path = os.path.join(folder, "map.zarr")
        map_archive(tracks, path, chosen, **run)
        with open_map(path) as stored:
            maps = stored.load()
    return _with_notes(maps, notes)


def _with_notes(ds: xarray.Dataset, notes: list[str]) -> xarray.Dataset:
    """Returns `ds` with attrs["notes"] the note lines the run said (JSON), those the store records among them; a
    map found complete keeps the store's."""
    if notes:
        ds.attrs["notes"] = json.dumps(notes)
    return ds


def assimilate(tracks, *, out=None, method: str | None = None, background=None,
               say: Callable[[str], None] | None = print, **options) -> xarray.Dataset:
    """Returns the posterior of the flow under a track file as an `xarray.Dataset`: mean velocity and its std.

    The assimilation of `lagda assimilate` (lagda.assimilation.assimilate.assimilate_file). For longitude/latitude
    drifters the result is on a lon/lat grid at daily times: u, v (m/s) with their std, and the tracks.

    Parameters
    ----------
    tracks
        a track file of any layout lagda reads (CF trajectory netCDF, clouddrift ragged, Parcels output,
        CSV), several, or a folder of them.
    out
        the result netCDF file to write; the Dataset is then opened lazily from it. None: written to a
        temporary folder, returned in memory, and removed.
    method
        a key of lagda.assimilation.METHODS ("linear", "hybrid", ...). None: chosen from the tracks
        (`linear` in a Fourier basis for longitude/latitude drifters; a note says so).
    background
        the path of a gridded product on (time, lat, lon), velocities or sea surface height (lagda.io.background),
        taken as the prior mean of `linear` on longitude/latitude drifters: they correct its departure, u, v are
        the background plus the departure, and far from the drifters the background
        (lagda.assimilation.background; notes say what psi and the std hold). None: a prior mean of zero.
    say
        where the notes and warnings go, one line each (default: print); None says nothing.
    **options
        the fields of lagda.assimilation.settings.AssimilateSettings (config, run_dir, n_grid, seed, dt,
        box, time_scale, basis, k_max, degree, climatology, times, keep_undrogued, low_pass, local_gp) and
        assimilate_file's own (overwrite, plot, plot_day); any other keyword is a setting of the method's config
        (e.g. `members=16` for `linear`), checked against it.

    Returns
    -------
    xarray.Dataset
        The result as an `xarray.Dataset`. Its attrs hold the notes (`settings_notes`), the reader's warnings
        (`read_warnings`) and the method's settings, as the file records them, and "diagnostics" (what the method
        decided, one line) and "scores" (JSON: scores against a truth the tracks carry, else {}).

    Raises
    ------
    ValueError
        one line: an unknown method or option, a bad value, an existing `out` without
        `overwrite=True`, tracks that do not fit the model, a background with a method or tracks that cannot take
        one. Nothing is written.
    FileNotFoundError
        no such track file, run directory or background.

    Examples
    --------
    ```python
    import lagda

    result = lagda.assimilate(lagda.examples.path("gdp_like"))
    print(result.attrs["diagnostics"])
    ```
    """
    from lagda.assimilation.assimilate import assimilate_file
    from lagda.assimilation.settings import AssimilateSettings

    per_call = {name: options.pop(name) for name in ("overwrite", "plot", "plot_day") if name in options}
    fields = {field.name for field in dataclasses.fields(AssimilateSettings)} - {"method"}
    given = {name: value for name, value in options.items() if name in fields}
    config = {name: value for name, value in options.items() if name not in fields}
    if config:
        if given.get("config") is not None:
            raise ValueError(f"{', '.join(f'{name}=' for name in config)} with config=: give the method's settings "
                             "in one of them")
        given["config"] = config
    say = say or _quiet
    settings = AssimilateSettings(method, **given, background=background)
    if out is not None:
        summary = assimilate_file(tracks, out, settings, **per_call)
        return _with_summary(_open_result(out, load=False), summary, say)
    if per_call.get("overwrite"):
        raise ValueError("overwrite=True needs out=FILE: without out the result is written to a temporary folder "
                         "and returned in memory")
    with tempfile.TemporaryDirectory(prefix="lagda-assimilate-") as folder:
        path = os.path.join(folder, "result.nc")
        summary = assimilate_file(tracks, path, settings, **per_call)
        result = _open_result(path, load=True)
    return _with_summary(result, summary, say)


def _open_result(path, load: bool) -> xarray.Dataset:
    """Returns the result file at `path`: opened lazily, or read into memory and closed (`load`)."""
    import xarray as xr

    if not load:
        return xr.open_dataset(path)
    with xr.open_dataset(path) as ds:
        return ds.load()


def _with_summary(result: xarray.Dataset, summary, say: Callable[[str], None]) -> xarray.Dataset:
    """Says the summary's notes and warnings, and returns `result` with its diagnostics and scores in attrs."""
    for kind, lines in (("note", summary.notes), ("warning", summary.warnings)):
        for line in lines:
            say(f"{kind}: {line}")
    result.attrs["diagnostics"] = summary.diagnostics
    result.attrs["scores"] = json.dumps(summary.scores, default=float)
    return result
