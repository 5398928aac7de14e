"""A map checked against drifters it was not made from: `lagda map --withhold`.

A user has no truth to score a map against, but has drifters: some of them are left out of the map
(`withheld`, chosen by their ids so that every run and resume leaves out the same), and the map is then compared
with their daily velocities (`check_map`): each withheld drifter segment's displacement over 24 hours, at its
midpoint, against the map there (linear in time between map times, bilinear in space). The scores say what the
map is worth where it had no drifter of its own, and whether its std says so: the error relative to the drifters'
RMS speed, the fraction of velocity components inside the map's 95% band (mean +- 1.96 std), and the RMS of the
error over the std (1 when the std is right). The withheld drifters' positions are low-passed as the mapped
ones' are (lagda.io.lowpass, unless the map is made without): no inertial or tidal motion, which the map does not
hold, counts as error.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from lagda.assimilation.scores import Z
from lagda.io.fixes import Fixes
from lagda.mapping.tiles import DAY_S
from lagda.report import counted

CHECK_CHUNK_S = DAY_S  # the withheld drifters' velocities: displacements over this long


CONTINUE_S = 3 * DAY_S  # a track that starts within this long after another ends, ...
CONTINUE_KM = 25.0  # ... within this distance of its last fix plus CONTINUE_M_S times the gap, may continue it
CONTINUE_M_S = 0.5  # (one drifter under a new id: GDP segment files, looper sets): withheld with it


def drifter_groups(fixes: Fixes) -> np.ndarray:
    """Returns int64 `(trajectory,)`: a group number for each of `fixes.ids`, shared by the tracks that may be one
    drifter under several ids: a track whose first fix comes at most CONTINUE_S after another's last, within
    CONTINUE_KM + CONTINUE_M_S x the gap of it, joins its group (and so on along the chain). Ids without fixes
    have groups of their own. A check that withholds a group withholds the drifter whole: a held-out piece whose
    continuation stayed in the map is scored against its own track.

    Examples
    --------
    >>> day = 86400.0  # track b starts 1 day and 10 km after a ends; c is far away
    >>> f = Fixes(traj=np.array([0, 0, 1, 1, 2, 2]), time=np.array([0, 1, 2, 3, 0, 1]) * day,
    ...           lon=np.array([0.0, 0.1, 0.19, 0.3, 20.0, 20.1]), lat=np.zeros(6), ids=np.array(["a", "b", "c"]))
    >>> drifter_groups(f).tolist()
    [0, 0, 2]
    """
    from lagda.assimilation.gaussian_process import EARTH_RADIUS_KM

    n = len(fixes.ids)
    parent = np.arange(n)

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    present = np.unique(fixes.traj)
    if not len(present):
        return parent
    order = np.lexsort((fixes.time, fixes.traj))
    t, lon, lat = fixes.time[order], fixes.lon[order], fixes.lat[order]
    first = np.searchsorted(fixes.traj[order], present, side="left")
    last = np.searchsorted(fixes.traj[order], present, side="right") - 1
    for a, end in zip(present, last):
        gap = t[first] - t[end]
        dlon = np.deg2rad((lon[first] - lon[end] + 180.0) % 360.0 - 180.0) * np.cos(np.deg2rad(lat[end]))
        km = EARTH_RADIUS_KM * np.hypot(dlon, np.deg2rad(lat[first] - lat[end]))
        follows = (gap >= 0) & (gap <= CONTINUE_S) & (km <= CONTINUE_KM + CONTINUE_M_S * gap / 1000.0) & (present != a)
        for b in present[follows]:
            parent[root(b)] = root(a)
    return np.array([root(i) for i in range(n)], np.int64)


def withheld(fixes: Fixes, fraction: float) -> np.ndarray:
    """Returns bool `(fix,)`: the fixes of the drifters left out of the map to check it: whole `drifter_groups`
    (a drifter under several ids together), round(fraction x the groups) of them (at least one when `fraction` >
    0), those whose first ids' SHA-256 digests are smallest (the same drifters whatever the order or the process,
    and a group's choice does not depend on its fixes).

    Examples
    --------
    >>> f = Fixes(traj=np.array([0, 0, 1, 1, 2]), time=np.arange(5.0), lon=np.array([0.0, 0, 9, 9, 50]),
    ...           lat=np.zeros(5), ids=np.array(["a", "b", "c"]))
    >>> withheld(f, 0.3).tolist()
    [False, False, False, False, True]
    """
    present = np.unique(fixes.traj)
    if fraction == 0.0 or not len(present):
        return np.zeros(len(fixes), bool)
    from lagda.io.tracks import id_text

    group = drifter_groups(fixes)
    groups = np.unique(group[present])
    digests = [min(hashlib.sha256(id_text(fixes.ids[t]).encode()).hexdigest() for t in present[group[present] == g])
               for g in groups]
    count = max(1, int(round(fraction * len(groups))))
    chosen = groups[np.argsort(digests, kind="stable")[:count]]
    return np.isin(group[fixes.traj], chosen)


DISTANCE_BANDS_KM = (30.0, 100.0)  # the check's bands of distance to the nearest fix the map used
BAND_NAMES = ("near", "middle", "far")  # within 30 km, 30-100 km, beyond 100 km
BINNED_DEG, BINNED_DAYS = 1.0, 5.0  # the binned mean beside the map: the mapped drifters' daily velocities in the
# same 1-degree cell within 5 days


def check_map(maps, fixes: Fixes, mapped: Fixes | None = None) -> dict:
    """Returns the map's scores against the fixes' daily velocities (drifters it was not made from).

    Parameters
    ----------
    maps
        a `lagda map` dataset (xarray; time, lat, lon regular, lon increasing, possibly past 180) with
        u, v, u_std, v_std in m/s; read one map time at a time.
    fixes
        the drifters to check against (cleaned as the map's were).
    mapped
        the fixes the map was made from, or None: then no scores by distance.

    Returns
    -------
    dict
        `band_scores` of the map at the velocities where it has a value, and "drifters": how many drifters have
        one there, "outside": velocities outside the map's region and period, "no_value": velocities where the
        map is NaN (land, no tile); with `mapped`, for each of BAND_NAMES (the distance from the velocity's
        midpoint to the nearest mapped fix within 12 hours: within 30 km, 30-100 km, beyond 100 km)
        "{band}_share", "{band}_error", "{band}_coverage_95" and "{band}_binned_error" (the error of the binned
        mean of the mapped drifters' daily velocities, BINNED_DEG cells over +-BINNED_DAYS, zero where none, on the
        same velocities; a map of zero errs 1 by the definition of the error).
    """
    west = float(maps["lon"].values[0]) - 180.0  # the fixes in the map's longitudes (a track crosses 180 whole)
    lon, lat, seconds, velocity, traj = daily_velocities(dataclasses.replace(fixes, lon=west + (fixes.lon - west)
                                                                             % 360.0))
    sampled, inside = sample_map(maps, lon, lat, seconds)
    ok = inside & np.all(np.isfinite(sampled), axis=1)
    scores = {"drifters": int(len(np.unique(traj[ok]))), "outside": int((~inside).sum()),
              "no_value": int((inside & ~ok).sum()), **band_scores(sampled[ok, :2], sampled[ok, 2:], velocity[ok])}
    if mapped is None or not ok.any():
        return scores
    band = np.searchsorted(DISTANCE_BANDS_KM, distance_to_fixes(lon[ok], lat[ok], seconds[ok], mapped))
    binned = binned_mean(lon[ok], lat[ok], seconds[ok], mapped)
    for b, name in enumerate(BAND_NAMES):
        here = band == b
        mine = band_scores(sampled[ok][here, :2], sampled[ok][here, 2:], velocity[ok][here])
        scores.update({f"{name}_velocities": int(here.sum()), f"{name}_share": float(here.mean()),
                       f"{name}_error": mine["error"], f"{name}_coverage_95": mine["coverage_95"],
                       f"{name}_binned_error": band_scores(binned[here], np.ones((here.sum(), 2)),
                                                           velocity[ok][here])["error"]})
    return scores


def distance_to_fixes(lon, lat, seconds, fixes: Fixes, within_s: float = 0.5 * DAY_S) -> np.ndarray:
    """Returns the great-circle distance in km `(n,)` from points lon, lat (degrees), seconds `(n,)` to the nearest
    of `fixes` within `within_s` of each in time (inf where none is)."""
    from lagda.mapping.covariance import great_circle_km, unit_vectors

    order = np.argsort(fixes.time, kind="stable")
    times, xyz = fixes.time[order], unit_vectors(fixes.lon[order], fixes.lat[order])
    points = unit_vectors(lon, lat)
    lo = np.searchsorted(times, np.asarray(seconds) - within_s, side="left")
    hi = np.searchsorted(times, np.asarray(seconds) + within_s, side="right")
    out = np.full(len(points), np.inf)
    for i in np.flatnonzero(hi > lo):
        out[i] = great_circle_km(np.sqrt(np.min(np.sum((xyz[lo[i]:hi[i]] - points[i]) ** 2, axis=1))))
    return out


def binned_mean(lon, lat, seconds, fixes: Fixes) -> np.ndarray:
    """Returns `(n, 2)` m/s: at each point lon, lat (degrees), seconds `(n,)` the mean of the fixes' daily
    velocities (`daily_velocities`) in the same BINNED_DEG cell within BINNED_DAYS in time; zero where none."""
    f_lon, f_lat, f_seconds, f_velocity, _ = daily_velocities(fixes)
    order = np.argsort(f_seconds, kind="stable")
    f_seconds, f_velocity = f_seconds[order], f_velocity[order]
    f_cell = np.stack([np.floor((f_lon[order] % 360.0) / BINNED_DEG), np.floor(f_lat[order] / BINNED_DEG)], -1)
    cell = np.stack([np.floor((np.asarray(lon) % 360.0) / BINNED_DEG), np.floor(np.asarray(lat) / BINNED_DEG)], -1)
    lo = np.searchsorted(f_seconds, np.asarray(seconds) - BINNED_DAYS * DAY_S, side="left")
    hi = np.searchsorted(f_seconds, np.asarray(seconds) + BINNED_DAYS * DAY_S, side="right")
    out = np.zeros((len(cell), 2))
    for i in np.flatnonzero(hi > lo):
        same = np.all(f_cell[lo[i]:hi[i]] == cell[i], axis=1)
        if same.any():
            out[i] = f_velocity[lo[i]:hi[i]][same].mean(axis=0)
    return out


def daily_velocities(fixes: Fixes) -> tuple[np.ndarray, ...]:
    """Returns (lon, lat, seconds, velocity `(n, 2)` m/s, traj `(n,)`): each drifter segment's displacements over
    CHECK_CHUNK_S (lagda.assimilation.local_gp.chunk_velocities) at their midpoints, and the drifter of each."""
    from lagda.assimilation.local_gp import chunk_velocities

    segments = fixes.segments()
    lon, lat, seconds, velocity, _, segment = chunk_velocities(fixes, segments, CHECK_CHUNK_S)
    traj = np.array([fixes.traj[segments[s][0]] for s in segment], np.int64)
    return lon, lat, seconds, velocity, traj


def band_scores(mean, std, reference) -> dict:
    """Returns the scores of velocities `mean` with their `std` against `reference` (each `(n, 2)` m/s):
    {"velocities": n, "error": sqrt(sum |mean - reference|^2 / sum |reference|^2), "rms_m_s": the RMS vector
    error, "speed_rms_m_s": the reference's RMS speed, "coverage_95": the fraction of components within 1.96 std,
    "z_rms": the RMS of the components' error over their std}; NaN scores when n is 0.

    Examples
    --------
    >>> s = band_scores(np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]]), np.array([[1.0, 1.0]]))
    >>> round(s["error"], 3), s["coverage_95"], round(s["z_rms"], 3)
    (0.707, 0.5, 1.414)
    """
    error = np.asarray(mean, np.float64) - reference
    n = len(error)
    if not n:
        return {"velocities": 0, **dict.fromkeys(("error", "rms_m_s", "speed_rms_m_s", "coverage_95", "z_rms"),
                                                  float("nan"))}
    return {"velocities": n, "error": float(np.sqrt(np.sum(error**2) / np.sum(np.square(reference)))),
            "rms_m_s": float(np.sqrt(np.mean(np.sum(error**2, axis=1)))),
            "speed_rms_m_s": float(np.sqrt(np.mean(np.sum(np.square(reference), axis=1)))),
            "coverage_95": float(np.mean(np.abs(error) <= Z * std)),
            "z_rms": float(np.sqrt(np.mean((error / std) ** 2)))}


_NEAR, _FAR = DISTANCE_BANDS_KM
BAND_LABELS = (f"within {_NEAR:g} km", f"{_NEAR:g}-{_FAR:g} km", f"beyond {_FAR:g} km")  # of BAND_NAMES, in a table
BAND_WORDS = (f"where the map had a drifter within {_NEAR:g} km",  # of BAND_NAMES: a fix the map used, within 12 h
              f"where the map's nearest drifter was {_NEAR:g}-{_FAR:g} km away",
              f"where the map had no drifter within {_FAR:g} km")


def check_lines(scores: dict, withheld_drifters: int, drifters: int | None = None) -> list[str]:
    """Returns the lines a map's notes say of `check_map`'s scores: the whole check, then one line per distance band
    that has velocities (`band_lines`), errors as a percentage of the withheld drifters' RMS speed (a map of zero
    errs 100%).

    Parameters
    ----------
    withheld_drifters
        the drifters withheld
    drifters
        all the drifters (withheld and mapped), or None.

    Examples
    --------
    >>> scores = {"velocities": 57, "drifters": 2, "outside": 0, "no_value": 0, "error": 0.966,
    ...           "rms_m_s": 0.069, "speed_rms_m_s": 0.072, "coverage_95": 0.912}
    >>> for part in check_lines(scores, 2, 8)[0].split("; "):  # one line, printed here in three parts
    ...     print(part)
    withheld drifters (25%, 2 of 8): 57 daily velocities, RMS speed 0.072 m/s
    the map errs 0.069 m/s, 97% of it (a map of zero: 100%)
    its 95% band holds 91%
    """
    share = f"{withheld_drifters / drifters:.0%}, {withheld_drifters} of {drifters}" if drifters else \
        f"{withheld_drifters}"
    if not scores["velocities"]:
        return [f"withheld drifters ({share}): none has a daily velocity where the map has a value: nothing to check"]
    missed = scores["outside"] + scores["no_value"]
    used = f"{scores['drifters']} of them, " if scores["drifters"] < withheld_drifters else ""
    return [f"withheld drifters ({share}): {used}{counted(scores['velocities'], 'daily velocity', 'daily velocities')}"
            + (f" ({missed:,} more off the map)" if missed else "")
            + f", RMS speed {scores['speed_rms_m_s']:.3f} m/s; the map errs {scores['rms_m_s']:.3f} m/s, "
            f"{scores['error']:.0%} of it (a map of zero: 100%); its 95% band holds {scores['coverage_95']:.0%}",
            *band_lines(scores)]


def band_lines(scores: dict) -> list[str]:
    """Returns one line per distance band with velocities (none without the bands): the share of the velocities in
    it, the map's error as a percentage of their RMS speed beside the binned mean's on the same velocities, and the
    share of them the map's 95% band holds."""
    if "near_share" not in scores:
        return []
    return [f"withheld, {words} ({scores[f'{name}_share']:.0%} of them): the map errs "
            f"{scores[f'{name}_error']:.0%} of their RMS speed ({BINNED_DEG:g}-degree binned mean: "
            f"{scores[f'{name}_binned_error']:.0%}); its 95% band holds {scores[f'{name}_coverage_95']:.0%}"
            for name, words in zip(BAND_NAMES, BAND_WORDS) if scores[f"{name}_velocities"]]


