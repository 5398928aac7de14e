"""`lagda map`: tiles on Dask, each finished tile written at once, blended into one CF dataset on (time, lat, lon).

The run keeps its state in `OUT.partial/`: `manifest.json` (the settings, the archive's identity and the code's
digest, simulate.provenance) and one `tiles/KEY.npz` per finished tile (written to a temporary name, then renamed), so a
killed run resumes at the next tile (`resume=True`) and a finished one is not redone. A partial run made by other
code is not resumed, and a tile made by a worker running other code stops the run: either would blend two codes'
tiles into one map. The blend reads the pieces in layout order, so a resumed run
writes the same dataset as an uninterrupted one. The final dataset is written to a temporary name and renamed; the
partial folder is removed after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import numbers
import os
import shutil
import time

import numpy as np

from lagda.arguments import again, given
from lagda.assimilation.local_gp import mean_square_velocity
from lagda.io.fixes import Fixes, unsegmented_text
from lagda.io.land import SOURCE as LAND_SOURCE
from lagda.io.land import sea_fraction
from lagda.io.locations import is_url, open_zarr_url
from lagda.io.physical import parse_time
from lagda.io.sources import source_name, track_files
from lagda.mapping.archive import archive_extent, clean, select_fixes
from lagda.mapping.invert import FULL_SEGMENTS, NO_SEGMENT, Grid, invert_tile, is_fallback, tile_fixes
from lagda.mapping.tiles import DAY_S, Tile, check_extent, region_width, tile_layout
from lagda.report import counted
from simulate.atomic import (
    OutputLock,
    fault_point,
    make_folder_atomic,
    remove_stale,
    remove_stale_inside,
    remove_tree,
    temporary_name,
    write_atomic,
    write_netcdf,
)
from simulate.provenance import code_digest, other_code

VARIABLES = ("u", "v", "u_std", "v_std")
BLEND_DAYS = 32  # map times blended and written at once
TILE_SENDS = 3  # a tile whose Dask worker is lost is sent again, at most this many times in all


# what a map made before a setting existed did: it is compared as that, not as the setting's default
ABSENT_SETTINGS = {"low_pass": False, "method": "basis", "background": None}
METHODS = ("objective", "basis")


def _region_degrees(region) -> tuple[float, float, float, float] | None:
    """Returns a region as (west, east, south, north) floats, None for None.

    West east of east reads as the band eastward from west across the dateline only when that band is the narrower
    reading of the two (at most 180 degrees wide): `170, -170` is 20 degrees across the dateline; `-37, -41` would
    be 356 degrees, a map of the whole latitude band where 4 degrees were meant, and is refused, the message
    writing both readings (the wide band as `-37, 319`).

    Raises:
        ValueError: not four finite numbers, or a west east of east whose band across the dateline is over 180
            degrees wide.
    """
    if region is None:
        return None
    try:
        west, east, south, north = (float(value) for value in region)
    except (TypeError, ValueError):
        raise ValueError(f"{given('region', region)}: four numbers, west east south north in degrees") from None
    if not np.all(np.isfinite([west, east, south, north])):
        raise ValueError(f"{given('region', region)}: four finite numbers, west east south north in degrees")
    width = region_width((west, east))
    if west > east and width > 180.0:
        raise ValueError(f"{given('region', region)}: west {west:g} lies east of east {east:g}; across the "
                         f"dateline that is a {width:g}-degree band: for the {360 - width:g}-degree band between them "
                         f"give {given('region', (east, west, south, north))}, for the wide band "
                         f"{given('region', (west, east + 360, south, north))}")
    return west, east, south, north


def _meridian_crossed(west: float, width: float) -> str:
    """Returns " across the dateline" or " across 0 degrees" (a 0..360 region across Greenwich) when the band of
    `width` degrees eastward from `west` crosses it, else "" (a west in 0..360 and an east in -180..180)."""
    for meridian, name in ((180.0, "the dateline"), (0.0, "0 degrees")):
        if 0.0 < (meridian - west) % 360.0 < width:
            return f" across {name}"
    return ""


def _period_seconds(period) -> tuple[float, float] | None:
    """Returns a period as (start, end) seconds since 1970-01-01T00:00:00Z, None for None. Each date is an ISO 8601
    string, a numpy.datetime64, a pandas.Timestamp, a datetime or date (each written as ISO 8601 and read by
    lagda.io.physical.parse_time; with a time zone, in UTC) or seconds since 1970-01-01T00:00:00Z.

    Raises:
        ValueError: not two dates, or a date that is none of these.
    """
    if period is None:
        return None
    if isinstance(period, (str, bytes)) or not hasattr(period, "__len__") or len(period) != 2:
        raise ValueError(f"{given('period', period)}: two dates, the first and last map time (e.g. "
                         f"{given('period', ('2025-03-01', '2025-03-31'))})")

    def seconds(when) -> float:
        try:
            if isinstance(when, numbers.Real) and not isinstance(when, bool):
                if np.isfinite(when):
                    return float(when)
            else:
                return parse_time(str(when))  # str() of datetime64, Timestamp and datetime is ISO 8601
        except ValueError:  # not ISO 8601, or a year pandas cannot hold
            pass
        raise ValueError(f"{given('period', period)}: {str(when)!r} is not a date (ISO 8601 such as '2025-03-01', "
                         "a numpy.datetime64, a pandas.Timestamp, a datetime, or seconds since 1970)")

    return seconds(period[0]), seconds(period[1])


class TileFailed(RuntimeError):
    """A tile whose Dask worker was lost each of the TILE_SENDS times it was sent (a tile that ends its worker), or
    that a worker running other lagda code made (its `code_digest` differs)."""


@dataclasses.dataclass(frozen=True)
class MapSettings:
    """What a map is made of (every field is part of what a resume compares).

    Attributes:
        region: (west, east, south, north) degrees; west > east is the band eastward from west across the
            dateline when that band is at most 180 degrees wide (`(170, -170, ...)`: 20 degrees; a note says so),
            and refused when wider (`(-37, -41, ...)`: write `(-41, -37, ...)`, or `(-37, 319, ...)` for the wide
            band); None: the extent of the archive's fixes, which `map_archive` finds and records
            (archive.archive_extent).
        period: (start, end), each an ISO 8601 string ("2025-03-01"), a numpy.datetime64, a pandas.Timestamp, a
            datetime or seconds since 1970-01-01T00:00:00Z; kept as seconds (UTC); None: from the first to the last
            fix, likewise.
        resolution: cell size in degrees (longitude and latitude).
        cadence_s: seconds between map times (default: a day).
        tile_deg: tile height in degrees of latitude; a tile is about as wide in distance (lagda.mapping.tiles).
        halo_deg: how far each tile's box reaches beyond its core on every side, in degrees of latitude (and the
            same distance in longitude): the fixes in the box inform the tile, whose field fades to 0 across the
            halo where it is blended with its neighbours'.
        window_days: each tile's time window, days.
        step_days: the step between the starts of consecutive windows, days.
        k_max: the tile basis's circular Fourier modes, up to `k_max` per box side.
        degree: the tile basis's Legendre polynomial degree in time.
        keep_undrogued: keep fixes with drogue_status 0.
        local_gp: add to each tile's field a space-time Gaussian process of what the basis leaves out at the
            drifters (lagda.mapping.residual), fitted per tile; without it that velocity is the error model's std.
        land_mask: leave the cells with no sea in the GLOBE 1-km land mask NaN (lagda.io.land); the map's
            `sea_area_fraction` is written either way.
        withhold: the fraction of the drifters left out of the map and checked against it once it is written
            (lagda.mapping.check: the same drifters on every run); 0: every drifter mapped.
        low_pass: average each drifter segment's positions over its local inertial period and two tidal periods
            before the map is made (lagda.io.lowpass): the map is of the flow varying over days, without the
            inertial oscillations and tides that hourly fixes hold.
        method: "objective" (each tile an objective map with the archive's own covariance: lagda.mapping.objective;
            far from the drifters the prior) or "basis" (each tile the `linear` posterior in a Fourier-Legendre basis
            of its box with a local GP: lagda.mapping.invert; k_max, degree and local_gp are its settings).
        background: the path of a gridded velocity or sea surface height product (lagda.io.background) taken as
            the prior mean of the "objective" method, or None for a prior mean of zero.

    Raises:
        ValueError: one line naming the value refused, as the user gave it (`resolution=0` in Python, `--resolution
            0` on the command line: lagda.arguments): resolution, cadence_s, tile_deg, halo_deg or
            window_days not positive, step_days not in (0, window_days], k_max < 1 or degree < 0; a region not of
            four numbers, its latitudes outside -80 <= south < north <= 80, or a west east of its east by over 180
            degrees; a period not of two dates, or one that does not end after it starts; withhold outside [0, 1);
            an unknown method, or a background with the basis method.

    Example:
        >>> s = MapSettings(region=(-60, -20, 20, 60), period=("2025-01-01", "2025-01-31"))
        >>> s.period  # seconds since 1970-01-01T00:00:00Z
        (1735689600.0, 1738281600.0)
        >>> grid = s.grid()  # cells of 0.25 degree, daily
        >>> len(grid.days), len(grid.lat), len(grid.lon)
        (31, 160, 160)
        >>> MapSettings(region=(170, -170, 30, 40)).region_note()[:63]
        'region: west 170 > east -170, read as the 20-degree band eastwa'
    """

    region: tuple[float, float, float, float] | None = None
    period: tuple[float, float] | None = None
    resolution: float = 0.25
    cadence_s: float = DAY_S
    tile_deg: float = 6.0
    halo_deg: float = 1.5
    window_days: float = 30.0
    step_days: float = 15.0
    k_max: float = 8.0
    degree: int = 3
    keep_undrogued: bool = False
    local_gp: bool = True
    land_mask: bool = True
    withhold: float = 0.0
    low_pass: bool = True
    method: str = "objective"
    background: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "region", _region_degrees(self.region))  # frozen: each set once, here
        object.__setattr__(self, "period", _period_seconds(self.period))
        for name, value, ok, needs in (("resolution", self.resolution, self.resolution > 0, "positive"),
                                       ("cadence_s", self.cadence_s, self.cadence_s > 0, "positive (seconds)"),
                                       ("k_max", self.k_max, self.k_max >= 1, "at least 1"),
                                       ("degree", self.degree, self.degree >= 0, "at least 0"),
                                       ("tile_deg", self.tile_deg, self.tile_deg > 0, "positive"),
                                       ("halo_deg", self.halo_deg, self.halo_deg > 0, "positive"),
                                       ("window_days", self.window_days, self.window_days > 0, "positive"),
                                       ("step_days", self.step_days, 0 < self.step_days <= self.window_days,
                                        f"positive and at most the window, {self.window_days:g} days")):
            if not ok:
                raise ValueError(f"{given(name, value)}: must be {needs}")
        if self.method not in METHODS:
            raise ValueError(f"{given('method', self.method)}: one of {', '.join(METHODS)}")
        if self.background is not None and self.method != "objective":
            raise ValueError(f"{given('background', self.background)}: the prior mean of the objective method, not "
                             f"with {given('method', self.method)}")
        check_extent(self.region, self.period)  # before the archive is read
        if not 0.0 <= self.withhold < 1.0:
            raise ValueError(f"{given('withhold', self.withhold)}: the fraction of drifters to withhold must be in "
                             "[0, 1)")

    def region_note(self) -> str:
        """Returns the note on a region whose west lies east of its east (read across the dateline), "" for
        another region or none."""
        if self.region is None or self.region[0] <= self.region[1]:
            return ""
        west, east, south, north = self.region
        width = region_width(self.region)
        return (f"region: west {west:g} > east {east:g}, read as the {width:g}-degree band eastward from {west:g}"
                f"{_meridian_crossed(west, width)} to {east:g} (the {360 - width:g}-degree band from "
                f"{east:g} to {west:g} is {given('region', (east, west, south, north))})")

    def grid(self) -> Grid:
        """Returns the map's cells (centres) and times (region and period given or found)."""
        if self.region is None or self.period is None:
            raise ValueError("the map's grid needs its region and period (map_archive finds them in the archive)")
        west, _, south, north = self.region
        nx = max(1, int(round(region_width(self.region) / self.resolution)))
        ny = max(1, int(round((north - south) / self.resolution)))
        days = np.arange(self.period[0], self.period[1] + 1e-6, self.cadence_s)
        return Grid(west + self.resolution * (np.arange(nx) + 0.5), south + self.resolution * (np.arange(ny) + 0.5),
                    days)

    def tiles(self) -> list[Tile]:
        """Returns the map's tiles (lagda.mapping.tiles.tile_layout of its region, period, tile size, halo and
        windows), region and period given or found."""
        return tile_layout(self.region, self.period, self.tile_deg, self.halo_deg, self.window_days, self.step_days)


