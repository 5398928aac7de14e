"""One year of a longer archive: the selection pass of `lagda map` on ten years of the basin-year archive.

The basin-year archive (`python -m experiments.basin_year make`) repeated over ten years (copy k a year later,
its drifters new ids), ordered by the drifters' start dates as clouddrift writes the GDP's ragged files, with the GDP's
per-drifter `start_date` and `end_date` (each drifter's first and last fix), written as netCDF and as a Zarr
store in chunks of 1,000,000 fixes, the store also served over HTTP from this machine, as fast as it can and at
50 MB/s. For each, the fixes of the benchmark's region in the sixth year are selected reading every fix
(`every_fix`: the selection before the period was used to skip what lies outside it) and by `select_fixes` as
`lagda map` calls it; the two selections must be equal. Rows: results/archive_decade.csv (seconds, the times and
positions read, the ratio).

    python -m experiments.archive_decade --archive runs/basin_year/archive.nc --work runs/archive_decade
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

from lagda.mapping.archive import CHUNK_FIXES, _Archive, _in_region, select_fixes

ROOT = pathlib.Path(__file__).resolve().parents[1]
CSV = ROOT / "results" / "archive_decade.csv"
YEARS, YEAR_S, ZARR_CHUNK = 10, 365 * 86400.0, 1_000_000
REGION = (-50.0, -10.0, 10.0, 50.0)  # the basin-year benchmark's region
LINK_BYTES_PER_S = 50e6  # the bandwidth of the slow server: a good connection to a cloud bucket


def make_decade(archive: pathlib.Path, work: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, tuple]:
    """Writes decade.nc and decade.zarr (once); returns their paths and the sixth year (start, end) seconds."""
    nc, store = work / "decade.nc", work / "decade.zarr"
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
    sixth = first_year + 5 * YEAR_S
    return nc, store, (sixth, sixth + YEAR_S)


def every_fix(path, region, period):
    """The fixes in region and period, every fix of the archive read (the selection without skipping)."""
    source, parts = _Archive(path), []
    for piece, numbers, sl, lon, lat, seconds in source.chunks(CHUNK_FIXES, "", False):
        keep = _in_region(lon, lat, region) & (seconds >= period[0]) & (seconds <= period[1])
        parts.append(piece.fixes(sl, lon, lat, seconds, keep, numbers))
    return {name: np.concatenate([getattr(p, name) for p in parts]) for name in ("traj", "time", "lon", "lat")}


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
    nc, store, year = make_decade(args.archive, args.work)
    rows = []
    with served(args.work) as address, served(args.work, LINK_BYTES_PER_S) as link:
        for kind, path in (("netCDF", str(nc)), ("Zarr", str(store)), ("Zarr over HTTP", f"{address}/decade.zarr"),
                           (f"Zarr over HTTP at {LINK_BYTES_PER_S / 1e6:g} MB/s", f"{link}/decade.zarr")):
            start = time.perf_counter()
            reference = every_fix(path, REGION, year)
            every_s = time.perf_counter() - start
            start = time.perf_counter()
            fixes = select_fixes(path, REGION, year)
            select_s = time.perf_counter() - start
            for name, values in reference.items():
                np.testing.assert_array_equal(getattr(fixes, name), values)
            note = next(n for n in fixes.notes if n.startswith("read the times of"))
            times_read = int(note.split("times of ")[1].split(" ")[0])
            positions_read = int(note.split("positions of ")[1].split(" ")[0])
            total = int(note.split(" of the ")[1].split(" ")[0])
            rows.append({"archive": kind, "fixes": total, "selected": len(fixes), "every_fix_s": round(every_s, 2),
                         "select_fixes_s": round(select_s, 2), "speedup": round(every_s / select_s, 1),
                         "times_read": times_read, "positions_read": positions_read})
            print(rows[-1], flush=True)
    CSV.parent.mkdir(exist_ok=True)
    with open(CSV, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {CSV}")


if __name__ == "__main__":
    main()