def sample_map(maps, lon, lat, seconds, names=("u", "v", "u_std", "v_std")) -> tuple[np.ndarray, np.ndarray]:
    """Returns (values `(n, len(names))`, inside `(n,)`): the map's variables at points lon, lat (degrees),
    seconds (since 1970-01-01) `(n,)` each, linear in time between map times and bilinear in space over the
    cell-centre corners where the map has a value (NaN where none has, and outside its region and period)."""
    (t, y, x), inside = _map_position(maps, lon, lat, seconds)
    values = np.full((len(inside), len(names)), np.nan)
    values[inside] = _sample(maps, t[inside], y[inside], x[inside], names)
    return values, inside


def _map_position(maps, lon, lat, seconds):
    """Returns ((time, lat, lon) fractional indices `(n,)` each, inside `(n,)`): where the points lie on the map's
    grid, and whether within its period and within half a cell of its cells."""
    times = maps["time"].values.astype("datetime64[ns]").astype(np.int64) / 1e9
    lats, lons = maps["lat"].values.astype(np.float64), maps["lon"].values.astype(np.float64)

    def index(values, axis):  # a regular axis of one value or more
        step = axis[1] - axis[0] if len(axis) > 1 else 1.0
        return (values - axis[0]) / step

    res = lons[1] - lons[0] if len(lons) > 1 else (lats[1] - lats[0] if len(lats) > 1 else 1.0)
    west_edge = lons[0] - 0.5 * res
    x = ((np.asarray(lon) - west_edge) % 360.0) / res - 0.5  # the map's longitudes may pass 180
    y, t = index(np.asarray(lat, np.float64), lats), index(np.asarray(seconds, np.float64), times)
    inside = ((x <= len(lons) - 0.5) & (y >= -0.5) & (y <= len(lats) - 0.5) & (t >= 0) & (t <= len(times) - 1))
    return (t, y, x), inside