def _identity(archive) -> dict:
    """Returns what a resume checks of the archive: its absolute path and size in bytes; for several files (a
    folder, or files listed in any order) their number and a digest of their sorted absolute paths; for a Zarr
    store at a URL the URL, its dimensions' sizes and a digest of its attributes (a new version differs)."""
    files = track_files(archive)
    if len(files) == 1 and is_url(files[0]):
        with open_zarr_url(files[0]) as ds:
            described = json.dumps({"sizes": dict(ds.sizes), "attrs": ds.attrs}, sort_keys=True, default=str)
        return {"archive": files[0], "archive_bytes": None,
                "archive_sha256": hashlib.sha256(described.encode()).hexdigest()}
    size = sum(os.path.getsize(path) if os.path.isfile(path) else sum(
        os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names) for path in files)
    if len(files) == 1:
        return {"archive": os.path.abspath(files[0]), "archive_bytes": int(size)}
    paths = "\n".join(sorted(os.path.abspath(path) for path in files))
    return {"archive": os.path.dirname(os.path.commonprefix(paths.splitlines())) or os.sep, "archive_files": len(files),
            "archive_paths_sha256": hashlib.sha256(paths.encode()).hexdigest(), "archive_bytes": int(size)}


def _manifest(archive, settings: MapSettings) -> dict:
    return {"settings": json.loads(json.dumps(dataclasses.asdict(settings))), **_identity(archive),
            "code": code_digest()}


