"""One year of a longer archive: the selection pass of `lagda map` on ten years of the basin-year archive.

The basin-year archive (`python -m experiments.basin.year make`) repeated over ten years (copy k a year later,
its drifters new ids), ordered by the drifters' start dates as clouddrift writes the GDP's ragged files, with the GDP's
per-drifter `start_date` and `end_date` (each drifter's first and last fix), written as netCDF and as a Zarr
store in chunks of 1,000,000 fixes, the store also served over HTTP from this machine, as fast as it can and at
50 MB/s, and as a folder of the GDP's hourly files as NCEI serves them (one per drifter, with its deploy_date,
end_date and drogue_lost_date: `lagda.testing.write_gdp_hourly_files`; and the other variables NCEI's files hold,
as clouddrift's gdp1h adapter lists them, with random values: `add_ncei_variables`). For each, the fixes of the
benchmark's region in the sixth year are selected reading every fix (`every_fix`: the selection before the period
was used to skip what lies outside it) and by `select_fixes` as `lagda map` calls it; the two selections must be
equal. Rows: results/archive_decade.csv (seconds, the times and positions read or the files read, the ratio).

    python -m experiments.basin.archive_decade --archive runs/basin_year/archive.nc --work runs/archive_decade
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import http.server
import pathlib
import threading
import time

import numpy as np
import xarray as xr

from experiments.common.paths import ROOT
from lagda.io.archive import CHUNK_FIXES, Archive
from lagda.io.cf_time import cf_seconds
from lagda.mapping.archive import _in_region, select_fixes
from lagda.testing import write_gdp_hourly_files

CSV = ROOT / "results" / "archive_decade.csv"
YEARS, YEAR_S, ZARR_CHUNK = 10, 365 * 86400.0, 1_000_000
REGION = (-50.0, -10.0, 10.0, 50.0)  # the basin-year benchmark's region
LINK_BYTES_PER_S = 50e6  # the bandwidth of the slow server: a good connection to a cloud bucket


def make_decade(archive: pathlib.Path, work: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path, tuple]:
    """Writes decade.nc, decade.zarr and the folder decade_files (once); returns their paths and the sixth year
    (start, end) seconds."""
    nc, store, folder = work / "decade.nc", work / "decade.zarr", work / "decade_files"
    with xr.open_dataset(archive, decode_times=False) as one:
        one = one[["rowsize", "id", "lon", "lat", "time", "drogue_status"]].load()
    units = one.time.attrs["units"]
    origin = float(np.datetime64(units.split(" since ")[1], "s").astype(np.int64))
    first_year = float(np.nanmin(one.time.values)) + origin
    if not (nc.exists() and store.exists()):
        ends = np.cumsum(one.rowsize.values)
        starts = ends - one.rowsize.values
        span = [slice(a, b) for a, b in zip(starts, ends)]
        copies = [(k, j) for k in range(YEARS) for j in range(len(span))]
        begins = np.array([np.nanmin(one.time.values[span[j]]) + k * YEAR_S for k, j in copies])
        order = [copies[i] for i in np.argsort(begins, kind="stable")]
        pick = np.concatenate([np.arange(span[j].start, span[j].stop) for _, j in order])
        shift = np.concatenate([np.full(span[j].stop - span[j].start, k * YEAR_S) for k, j in order])
        time = one.time.values[pick] + shift
        sizes = np.array([span[j].stop - span[j].start for _, j in order])
        bounds = np.cumsum(sizes)
        since = {"units": units, "calendar": one.time.attrs.get("calendar", "standard")}
        first = np.array([np.nanmin(time[b - n:b]) for b, n in zip(bounds, sizes)])
        final = np.array([np.nanmax(time[b - n:b]) for b, n in zip(bounds, sizes)])
        decade = xr.Dataset(
            {"rowsize": ("traj", sizes), "id": ("traj", np.array([k * 10**6 + int(one.id.values[j])
                                                                    for k, j in order])),
             "start_date": ("traj", first, since), "end_date": ("traj", final, since),
             "lon": ("obs", one.lon.values[pick], one.lon.attrs), "lat": ("obs", one.lat.values[pick], one.lat.attrs),
             "time": ("obs", time, since), "drogue_status": ("obs", one.drogue_status.values[pick])},
            attrs={"title": "ten years of the basin-year archive, ordered by start date"})
        decade.to_netcdf(nc)
        # Zarr format 2 with consolidated metadata, as the GDP's store on AWS
        decade.chunk({"obs": ZARR_CHUNK}).to_zarr(store, mode="w", consolidated=True, zarr_format=2)
    if not (folder / "complete").exists():
        with xr.open_dataset(nc, decode_times=False) as decade:
            ends, status = np.cumsum(decade.rowsize.values), decade.drogue_status.values
            seconds = cf_seconds(decade.time.values, decade.time.attrs["units"], decade.time.attrs.get("calendar"))
        lost = {}  # a drifter's drogue_lost_date: its first undrogued fix
        for i, (a, b) in enumerate(zip(ends - np.diff(ends, prepend=0), ends)):
            off = np.flatnonzero(status[a:b] == 0)
            if len(off):
                lost[i] = float(seconds[a + off[0]])
        rng = np.random.default_rng(0)
        for path in write_gdp_hourly_files(nc, folder, lost):
            add_ncei_variables(path, rng)
        (folder / "complete").write_text("")  # not a track file: the folder's files end in .nc
    sixth = first_year + 5 * YEAR_S
    return nc, store, folder, (sixth, sixth + YEAR_S)


NCEI_PER_FIX = ("ve", "vn", "err_lat", "err_lon", "err_ve", "err_vn", "gap", "sst", "sst1", "sst2", "err_sst",
                "err_sst1", "err_sst2")
NCEI_FLAGS = ("flg_sst", "flg_sst1", "flg_sst2")
NCEI_PER_DRIFTER = ("WMO", "expno", "deploy_lon", "deploy_lat", "start_date", "start_lon", "start_lat", "end_lon",
                    "end_lat", "typedeath", "location_type")
NCEI_TEXT = ("typebuoy", "DeployingShip", "DeploymentStatus", "BuoyTypeManufacturer", "BuoyTypeSensorArray",
             "CurrentProgram", "PurchaserFunding", "DeployingCountry")


def add_ncei_variables(path, rng) -> None:
    """Adds to a file of `write_gdp_hourly_files` the other variables an NCEI hourly file holds (the names of
    clouddrift's gdp1h adapter): float32 per fix, int8 flags per fix, numbers and text per drifter; random values,
    start_date the deploy_date."""
    import netCDF4

    with netCDF4.Dataset(path, "a") as nc:
        shape = nc["longitude"].shape
        for name in NCEI_PER_FIX:
            nc.createVariable(name, "f4", ("traj", "obs"))[:] = rng.normal(size=shape).astype(np.float32)
        for name in NCEI_FLAGS:
            nc.createVariable(name, "i1", ("traj", "obs"))[:] = rng.integers(0, 6, shape).astype(np.int8)
        for name in NCEI_PER_DRIFTER:
            nc.createVariable(name, "f8", ("traj",))[:] = nc["deploy_date"][:] if name == "start_date" else 1.0
        nc["start_date"].units = nc["deploy_date"].units
        for name in NCEI_TEXT:
            nc.createVariable(name, str, ("traj",))[0] = "SVP"


def every_fix(path, region, period):
    """Returns the fixes in region and period, every fix of the archive read (the selection without skipping):
    their ids, times and positions; and the number of fixes read."""
    source, parts = Archive(path), []
    for piece, numbers, sl, lon, lat, seconds in source.chunks(CHUNK_FIXES, "", False):
        keep = _in_region(lon, lat, region) & (seconds >= period[0]) & (seconds <= period[1])
        parts.append(piece.fixes(sl, lon, lat, seconds, keep, numbers))
    fixes = {name: np.concatenate([getattr(p, name) for p in parts]) for name in ("traj", "time", "lon", "lat")}
    order = np.lexsort((fixes["time"], fixes.pop("traj")))  # the files' fixes are sorted when selected
    return {"id": source.ids()[np.concatenate([p.traj for p in parts])][order],
            **{name: values[order] for name, values in fixes.items()}}, source.n_total


@contextlib.contextmanager
def served(folder: pathlib.Path, bytes_per_s: float | None = None):
    """Yields the http://127.0.0.1:PORT address of `folder` served by a local HTTP server, at most `bytes_per_s` in
    all requests together when given (a network link's bandwidth)."""
    link = threading.Lock()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def copyfile(self, source, outputfile):
            while block := source.read(1 << 18):
                with link:  # one block at a time over the link
                    outputfile.write(block)
                    if bytes_per_s:
                        time.sleep(len(block) / bytes_per_s)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=pathlib.Path, default=ROOT / "runs" / "basin_year" / "archive.nc")
    parser.add_argument("--work", type=pathlib.Path, default=ROOT / "runs" / "archive_decade")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    nc, store, folder, year = make_decade(args.archive, args.work)
    rows = []
    with served(args.work) as address, served(args.work, LINK_BYTES_PER_S) as link:
        for kind, path in (("netCDF", str(nc)), ("Zarr", str(store)), ("Zarr over HTTP", f"{address}/decade.zarr"),
                           (f"Zarr over HTTP at {LINK_BYTES_PER_S / 1e6:g} MB/s", f"{link}/decade.zarr"),
                           ("a netCDF file per drifter", str(folder))):
            start = time.perf_counter()
            reference, total = every_fix(path, REGION, year)
            every_s = time.perf_counter() - start
            start = time.perf_counter()
            fixes = select_fixes(path, REGION, year)
            select_s = time.perf_counter() - start
            order = np.lexsort((fixes.time, fixes.traj))
            for name, values in reference.items():
                got = fixes.ids[fixes.traj] if name == "id" else getattr(fixes, name)
                np.testing.assert_array_equal(got[order], values)
            number = lambda note, after: int(note.split(after)[1].split(" ")[0])
            note = next(n for n in fixes.notes if n.startswith("read the times of") or " files: the other " in n)
            row = {"archive": kind, "fixes": total, "selected": len(fixes),
                   "every_fix_s": round(every_s, 2), "select_fixes_s": round(select_s, 2),
                   "speedup": round(every_s / select_s, 1)}
            if " files: " in note:
                row.update(files=number(note, " of the "), files_read=number(note, "read "))
            else:
                row.update(times_read=number(note, "times of "), positions_read=number(note, "positions of "))
            rows.append(row)
            print(rows[-1], flush=True)
    CSV.parent.mkdir(exist_ok=True)
    with open(CSV, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["archive", "fixes", "files", "selected", "every_fix_s", "select_fixes_s",
                                         "speedup", "times_read", "positions_read", "files_read"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {CSV}")


if __name__ == "__main__":
    main()
