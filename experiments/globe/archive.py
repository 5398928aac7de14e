"""A global synthetic GDP-hourly archive with a known truth: drifters over the world ocean in `flow.GlobalFlow`.

    python -m experiments.globe.archive make --work runs/global_tiny                 # 30 at sea, 10 days
    python -m experiments.globe.archive make --work runs/global_month --drifters 1300 --days 30
    python -m experiments.globe.archive make --work runs/global_year --full          # 1,300 at sea, 365 days

**Releases.** Drifters are released at whole hours uniformly over [-max life, `days`) days with lives uniform in
`life_days`: before the period at the rate r that keeps `drifters` at sea (r x mean life = `drifters`), so the
period starts with about that many, and during it at `strand_compensation` x r, as strandings cut lives short
(with r alone, the full year fell from 1,301 drifters at sea on its first day to about 1,060 after 150 days;
with 1.22 r it keeps 1,190-1,290, 1,265 on average);
those whose life misses the period are dropped, and those released before it start at its first hour. Each
starts at a random ocean point (a 0.1-degree cell with sea fraction 0.5 or more): uniform on the sphere, or for a
fraction `polar` at 65-80 degrees of latitude (the Arctic and the Southern Ocean, so some reach 70-80 degrees),
for a fraction `dateline` within 3 degrees of the 180th meridian (so short archives have dateline crossings), for
a fraction `coastal` where the flow's land taper is between 0.05 and 0.5 (within a degree or two of a coast, so
some strand).

**Advection.** Classic RK4 with a one-hour step on the sphere, vectorised over the drifters at sea: d lon / dt =
u / (R cos lat), d lat / dt = v / R (degrees per second, velocities of `flow.GlobalFlow`); longitudes are kept
unwrapped while integrating and written wrapped to [-180, 180) (a dateline crossing is a continuous track),
latitudes are kept within +-89 degrees. A fraction `undrogued` of drifters lose their drogue at a uniform
fraction in [0.3, 0.9] of their life; from then their `drogue_status` is 0 and they move with the water plus a
windage slip of `slip_speed` m/s (not tapered at the coast) whose direction swings as
experiments.common.gdp_problems.slip_angle. A drifter whose position falls on land (`GlobalFlow.is_land`) strands:
its remaining fixes stay where it landed and it ends `strand_days` (uniform) later, as GDP drifters aground do.

**The GDP's problems** (experiments.common.gdp_problems.corrupt: noise, gaps, missing fixes, spikes, duplicated
times) are drawn in metres east and north of each clean fix and moved along the great circle (`_displaced`), so
they hold near the poles and across the dateline.

**Files** in `--work`: `archive.zarr` (a ragged Zarr store laid out as clouddrift's GDP-hourly: dims `traj`, `obs`,
`rowsize`, `id`, `lon`, `lat`, `time`, `err_lon`, `err_lat`, `drogue_status`, ...; chunked by `chunk_obs`
observations), the same as `archive.nc`, `config.json` (the settings, from which `truth(work)` rebuilds the flow)
and `archive_stats.json` (the counts and timings printed). The truth is the water's velocity: `truth(work)(lon,
lat, t)` at any points and time, and `truth_on(truth, lon, lat, days)` on a daily grid for scoring.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

from experiments.common.gdp_problems import GdpProblems, corrupt, gdp_dataset, slip_angle
from experiments.globe.flow import EARTH_RADIUS_M, FlowConfig, GlobalFlow

ID_BASE = 300534070000000  # GDP-like 15-digit ids: ID_BASE + drifter
HOUR = 3600.0
TITLE = "Global Drifter Program hourly-like drifting buoy data (synthetic global archive)"
SUMMARY = ("hourly positions of drifters in an analytic global flow (jets, gyres, drifting eddies, tapered at the "
           "land), with position noise, gaps, spikes, duplicated times, undrogued segments and strandings")


@dataclasses.dataclass(frozen=True)
class GlobalArchiveConfig(GdpProblems):
    """The archive's drifters, releases and GDP-like problems (module docstring); defaults: the tiny test size."""

    drifters: int = 30  # drifters at sea at a time, on average
    days: int = 10  # the archive's period, days from `start`
    start: str = "2015-01-01"  # the period's first day (UTC)
    life_days: tuple[float, float] = (30.0, 700.0)  # lives uniform in this range, days
    polar: float = 0.05  # fraction released at 65-80 degrees of latitude
    dateline: float = 0.02  # fraction released within 3 degrees of the 180th meridian
    coastal: float = 0.05  # fraction released where the land taper is 0.05-0.5
    strand_days: tuple[float, float] = (2.0, 20.0)  # a stranded drifter's fixes go on this long, days
    strand_compensation: float = 1.22  # releases in the period, over the rate that ignores strandings
    min_fixes: int = 24  # drifters with fewer hourly positions in the period are dropped
    chunk_obs: int = 1_000_000  # the Zarr store's chunk along obs
    seed: int = 1  # releases, lives and problems (the flow's eddies: seed + 1)

    def validate(self) -> "GlobalArchiveConfig":
        """Returns self, or raises ValueError naming the bad setting."""
        if self.drifters < 1 or self.days < 1 or self.chunk_obs < 1:
            raise ValueError(f"drifters, days and chunk_obs must be >= 1, got {self.drifters}, {self.days}, "
                             f"{self.chunk_obs}")
        if not 0 < self.life_days[0] <= self.life_days[1]:
            raise ValueError(f"life_days must be a range 0 < low <= high, got {self.life_days}")
        if not (0 <= self.polar and 0 <= self.dateline and 0 <= self.coastal
                and self.polar + self.dateline + self.coastal <= 1):
            raise ValueError("polar, dateline and coastal must be fractions adding up to at most 1, got "
                             f"{self.polar}, {self.dateline}, {self.coastal}")
        return self

    def flow(self) -> FlowConfig:
        """Returns the flow's settings for this archive's period."""
        return FlowConfig(days=float(self.days) + 1.0, seed=self.seed + 1)