def open_map(path):
    """Returns a `lagda map` store (.zarr folder or .nc file) as a lazy xarray Dataset.

    Raises:
        FileNotFoundError: no such store.
    """
    import xarray as xr

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such map: {path}")
    return xr.open_zarr(path) if os.path.isdir(path) else xr.open_dataset(path)


def _stored(path: str) -> dict | None:
    """Returns the manifest a partial folder or a finished map records, None when it cannot be read."""
    try:
        if path.endswith(".partial"):
            with open(os.path.join(path, "manifest.json")) as handle:
                return json.load(handle)
        with open_map(path) as ds:
            return json.loads(ds.attrs["manifest"])
    except (OSError, ValueError, KeyError):
        return None


def _differences(stored: dict, manifest: dict) -> list[str]:
    settings = set(stored.get("settings", {})) | set(manifest["settings"])
    # a setting newer than a stored run: that run had its default, or did without what the setting adds
    defaults = dataclasses.asdict(MapSettings()) | ABSENT_SETTINGS
    old = {k: stored.get("settings", {}).get(k, defaults.get(k)) for k in settings}
    return sorted({k for k in settings if old[k] != manifest["settings"].get(k)}
                  | {k for k in set(stored) | set(manifest) if k.startswith("archive")
                     and stored.get(k) != manifest.get(k)})


def _prepare(out: str, manifest: dict, resume: bool, overwrite: bool, say) -> tuple[str, bool]:
    """Returns (the partial folder, whether the output is already complete) after checking resume and overwrite
    and removing what interrupted runs left (stale temporaries)."""
    partial = out + ".partial"
    for path in (out, partial):
        remove_stale(path, lambda line: say(f"note: {line}"))
    if os.path.isdir(partial):
        remove_stale_inside(os.path.join(partial, "tiles"), lambda line: say(f"note: {line}"))
    if overwrite:  # the old output stays until the new one replaces it
        if os.path.isdir(partial):
            remove_tree(partial)
        if resume:
            say(f"note: {given('resume')} with {given('overwrite')}: starting again")
        return partial, False
    if os.path.exists(out):
        if not resume:
            raise ValueError(f"{out} exists; pass {given('overwrite')} to replace it, or {given('resume')} to finish "
                             f"an interrupted run (on a complete map, {given('resume')} changes nothing)")
        stored = _stored(out)
        if stored is not None and not _differences(stored, manifest):
            if os.path.isdir(partial):  # killed after the rename, before the cleanup
                remove_tree(partial)
                say(f"note: removed {partial}, left by a run killed after its map was written")
            if stored.get("code") != manifest["code"]:
                say(f"note: {out} was made by {other_code(stored.get('code'))}: left as it is; "
                    f"{given('overwrite')} makes it again with this code")
            return partial, True
        if not os.path.isdir(partial):
            raise ValueError(f"{out} exists with other settings and there is no interrupted run to resume: pass "
                             f"{given('overwrite')} to replace it")
    if os.path.isdir(partial):
        if not resume:
            raise ValueError(f"{partial} holds an interrupted run: pass {given('resume')} to finish it or "
                             f"{given('overwrite')} to start again")
        stored = _stored(partial)
        if stored is None:  # lagda makes a partial folder whole with its manifest: this one is not lagda's
            raise ValueError(f"{partial} has no readable manifest: pass {given('overwrite')} to start again")
        changed = _differences(stored, manifest)
        if changed:
            raise ValueError(f"cannot resume {out}: its partial run was made with other settings "
                             f"({', '.join(changed)}); pass {given('overwrite')} to start again")
        if stored.get("code") != manifest["code"]:  # its tiles and this code's would blend into one map
            raise ValueError(f"cannot resume {out}: its partial run was made by {other_code(stored.get('code'))}; "
                             f"pass {given('overwrite')} to start again")
    elif resume:
        say("note: nothing to resume: starting a new run")
    return partial, False


def _start_partial(partial: str, manifest: dict) -> None:
    """Creates the partial folder, whole with its manifest and tiles folder, unless it exists."""
    if os.path.isdir(partial):
        return

    def fill(folder):
        os.mkdir(os.path.join(folder, "tiles"))
        with open(os.path.join(folder, "manifest.json"), "w") as handle:
            json.dump(manifest, handle, indent=1)

    make_folder_atomic(partial, fill, fault="map-partial")