def _sample(maps, t, y, x, names) -> np.ndarray:
    """Returns the variables `names` `(n, len(names))` at fractional grid indices `(n,)` each (inside the grid):
    linear in time, bilinear in space (clamped to the outer cell centres), over the corners where the map has a
    value (NaN where none has: land, no tile)."""
    nt, ny, nx = maps.sizes["time"], maps.sizes["lat"], maps.sizes["lon"]
    y, x = np.clip(y, 0, ny - 1), np.clip(x, 0, nx - 1)
    j0, i0 = np.minimum(np.floor(y).astype(int), max(ny - 2, 0)), np.minimum(np.floor(x).astype(int), max(nx - 2, 0))
    k0 = np.minimum(np.floor(t).astype(int), max(nt - 2, 0))
    wy, wx, wt = y - j0, x - i0, t - k0
    total, weights = np.zeros((len(t), len(names))), np.zeros((len(t), 1))
    for k in np.unique(np.r_[k0, np.minimum(k0 + 1, nt - 1)]):  # one map time read at a time
        field = np.stack([maps[name].isel(time=int(k)).values.astype(np.float64) for name in names], axis=-1)
        for dk, in_time in ((0, 1.0 - wt), (1, wt)):
            which = np.flatnonzero(np.minimum(k0 + dk, nt - 1) == k)
            for dj, dy in ((0, 1.0 - wy), (1, wy)):
                for di, dx in ((0, 1.0 - wx), (1, wx)):
                    value = field[np.minimum(j0[which] + dj, ny - 1), np.minimum(i0[which] + di, nx - 1)]
                    weight = (in_time[which] * dy[which] * dx[which])[:, None] * np.all(np.isfinite(value), axis=1,
                                                                                         keepdims=True)
                    total[which] += weight * np.nan_to_num(value)
                    weights[which] += weight
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weights > 0, total / weights, np.nan)