def full() -> GlobalArchiveConfig:
    """Returns the full size: 1,300 drifters at sea over 365 days (about 11 million hourly fixes)."""
    return GlobalArchiveConfig(drifters=1300, days=365)


def _ocean_points(flow: GlobalFlow, kind: str, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Returns (lon, lat) `(n,)` degrees: random ocean points of a kind (`open`, `polar`, `dateline`, `coastal`)."""
    lon, lat = np.empty(0), np.empty(0)
    while lon.size < n:
        m = 4 * (n - lon.size) + 64
        if kind == "polar":
            lo, la = rng.uniform(-180, 180, m), rng.choice([-1.0, 1.0], m) * rng.uniform(65, 80, m)
        elif kind == "dateline":
            lo = (rng.uniform(177, 183, m) + 180.0) % 360.0 - 180.0
            la = np.rad2deg(np.arcsin(rng.uniform(-np.sin(np.deg2rad(60)), np.sin(np.deg2rad(60)), m)))
        else:
            lo, la = rng.uniform(-180, 180, m), np.rad2deg(np.arcsin(rng.uniform(-1, 1, m)))
        ok = ~flow.is_land(lo, la)
        if kind == "coastal":
            taper = flow.taper(lo, la)[0]
            ok &= (taper > 0.05) & (taper < 0.5)
        lon, lat = np.concatenate([lon, lo[ok]]), np.concatenate([lat, la[ok]])
    return lon[:n], lat[:n]


def releases(cfg: GlobalArchiveConfig, flow: GlobalFlow, rng) -> dict:
    """Returns the drifters (module docstring), each `(drifter,)`: `first` and `end` hours of the period (fixes
    at hours first..end - 1), release `lon`, `lat` (degrees), `loss` (the drogue's loss, hours, may be before
    `first`; a large number when kept), slip `theta0`, `phase` (rad), `stay` (hours aground once stranded)."""
    hours = cfg.days * 24
    low, high = cfg.life_days
    rate = cfg.drifters / ((low + high) / 2)  # releases a day that keep `drifters` at sea without strandings
    release = np.concatenate([rng.integers(-int(high * 24), 0, int(round(rate * high))),
                              rng.integers(0, hours, int(round(rate * cfg.days * cfg.strand_compensation)))])
    life = np.round(rng.uniform(low, high, release.size) * 24).astype(np.int64)
    keep = (release + life > 0) & (release < hours)
    release, life = release[keep], life[keep]
    first, end = np.maximum(release, 0), np.minimum(release + life, hours)
    keep = end - first >= cfg.min_fixes
    release, life, first, end = release[keep], life[keep], first[keep], end[keep]
    m = release.size
    kind = rng.choice(4, m, p=[1 - cfg.polar - cfg.dateline - cfg.coastal, cfg.polar, cfg.dateline, cfg.coastal])
    lon, lat = np.empty(m), np.empty(m)
    for k, name in enumerate(("open", "polar", "dateline", "coastal")):
        lon[kind == k], lat[kind == k] = _ocean_points(flow, name, int((kind == k).sum()), rng)
    undrogued = rng.random(m) < cfg.undrogued
    loss = np.where(undrogued, release + np.round(rng.uniform(0.3, 0.9, m) * life).astype(np.int64), 2 ** 40)
    return dict(first=first, end=end, lon=lon, lat=lat, loss=loss, theta0=rng.uniform(0, 2 * np.pi, m),
                phase=rng.uniform(0, 2 * np.pi, m), stay=np.round(rng.uniform(*cfg.strand_days, m) * 24).astype(
                    np.int64))


def _rates(flow: GlobalFlow, lon, lat, t: float, d: dict, which: np.ndarray, slip_speed: float):
    """Returns (dlon/dt, dlat/dt) degrees/s `(n,)` of drifters `which` at (lon, lat) and t s: the water's velocity,
    plus the windage slip of those whose drogue is lost."""
    lat = np.clip(lat, -89.9, 89.9)
    u, v = flow.velocity(lon, lat, t)
    since = t - d["loss"][which] * HOUR
    lost = since >= 0
    if lost.any():
        angle = slip_angle(since[lost], d["theta0"][which][lost], d["phase"][which][lost])
        u[lost] += slip_speed * np.cos(angle)
        v[lost] += slip_speed * np.sin(angle)
    per_m = np.rad2deg(1.0 / EARTH_RADIUS_M)
    return u * per_m / np.cos(np.deg2rad(lat)), v * per_m


def advect(cfg: GlobalArchiveConfig, flow: GlobalFlow, d: dict, log=print) -> tuple[np.ndarray, ...]:
    """Returns (lon, lat, offsets, strand_hour): the clean hourly tracks, flat `(fix,)` degrees (lon wrapped to
    [-180, 180)), drifter i's at offsets[i]:offsets[i + 1] for hours first..end - 1 (`d["end"]` is cut short for a
    stranded drifter, in place), and the hour each stranded (-1 when never). Prints progress every 30 days."""
    n_fix = d["end"] - d["first"]
    offsets = np.concatenate([[0], np.cumsum(n_fix)])
    out_lon, out_lat = np.empty(offsets[-1]), np.empty(offsets[-1])
    lon, lat, end = d["lon"].copy(), d["lat"].copy(), d["end"]
    strand = np.full(lon.size, -1, np.int64)
    clock = time.perf_counter()
    for h in range(cfg.days * 24):
        if h and h % (30 * 24) == 0:
            log(f"  day {h // 24}: {time.perf_counter() - clock:.0f} s")
        live = np.flatnonzero((d["first"] <= h) & (h < end))
        where = offsets[live] + h - d["first"][live]
        out_lon[where], out_lat[where] = lon[live], lat[live]
        move = live[(h + 1 < end[live]) & (strand[live] < 0)]
        if move.size == 0:
            continue
        t, x, y = h * HOUR, lon[move], lat[move]
        k1 = _rates(flow, x, y, t, d, move, cfg.slip_speed)
        k2 = _rates(flow, x + HOUR / 2 * k1[0], y + HOUR / 2 * k1[1], t + HOUR / 2, d, move, cfg.slip_speed)
        k3 = _rates(flow, x + HOUR / 2 * k2[0], y + HOUR / 2 * k2[1], t + HOUR / 2, d, move, cfg.slip_speed)
        k4 = _rates(flow, x + HOUR * k3[0], y + HOUR * k3[1], t + HOUR, d, move, cfg.slip_speed)
        lon[move] = x + HOUR / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        lat[move] = np.clip(y + HOUR / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]), -89.0, 89.0)
        aground = move[flow.is_land(lon[move], lat[move])]
        strand[aground] = h + 1
        end[aground] = np.minimum(end[aground], h + 1 + d["stay"][aground])
    return (out_lon + 180.0) % 360.0 - 180.0, out_lat, offsets, strand


def _displaced(lon, lat, east, north) -> tuple[np.ndarray, np.ndarray]:
    """Returns (lon, lat) degrees `(n,)`: the points moved `east`, `north` metres along the great circle of that
    bearing (lon wrapped to [-180, 180))."""
    phi, lam = np.deg2rad(lat), np.deg2rad(lon)
    delta, bearing = np.hypot(east, north) / EARTH_RADIUS_M, np.arctan2(east, north)
    phi2 = np.arcsin(np.clip(np.sin(phi) * np.cos(delta) + np.cos(phi) * np.sin(delta) * np.cos(bearing), -1, 1))
    lam2 = lam + np.arctan2(np.sin(bearing) * np.sin(delta) * np.cos(phi), np.cos(delta) - np.sin(phi) * np.sin(phi2))
    return (np.rad2deg(lam2) + 180.0) % 360.0 - 180.0, np.rad2deg(phi2)


def make_archive(cfg: GlobalArchiveConfig, log=print) -> tuple[dict, dict]:
    """Returns (rows, stats): the archive's rows (per fix `time`, `lon`, `lat`, `err_lon`, `err_lat`,
    `drogue_status`; per trajectory `id`, `rowsize`, as experiments.common.gdp_problems.gdp_dataset takes them) and
    the counts and timings (module docstring).

    Raises
    ------
    ValueError
        for a bad setting.
    """
    cfg = cfg.validate()
    clock = time.perf_counter()
    flow = GlobalFlow(cfg.flow())
    rng = np.random.default_rng(cfg.seed)
    d = releases(cfg, flow, rng)
    seconds = {"flow_and_releases": time.perf_counter() - clock}
    log(f"advecting {d['first'].size} drifters for {cfg.days} days (~{cfg.drifters} at sea)")
    clock = time.perf_counter()
    lon, lat, offsets, strand = advect(cfg, flow, d, log)
    seconds["advection"] = time.perf_counter() - clock
    clock = time.perf_counter()
    start = np.datetime64(cfg.start, "ms")
    fixes = {k: [] for k in ("time", "lon", "lat", "err_lon", "err_lat", "drogue_status")}
    ids, rowsize = [], []
    stats = dict(drifters=0, spikes=0, exact_duplicates=0, conflicting_duplicates=0, undrogued_drifters=0,
                 undrogued_fixes=0, stranded=0, dateline_crossers=0, above_70n=0, below_70s=0)
    metre_lat = np.rad2deg(1.0 / EARTH_RADIUS_M)
    for i in range(d["first"].size):
        a = offsets[i]
        track_lon, track_lat = lon[a:a + d["end"][i] - d["first"][i]], lat[a:a + d["end"][i] - d["first"][i]]
        hours = d["first"][i] + np.arange(track_lon.size)
        rows, s, fix, counts = corrupt(np.zeros((track_lon.size, 2)), cfg, HOUR, rng)
        for name, count in counts.items():
            stats[name] += count
        fix_lon, fix_lat = _displaced(track_lon[fix], track_lat[fix], rows[:, 0], rows[:, 1])
        drogue = (hours[fix] < d["loss"][i]).astype(np.int8)
        fixes["time"].append(start + (hours[fix] * HOUR * 1e3).astype("timedelta64[ms]"))
        fixes["lon"].append(fix_lon)
        fixes["lat"].append(fix_lat)
        fixes["err_lat"].append(s * metre_lat)
        fixes["err_lon"].append(s * metre_lat / np.cos(np.deg2rad(fix_lat)))
        fixes["drogue_status"].append(drogue)
        ids.append(ID_BASE + i)
        rowsize.append(fix.size)
        stats["drifters"] += 1
        stats["undrogued_drifters"] += int((drogue == 0).any())
        stats["undrogued_fixes"] += int((drogue == 0).sum())
        stats["stranded"] += int(strand[i] >= 0)
        stats["dateline_crossers"] += int(np.any(np.abs(np.diff(track_lon)) > 180.0))
        stats["above_70n"] += int(track_lat.max() > 70.0)
        stats["below_70s"] += int(track_lat.min() < -70.0)
    rows = {k: np.concatenate(v) for k, v in fixes.items()}
    rows["id"], rows["rowsize"] = np.asarray(ids, np.int64), np.asarray(rowsize, np.int64)
    stats["fixes"] = int(rows["rowsize"].sum())
    stats["clean_positions"] = int((d["end"] - d["first"]).sum())  # stranded drifters cut short
    stats["at_sea_mean"] = round(stats["clean_positions"] / (cfg.days * 24), 1)
    seconds["problems"] = time.perf_counter() - clock
    stats["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    stats["stranded_ids"] = [int(ID_BASE + i) for i in np.flatnonzero(strand >= 0)]
    stats["strand_hours"] = [int(strand[i]) for i in np.flatnonzero(strand >= 0)]
    return rows, stats


def write(rows: dict, cfg: GlobalArchiveConfig, work: str) -> dict:
    """Writes `archive.zarr` (chunked by `cfg.chunk_obs` along obs), `archive.nc` and `config.json` in `work`;
    returns the seconds each took."""
    import shutil

    os.makedirs(work, exist_ok=True)
    ds = gdp_dataset(rows, TITLE, SUMMARY)
    seconds = {}
    clock = time.perf_counter()
    zarr_path = os.path.join(work, "archive.zarr")
    shutil.rmtree(zarr_path, ignore_errors=True)
    encoding = {name: {"chunks": (min(cfg.chunk_obs, ds.sizes["obs"]),)} for name, var in ds.variables.items()
                if var.dims == ("obs",)}
    for name in ("time",):
        encoding[name].update(ds[name].encoding)
    ds.to_zarr(zarr_path, mode="w", encoding=encoding, consolidated=True, zarr_format=2)  # as the GDP's store
    seconds["zarr"] = time.perf_counter() - clock
    clock = time.perf_counter()
    ds.to_netcdf(os.path.join(work, "archive.nc"))
    seconds["netcdf"] = time.perf_counter() - clock
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump({"archive": dataclasses.asdict(cfg), "flow": dataclasses.asdict(cfg.flow())}, f, indent=1)
    return seconds


def truth(work: str):
    """Returns the archive's truth: a function (lon, lat, t) -> (u, v) m/s `(n,)` of the water at points `(n,)`
    degrees and time t (numpy datetime64, or seconds since 1970-01-01T00:00:00Z as lagda's fixes have them),
    rebuilt from `work`/config.json.

    Raises
    ------
    FileNotFoundError
        `work` holds no config.json (run `make` first).
    """
    with open(os.path.join(work, "config.json")) as f:
        saved = json.load(f)
    flow = GlobalFlow(FlowConfig(**{k: tuple(map(tuple, v)) if k in ("jets", "gyres") else
                                    tuple(v) if isinstance(v, list) else v for k, v in saved["flow"].items()}))
    start = np.datetime64(saved["archive"]["start"], "s").astype(np.int64)

    def velocity(lon, lat, t):
        seconds = np.datetime64(t, "ms").astype(np.int64) / 1e3 if isinstance(t, np.datetime64) else float(t)
        return flow.velocity(lon, lat, seconds - start)

    velocity.flow = flow
    return velocity


def truth_on(velocity, lon, lat, days) -> tuple[np.ndarray, np.ndarray]:
    """Returns (u, v) m/s `(day, lat, lon)` of a `truth` at the grid's cell centres (degrees `(lon,)`, `(lat,)`)
    at each of `days` (datetime64 `(day,)`), NaN on land cells (`GlobalFlow.is_land` at the centre)."""
    grid_lon, grid_lat = np.meshgrid(np.asarray(lon, float), np.asarray(lat, float))
    land = velocity.flow.is_land(grid_lon.ravel(), grid_lat.ravel()).reshape(grid_lon.shape)
    u, v = np.empty((len(days),) + grid_lon.shape), np.empty((len(days),) + grid_lon.shape)
    for k, day in enumerate(days):
        a, b = velocity(grid_lon.ravel(), grid_lat.ravel(), np.datetime64(day))
        u[k], v[k] = np.where(land, np.nan, a.reshape(land.shape)), np.where(land, np.nan, b.reshape(land.shape))
    return u, v


def _main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.globe.archive", description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["make"])
    parser.add_argument("--work", required=True, help="the folder written")
    parser.add_argument("--full", action="store_true", help="1,300 drifters at sea for 365 days")
    parser.add_argument("--drifters", type=int, help="drifters at sea at a time (default 30; --full 1300)")
    parser.add_argument("--days", type=int, help="days (default 10; --full 365)")
    parser.add_argument("--seed", type=int, help="seed of the releases and problems (default 1)")
    args = parser.parse_args(argv)
    cfg = full() if args.full else GlobalArchiveConfig()
    cfg = dataclasses.replace(cfg, **{k: v for k, v in (("drifters", args.drifters), ("days", args.days),
                                                        ("seed", args.seed)) if v is not None})
    try:
        cfg.validate()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    clock = time.perf_counter()
    rows, stats = make_archive(cfg)
    stats["seconds"].update({k: round(v, 1) for k, v in write(rows, cfg, args.work).items()})
    stats["seconds"]["total"] = round(time.perf_counter() - clock, 1)
    with open(os.path.join(args.work, "archive_stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    print(f"wrote {args.work}/archive.zarr and archive.nc: {stats['drifters']} drifters, {stats['fixes']} fixes "
          f"({stats['clean_positions']} hourly positions, {stats['at_sea_mean']} drifters at sea on average), "
          f"{stats['dateline_crossers']} cross the dateline, "
          f"{stats['above_70n']} reach above 70 N, {stats['below_70s']} below 70 S, {stats['stranded']} strand, "
          f"{stats['undrogued_drifters']} undrogued, {stats['spikes']} spikes, "
          f"{stats['exact_duplicates'] + stats['conflicting_duplicates']} duplicated times")
    print("seconds: " + ", ".join(f"{k} {v}" for k, v in stats["seconds"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