def interrupted_state(out) -> str:
    """Returns what an interrupted map left at `out`, and what the same command or call with resume does."""
    out = os.fspath(out)
    tiles = os.path.join(out + ".partial", "tiles")
    if os.path.exists(out) and not os.path.isdir(tiles):
        return f"{out} is complete; {again()} with {given('resume')} reports it already complete"
    if os.path.isdir(tiles):
        saved = sum(name.endswith(".npz") for name in os.listdir(tiles))
        return (f"{saved} tiles are saved in {out}.partial: rerun {again()} with {given('resume')} to continue "
                "from the next tile")
    return f"nothing was saved: rerun {again()}"


def _run_tile(fixes: Fixes, tile: Tile, grid: Grid, settings: "MapSettings", lone_floor: float = 0.0,
              prior=None) -> dict:
    """Returns the tile's piece (objective.map_tile with the `prior` Covariance, or invert.invert_tile, as
    `settings.method` says), its info with the worker's `code_digest`; a tile whose tracks cannot be inverted
    (ValueError) is a skipped piece."""
    try:
        if settings.method == "objective":
            from lagda.mapping.objective import map_tile

            piece = map_tile(fixes, tile, grid, prior, settings.background)
        else:
            piece = invert_tile(fixes, tile, grid, settings.k_max, settings.degree, settings.local_gp, lone_floor)
    except ValueError as error:
        piece = {"info": {"tile": tile.key, "fixes": int(len(fixes)), "skipped": str(error)}}
    piece["info"]["code"] = code_digest()
    return piece


def _save_piece(partial: str, piece: dict) -> None:
    path = os.path.join(partial, "tiles", piece["info"]["tile"] + ".npz")
    arrays = {name: piece[name] for name in VARIABLES if name in piece}

    def write(tmp):
        with open(tmp, "wb") as handle:
            np.savez(handle, info=np.array(json.dumps(piece["info"])), **arrays)

    write_atomic(path, write, fault="map-tile")


def _load_info(partial: str, key: str) -> dict:
    with np.load(os.path.join(partial, "tiles", key + ".npz")) as data:
        return json.loads(str(data["info"]))


def _load_piece(partial: str, key: str) -> dict:
    with np.load(os.path.join(partial, "tiles", key + ".npz")) as data:
        return {"info": json.loads(str(data["info"])), **{name: data[name] for name in VARIABLES if name in data}}


def map_archive(archive, out, settings: MapSettings, workers: int | None = None, scheduler: str | None = None,
                resume: bool = False, overwrite: bool = False, progress: bool = True, say=print) -> dict:
    """Maps the archive's drifters to daily velocity maps with their std; writes `out` (.zarr or .nc); returns a
    summary of the run.

    A region or period left None in `settings` is the extent of the archive's fixes (the same on a resume); a
    note says what was chosen.

    Args:
        archive: a ragged netCDF file or Zarr store read in slices, any lon/lat track file, several, or a folder
            of them (lagda.io.archive).
        out: the output path, ending in .zarr or .nc.
        settings: what the map is made of (`MapSettings`); a resume compares every field.
        workers: Dask LocalCluster worker processes (default: the CPUs); ignored with `scheduler`.
        scheduler: the address of a running Dask scheduler (tcp://HOST:8786) to use instead of a local cluster.
        resume: finish an interrupted run from the tiles saved in `OUT.partial/` (a finished one is left as it
            is).
        overwrite: start again, discarding an existing output or unfinished run.
        progress: show progress bars (reading the archive, the tiles) on stderr.
        say: where the progress notes go (one line each; default: print).

    Returns:
        A summary dict: "tiles" (their count), "inverted" and "skipped" (tiles), "seconds" (wall), "notes" (the
            note lines said) and "check" (the withheld drifters' check with `settings.withhold`, else None); for
            an output already complete, {"tiles", "already_complete": True, "seconds": 0.0, "notes": []}.

    Raises:
        FileNotFoundError: missing archive.
        ValueError: bad settings, an existing output, a resume with other settings, no fix in the region and
            period; another run writing `out` (Busy, a ValueError).
        TileFailed: a tile's Dask worker was lost each time it was sent (a lost worker is otherwise made good:
            its tiles are sent again); the finished tiles are kept, the message says how to go on.
        OSError: the scheduler lost (ConnectionError) or a tile not saved; the finished tiles are kept, the
            message says how to go on.

    Example:
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
    manifest = _manifest(archive, settings)
    partial, complete = _prepare(out, manifest, resume, overwrite, say)
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
    land_note = _land_note(sea, fixes, grid, settings)
    prior, prior_notes, data = None, (), fixes
    if settings.method == "objective":
        from lagda.mapping.objective import Velocities

        data = Velocities.of_fixes(fixes)
        prior, prior_notes = prior_covariance(data, settings)
    fixes = dataclasses.replace(fixes, notes=(*chosen, *fixes.notes, land_note, *prior_notes))  # kept in the map
    _start_partial(partial, manifest)
    for line in fixes.notes:
        say(f"note: {line}")
    done = {name[:-4] for name in os.listdir(os.path.join(partial, "tiles")) if name.endswith(".npz")}
    pending = [t for t in tiles if t.key not in done]
    say(f"note: {counted(len(tiles), 'tile')} of {settings.tile_deg:g} degrees with {settings.halo_deg:g}-degree "
        f"halos, {settings.window_days:g}-day windows every {settings.step_days:g} days (--tile-size, --window-days)"
        + (f"; {len(done)} done before" if done else ""))
    try:
        _compute(pending, data, grid, settings, partial, len(done), len(tiles), workers, scheduler, progress, say,
                 mean_square_velocity(fixes) if prior is None else 0.0, prior)
        infos, check = _write(out, partial, tiles, grid, settings, fixes, manifest, sea, held)
    except (TileFailed, OSError) as error:  # a tile, the scheduler or the disk: what is saved, how to go on
        raise type(error)(f"{error}; {interrupted_state(out)}") from error
    remove_tree(partial, fault="map-partial-removal")
    if settings.method == "objective":
        notes = list(fixes.notes) + [objective_summary(infos)] + (check_notes(check) if check is not None else [])
        for line in notes[len(fixes.notes):]:
            say(f"note: {line}")
        return {"tiles": len(tiles), "inverted": len(infos), "skipped": 0, "seconds": time.perf_counter() - start,
                "notes": notes, "check": check}
    skipped = [i for i in infos if "skipped" in i]
    zero = sum(bool(i.get("zero_guard")) for i in infos)
    outliers = [i.get("velocity_outliers_dropped", 0) for i in infos]
    empty = sum(i["skipped"] == NO_SEGMENT for i in skipped)
    n_lone = sum(is_fallback(i) for i in infos)
    failed = [f"{i['tile']}: {i['skipped']}" for i in skipped if i["skipped"] != NO_SEGMENT]
    # a tile whose tracks cannot be inverted (drifters that never move: no velocity variance) is said with why
    unusable = (f"; {len(failed)} whose tracks could not be inverted (left to the others, else NaN; "
                f"{failed[0]}{' and others in tile_records' if len(failed) > 1 else ''})" if failed else "")
    lone = (f" ({n_lone} of a single drifter segment: about zero, its std at least the drifters' RMS velocity "
            f"away from it, used where no tile of {FULL_SEGMENTS} or more segments reaches)" if n_lone else "")
    said = [f"{empty} without a drifter (left to the others, else NaN)" if empty else "",
            f"{zero} answered zero (their drifters predicted held-out ones no better)" if zero else "",
            f"{counted(sum(outliers), 'velocity', 'velocities')} far off their tile's fitted field left out (fixes off "
            "their track that the cleaning kept)" if sum(outliers) else ""]
    notes = list(fixes.notes) + [f"{counted(len(infos) - len(skipped), 'tile')} mapped from their drifters{lone}"
                                 + "".join(f"; {words}" for words in said if words) + unusable]
    notes += local_gp_summary(infos)
    if check is not None:
        notes += check_notes(check)
    for line in notes[len(fixes.notes):]:
        say(f"note: {line}")
    if len(skipped) == len(infos):
        why = failed or ["no tile holds a drifter segment"]
        say(f"warning: no tile was inverted, so the map holds no velocity (NaN everywhere): {'; '.join(why[:2])}")
    return {"tiles": len(tiles), "inverted": len(infos) - len(skipped), "skipped": len(skipped),
            "seconds": time.perf_counter() - start, "notes": notes, "check": check}


def prior_covariance(data, settings: MapSettings):
    """Returns (the objective map's prior covariance, lagda.mapping.covariance.Covariance, estimated from the
    drifters' velocities `data` (lagda.mapping.objective.Velocities) less the prior mean over the map's
    region and period; its note lines)."""
    from lagda.mapping.covariance import estimate
    from lagda.mapping.objective import open_background, prior_mean

    lon, lat, seconds, velocity = data.lon, data.lat, data.seconds, data.velocity
    notes = ()
    if settings.background is not None:
        background = open_background(settings.background)
        notes = tuple(f"background: {line}" for line in background.notes)
        u, _ = background.velocity(lon, lat, seconds)
        missing = int(np.isnan(u).sum())
        notes += (f"background {os.path.basename(settings.background)}: the prior mean; the drifters map its "
                  "departure" + (f" ({missing:,} of {len(u):,} drifter velocities lie where it has no value: "
                                 "zero there)" if missing else ""),)
        velocity = velocity - prior_mean(settings.background, lon, lat, seconds)
    cov = estimate(lon, lat, seconds, velocity, data.drifter, settings.region, settings.period)
    return cov, (*notes, *cov.notes(settings.background is not None))


def objective_summary(infos: list[dict]) -> str:
    """Returns one line on the objective map's tiles: how many, how many had drifter velocities."""
    informed = sum(i.get("velocities", 0) > 0 for i in infos)
    if informed == len(infos):
        return f"{counted(len(infos), 'tile')} mapped from the drifters' velocities"
    return (f"{counted(len(infos), 'tile')} mapped: {informed} from drifter velocities, {len(infos) - informed} with "
            "none (the prior mean and std)")


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


def _compute(pending, fixes, grid, settings, partial, n_done, n_tiles, workers, scheduler, progress, say,
             lone_floor: float = 0.0, prior=None) -> None:
    """Runs the pending tiles on Dask and saves each piece as it finishes. A tile whose worker is lost (a machine
    gone, a process killed) is sent again, said in a note: its fixes were scattered to that worker, which Dask
    cannot rebuild.

    Raises:
        TileFailed: a tile's worker was lost each of the TILE_SENDS times it was sent. ConnectionError: the
            scheduler was lost.
    """
    if not pending:
        return
    import logging

    from dask.distributed import Client

    client_log = logging.getLogger("distributed.client")
    level = client_log.level
    with _workers_without_main_script():  # the cluster's life: a lost worker is started again within it
        cluster = local_cluster(workers) if scheduler is None else None
        try:
            with Client(scheduler or cluster) as client:
                _send_tiles(client, pending, fixes, grid, settings, partial, n_done, n_tiles, progress, say,
                            lone_floor, prior)
        finally:
            client_log.setLevel(level)
            if cluster is not None:
                cluster.close()


@contextlib.contextmanager
def _workers_without_main_script():
    """While it lasts, a worker process this process starts does not run the user's `__main__` script again.

    Python's spawn start (Dask's) runs the parent's main script or module again in each new process, as
    `__mp_main__`, so that the functions it defines can be found there. The tiles need only lagda's own functions;
    and a script that maps without an `if __name__ == "__main__":` guard would, in each worker, start the same map
    again, find its output locked and stop the worker ("Nanny failed to start"). The spawn start reads which
    script from `__main__.__file__` and `__main__.__spec__`: both are hidden while the cluster lives, and put back.
    """
    import sys

    main = sys.modules.get("__main__")
    hidden = {name: main.__dict__.pop(name) for name in ("__file__", "__spec__") if main is not None
              and name in main.__dict__}
    if "__spec__" in hidden:
        main.__spec__ = None  # a module's __spec__ is always there: None is "run as a script", and no file
    try:
        yield
    finally:
        main.__dict__.update(hidden)


def _send_tiles(client, pending, fixes, grid, settings, partial, n_done, n_tiles, progress, say,
                lone_floor: float = 0.0, prior=None) -> None:
    """`_compute`'s work on its client: a bounded number of tiles in flight, each piece saved as it comes; a tile of
    one drifter segment takes `lone_floor` (m/s)^2, the drifters' mean square velocity, as the least variance
    away from its drifter (`invert.invert_tile`)."""
    import logging
    from concurrent.futures import CancelledError

    from dask.distributed import KilledWorker, as_completed
    from tqdm import tqdm

    # a bounded number of tiles in flight: the client holds the fixes of those tiles only
    limit = 2 * max(1, len(client.scheduler_info().get("workers", {})))
    queue = iter(pending)
    velocities = settings.method == "objective"  # then `fixes` are the map's Velocities, in time order
    by_time = None if velocities else np.argsort(fixes.time, kind="stable")
    sorted_time = None if velocities else fixes.time[by_time]

    inputs = {}  # each running tile and its fixes, scattered, by its future's key
    sends = {}  # the times each tile was sent

    def tile_data(tile):  # the window's fixes first (a binary search), then the box among them
        if velocities:
            return fixes.in_tile(tile)
        lo = np.searchsorted(sorted_time, tile.start_s, side="left")
        hi = np.searchsorted(sorted_time, tile.end_s, side="right")
        return tile_fixes(fixes.subset(np.sort(by_time[lo:hi])), tile)  # back in (drifter, time) order

    def submit(tile):
        # sent to a worker as data, not inside the task graph (which Dask warns of beyond 10 MB: a dense tile)
        data = client.scatter(tile_data(tile), hash=False)
        sends[tile.key] = sends.get(tile.key, 0) + 1
        future = client.submit(_run_tile, data, tile, grid, settings, lone_floor, prior,
                               key=f"tile-{tile.key}-{sends[tile.key]}", pure=False)
        inputs[future.key] = (tile, data)
        return future

    running = as_completed([submit(t) for _, t in zip(range(limit), queue)])  # range first: no tile lost
    with tqdm(total=n_tiles, initial=n_done, unit="tile", disable=not progress, desc="lagda map") as bar:
        for future in running:
            tile, data = inputs.pop(future.key)
            try:
                piece = future.result()
            except (CancelledError, KilledWorker) as error:  # its worker was lost, and the fixes scattered there
                if getattr(error, "reason", "") in ("scheduler-connection-lost", "scheduler-restart"):
                    # the client's reconnection, cancelled as it closes, would log a traceback over the error line
                    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
                    raise ConnectionError(f"lost the Dask scheduler ({error.reason})") from None
                data.release()
                if sends[tile.key] >= TILE_SENDS:
                    raise TileFailed(f"tile {tile.key}: its Dask worker was lost each of the {TILE_SENDS} times "
                                     "it was sent (a tile that ends its worker: out of memory? fewer workers "
                                     f"leave each more, e.g. {given('workers', 1)})") from None
                with tqdm.external_write_mode():  # the note on its own line, the bar drawn again below it
                    say(f"note: tile {tile.key}: its Dask worker was lost; sent again")
                running.add(submit(tile))
                continue
            made_by = piece["info"].pop("code")  # the manifest's when it is this code's: not kept per tile
            if made_by != code_digest():  # a worker with another install: its tiles would blend in
                raise TileFailed(f"tile {tile.key} was made by a Dask worker running other lagda code (source digest "
                                 f"{made_by}; this run's is {code_digest()}): install the same lagda on every worker")
            _save_piece(partial, piece)
            future.release()
            data.release()
            bar.update(1)
            following = next(queue, None)
            if following is not None:
                running.add(submit(following))


def local_cluster(workers: int | None):
    """Returns a dask.distributed.LocalCluster of `workers` single-threaded worker processes (default: the CPUs).

    Dask starts its workers with MALLOC_TRIM_THRESHOLD_=65536, which turns glibc's adaptive mmap threshold off:
    every matrix a tile allocates is then mapped and unmapped afresh, and the page faults make a tile about 1.6x
    slower. These workers start without it.
    """
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        # the scheduler's HTTP server on a free port: on Dask's 8787, a second map on the machine printed a warning;
        # each worker runs this module's dask_setup as it starts
        return LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=40, preload=[__name__])


def dask_setup(worker) -> None:
    """Run by each local worker process as it starts (Dask's preload hook): it ignores SIGINT.

    Ctrl-C in a terminal reaches every process of the command; the workers' share of it printed a traceback each
    over the line that says what the interrupted run left. `lagda map` itself stops on it and closes its cluster,
    which ends the workers.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _land_note(sea: np.ndarray, fixes: Fixes, grid: Grid, settings: MapSettings) -> str:
    """Returns the note on the land cells (sea fraction 0): how many, what becomes of them, the fixes in them."""
    land = sea == 0
    j, i, ok = _cells_of(fixes.lon, fixes.lat, grid, settings)
    ashore = int(land[j[ok], i[ok]].sum())
    share = f"{int(land.sum()):,} of {land.size:,} cells ({land.mean():.1%}) have no sea in {LAND_SOURCE}"
    fixes_there = (f"; {ashore:,} fixes lie in them (drifters ashore, or a coast finer than the mask)" if ashore
                   else "")
    if settings.land_mask:
        return f"land: {share}: left NaN (--no-land-mask maps them){fixes_there}"
    return f"land: {share}: mapped all the same (--no-land-mask){fixes_there}"


def _write(out, partial, tiles, grid: Grid, settings: MapSettings, fixes: Fixes, manifest: dict,
           sea: np.ndarray, held: Fixes | None = None) -> tuple[list[dict], dict | None]:
    """Blends the pieces (in layout order) and writes the dataset, BLEND_DAYS map times at a time (the blend's
    memory is a block's, not the period's), the land cells NaN if the settings say so; with `held` (withheld
    drifters' fixes), checks the written map against them and adds the scores to its attributes before it takes
    its name. Returns (the pieces' infos, the check's attributes or None)."""
    import dask
    import dask.array as da

    infos = [_load_info(partial, tile.key) for tile in tiles]
    n = len(grid.days)
    blocks = [(lo, min(lo + BLEND_DAYS, n)) for lo in range(0, n, BLEND_DAYS)]
    cells = (len(grid.lat), len(grid.lon))
    land = (sea == 0) if settings.land_mask else None
    blended = da.concatenate([da.from_delayed(dask.delayed(_blend_block)(partial, tiles, grid, lo, hi, land),
                                              (len(VARIABLES), hi - lo, *cells), np.float32) for lo, hi in blocks],
                             axis=1)
    counts = da.concatenate([da.from_delayed(dask.delayed(_fix_counts)(fixes, grid, settings, lo, hi),
                                             (hi - lo, *cells), np.int32) for lo, hi in blocks])
    distance = da.concatenate([da.from_delayed(dask.delayed(fix_distance)(fixes, grid, settings, lo, hi),
                                               (hi - lo, *cells), np.float32) for lo, hi in blocks])
    ds = _dataset(grid, settings, dict(zip(VARIABLES, blended)), counts, infos, sea, distance)
    ds.attrs.update({"notes": json.dumps(list(fixes.notes)), "manifest": json.dumps(manifest), **fixes.clean})
    checked = {}

    def check(tmp):  # on the written map, before it takes its name
        if held is not None:
            checked.update(_check_attrs(tmp, held, fixes))
            _add_attrs(tmp, checked)

    with dask.config.set(scheduler="synchronous"):  # one block at a time, in this process
        if out.endswith(".nc"):
            write_netcdf(ds, out, fault="map-final", finish=check)
            return infos, checked or None
        tmp = temporary_name(out)
        ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)  # v2: read by every zarr
    check(tmp)
    fault_point("map-final:written")
    if os.path.isdir(out):  # a store being overwritten: moved aside to a temporary name, then removed
        old = temporary_name(out).with_name(temporary_name(out).name + "-old")
        os.rename(out, old)
        shutil.rmtree(old)
    os.rename(tmp, out)
    fault_point("map-final:renamed")
    return infos, checked or None


def _check_attrs(path, held: Fixes, mapped: Fixes | None = None) -> dict:
    """Returns the map's attributes of its check against the withheld drifters (lagda.mapping.check), by distance
    to the `mapped` fixes when given."""
    from lagda.io.tracks import id_text
    from lagda.mapping.check import check_lines, check_map

    with open_map(path) as maps:
        scores = check_map(maps, held, mapped)
    ids = sorted({id_text(held.ids[t]) for t in np.unique(held.traj)})
    drifters = None if mapped is None else len(ids) + len({id_text(mapped.ids[t]) for t in np.unique(mapped.traj)})
    return {"check": "\n".join(check_lines(scores, len(ids), drifters)), "check_withheld_ids": json.dumps(ids),
            **{f"check_{name}": value for name, value in scores.items()}}


def check_notes(check) -> list[str]:
    """Returns the note lines of a map's check against withheld drifters: its "check" (a key of `_check_attrs`, or
    of the map's attributes) holds them joined by newlines."""
    return str(check["check"]).split("\n")


def _add_attrs(path, attrs: dict) -> None:
    """Adds global attributes to a written map (.nc file or .zarr folder, its consolidated metadata too)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        import zarr

        zarr.open_group(path, mode="r+").attrs.update(attrs)
        zarr.consolidate_metadata(path)
        return
    import netCDF4

    with netCDF4.Dataset(path, "a") as nc:
        nc.setncatts(attrs)


def _blend_block(partial, tiles, grid: Grid, lo: int, hi: int, land: np.ndarray | None = None) -> np.ndarray:
    """Returns u, v, u_std, v_std `(4, hi - lo, lat, lon)` float32 of map times lo..hi-1: the pieces' weighted
    mean, and the std of their mixture (NaN where no piece has a value, and on the `land` cells `(lat, lon)`). The
    pieces of one drifter segment (`invert.is_fallback`) make their own blend, taken only where the others have no
    weight."""
    shape = (hi - lo, len(grid.lat), len(grid.lon))
    sums = {False: [np.zeros(shape) for _ in range(5)]}  # w, w u, w v, w E[u^2], w E[v^2]; True: of lone pieces
    for tile in tiles:
        days, rows, cols = grid.window(tile)
        first, last = max(days.start, lo), min(days.stop, hi)
        if first >= last:
            continue
        piece = _load_piece(partial, tile.key)
        if "u" not in piece:
            continue
        mine, block = slice(first - days.start, last - days.start), (slice(first - lo, last - lo), rows, cols)
        lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
        w = tile.time_weight(grid.days[first:last])[:, None, None] * tile.space_weight(lon2, lat2)[None]
        u, v = piece["u"][mine].astype(np.float64), piece["v"][mine].astype(np.float64)
        kind = is_fallback(piece["info"])
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


def local_gp_summary(infos: list[dict]) -> list[str]:
    """Returns the lines on the tiles' local Gaussian processes: how many, their fitted scales (the median, and the
    10-90% range over the tiles when it is one), how many were not fitted or rejected; then, if any, in how many
    tiles the basis field was held at the edge of the drifters' velocities away from them; [] when none ran."""
    fitted = [i["local_gp"] for i in infos if isinstance(i.get("local_gp"), dict)]
    said = [i["local_gp"] for i in infos if isinstance(i.get("local_gp"), str)]
    rejected = sum(s.startswith("rejected") for s in said)
    if not fitted and not said:
        return []
    others = ("; " + ", ".join(words for words in (
        f"{len(said) - rejected} with too few velocities" if len(said) > rejected else "",
        f"{rejected} rejected (a correction over twice the drifters' largest residual)" if rejected else "")
        if words)) if said else ""
    if not fitted:
        return [f"near the drifters: no tile's correction kept{others}"]

    def spread(key, fmt):  # the median over the tiles, and their 10-90% range where it is one
        low, middle, high = (fmt.format(v) for v in np.percentile([f[key] for f in fitted], [10, 50, 90]))
        return middle if low == high else f"{middle} ({low}-{high})"

    spans = [f["span_h"] for f in fitted if "span_h" in f]  # (tiles of a map begun by an earlier lagda lack it)
    over = f"{np.median(spans):.2g}-h " if spans else ""
    dense = [f["nearest_per_day"] for f in fitted if "nearest_per_day" in f]
    over += f"velocities (in {counted(len(dense), 'dense tile')} each day the {dense[0]:,} nearest)" if dense else \
        "velocities"
    beyond = [f["beyond_drifters"] for f in fitted if f.get("beyond_drifters", 0.0) > 0]
    beyond = [f"away from the drifters, in {counted(len(beyond), 'tile')}, on up to {100 * max(beyond):.3g}% of the "
              "cells: the flow departed from their mean more than any of them did: held at their edge, the excess in "
              "the std"] if beyond else []
    tiles = f"{len(fitted)} of {counted(len(fitted) + len(said), 'tile')}" if said else counted(len(fitted), "tile")
    return [f"near the drifters, in {tiles}: what the flow leaves out, fitted to {over}, correlated over "
            f"{spread('ell_km', '{:.0f}')} km and {spread('tau_days', '{:.1f}')} days, std "
            f"{spread('std_m_s', '{:.3f}')} m/s (--no-local-gp){others}", *beyond]


def _cells_of(lon, lat, grid: Grid, settings: MapSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns the cell (row j, column i) of each fix at lon, lat `(fix,)` and whether it lies in the region."""
    res, west, south = settings.resolution, settings.region[0], settings.region[2]
    i = np.floor(((lon - west) % 360.0) / res).astype(np.int64)
    j = np.floor((lat - south) / res).astype(np.int64)
    return j, i, (i >= 0) & (i < len(grid.lon)) & (j >= 0) & (j < len(grid.lat))


def _fix_counts(fixes: Fixes, grid: Grid, settings: MapSettings, lo: int, hi: int) -> np.ndarray:
    """Returns the fixes in each cell within half a cadence of map times lo..hi-1 `(hi - lo, lat, lon)`."""
    k = np.floor((fixes.time - grid.days[0]) / settings.cadence_s + 0.5).astype(np.int64)
    near = (k >= lo) & (k < hi)
    j, i, ok = _cells_of(fixes.lon[near], fixes.lat[near], grid, settings)
    k = k[near] - lo
    counts = np.zeros((hi - lo, len(grid.lat), len(grid.lon)), np.int32)
    np.add.at(counts, (k[ok], j[ok], i[ok]), 1)
    return counts


def fix_distance(fixes: Fixes, grid: Grid, settings: MapSettings, lo: int, hi: int) -> np.ndarray:
    """Returns float32 `(hi - lo, lat, lon)`: the great-circle distance in km from each cell centre to the nearest
    fix within half a map interval of map times lo..hi-1 (NaN where no fix is that near in time)."""
    from scipy.spatial import cKDTree

    from lagda.mapping.covariance import great_circle_km, unit_vectors

    lon2, lat2 = np.meshgrid(grid.lon, grid.lat)
    cells = unit_vectors(lon2.ravel(), lat2.ravel())
    k = np.floor((fixes.time - grid.days[0]) / settings.cadence_s + 0.5).astype(np.int64)
    out = np.full((hi - lo, *lon2.shape), np.nan, np.float32)
    points = unit_vectors(fixes.lon, fixes.lat)
    for d in range(lo, hi):
        near = k == d
        if near.any():
            out[d - lo] = great_circle_km(cKDTree(points[near]).query(cells)[0]).reshape(lon2.shape)
    return out


def _dataset(grid: Grid, settings: MapSettings, fields: dict, counts, infos, sea: np.ndarray, distance=None):
    import xarray as xr

    from lagda import __version__

    times = (grid.days * 1e9).astype("datetime64[ns]")
    names = {"u": ("eastward_sea_water_velocity", "eastward velocity"),
             "v": ("northward_sea_water_velocity", "northward velocity")}
    data = {}
    for c in ("u", "v"):
        standard, long = names[c]
        data[c] = (("time", "lat", "lon"), fields[c].astype(np.float32),
                   {"standard_name": standard, "long_name": f"{long}, posterior mean", "units": "m s-1"})
        data[f"{c}_std"] = (("time", "lat", "lon"), fields[f"{c}_std"].astype(np.float32),
                            {"long_name": f"{long}, total predictive standard deviation" + (
                                " of a drifter's velocity (the mapped field's and the variance uncorrelated at the "
                                "map's scales)" if settings.method == "objective" else
                                " (the field in the tile basis and the velocity it leaves out)"), "units": "m s-1"})
    data["n_fixes"] = (("time", "lat", "lon"), counts,
                       {"long_name": "drifter fixes in the cell within half a map interval", "units": "1"})
    if distance is not None:
        data["distance_to_fix"] = (("time", "lat", "lon"), distance, {
            "long_name": "distance to the nearest drifter fix the map used within half a map interval (NaN: none)",
            "units": "km"})
    data["sea_area_fraction"] = (("lat", "lon"), sea, {
        "standard_name": "sea_area_fraction", "units": "1",
        "long_name": "fraction of the cell that is sea in the GLOBE 1-km land mask (0: land)"})
    ds = xr.Dataset(data, coords={
        "time": ("time", times, {"standard_name": "time", "axis": "T"}),
        "lat": ("lat", grid.lat, {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"}),
        "lon": ("lon", grid.lon, {"standard_name": "longitude", "units": "degrees_east", "axis": "X"})})
    skipped = sum("skipped" in i for i in infos)
    ds.attrs = {"Conventions": "CF-1.11", "title": "lagda map: daily velocity maps from drifters",
                "source": f"lagda {__version__}",
                "history": f"written by lagda map (lagda {__version__}, source digest {code_digest()})",
                "tile_size_deg": settings.tile_deg,
                "halo_deg": settings.halo_deg, "window_days": settings.window_days,
                "window_step_days": settings.step_days, "k_max": settings.k_max, "degree": settings.degree,
                "tiles": len(infos), "tiles_skipped": skipped,
                "tiles_zero_guard": sum(bool(i.get("zero_guard")) for i in infos),
                "tile_velocity_outliers_dropped": sum(i.get("velocity_outliers_dropped", 0) for i in infos),
                "local_gp": "\n".join(local_gp_summary(infos)) or "off",
                "land_mask": (f"{LAND_SOURCE}: cells without sea left NaN" if settings.land_mask
                              else "off: land cells mapped as sea"),
                "tile_records": json.dumps(infos),
                "settings": json.dumps(dataclasses.asdict(settings)),
                "settings_hash": hashlib.sha256(json.dumps(dataclasses.asdict(settings)).encode()).hexdigest()[:16]}
    ds.time.encoding["units"] = "seconds since 1970-01-01T00:00:00Z"
    for name in ("lat", "lon"):  # CF: a coordinate variable has no fill value (xarray gives floats NaN)
        ds[name].encoding["_FillValue"] = None
    return ds
