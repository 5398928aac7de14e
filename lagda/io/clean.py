"""Quality control of drifter fixes as read, before they are mapped: `clean_fixes` and its `CleanReport`.

Rules, in this order, on each trajectory of a `RawTracks` (lagda.io.tracks):

1. fixes without a finite time are dropped, and on the sphere those at no place on it (a latitude beyond 90
   degrees or a longitude outside -360..720: a fill value such as -999 or 9999; a track that runs past 360 or
   below -180 as it crosses its file's seam is kept);
2. fixes with the GDP `drogue_status` 0 (undrogued: the drifter no longer follows the mixed layer) are
   dropped, unless `keep_undrogued`;
3. exact duplicates (same time and position) are dropped, keeping one;
4. unsorted times are sorted;
5. conflicting duplicates (same time, different positions) are averaged into one fix when every pair lies within
   `DUPLICATE_RADIUS_M`, else the group is dropped (no metric in model units: always dropped);
6. lone end fixes are dropped (dated times only; `lone_end_mask` states the rule): a fill time such as
   1970-01-01 sorts to a track's end, decades from its other fixes;
7. position spikes, alone or a run of up to `SPIKE_RUN` fixes, are dropped (physical coordinates only;
   `spike_mask` states the rule);
8. fixes off their track, a position error too slow for the spike rule (a fix a few kilometres off an hourly
   track), are dropped (physical coordinates only; `off_track_mask` states the rule);
9. fixes not in the water (physical coordinates, dated times; `out_of_water_mask` states the rule): carried,
   reached and left faster than a spike's bound (a drifter on a ship's deck), or, in longitude/latitude, held
   within `AGROUND_RADIUS_M` of one place for over `AGROUND_S` (aground, or ashore: no ocean current holds a
   drifter still for days, where a flow given in metres may have a stagnation line);
10. trajectories left with no fix are dropped.

The GDP per-fix errors are carried, not used to drop: `err_lat`/`err_lon` (degrees) become `position_std_m` and
`err_ve`/`err_vn` (m/s) `velocity_std_m_s` in `RawTracks.per_fix`, each the RMS of its two components; a
negative or non-finite error is missing (NaN). `location_type` (0 Argos, 1 GPS) is counted.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.io.physical import EARTH_RADIUS_M
from lagda.io.tracks import RawTracks
from lagda.report import counted

MAX_SPEED_M_S = 3.0  # surface drifters: apparent speeds above this between fixes are position errors
SPEED_FACTOR = 4.0  # ... or above this many times the track's median speed, whichever bound is larger
SPIKE_RESIDUAL = 0.5  # a spike lies off its neighbours' straight line by this fraction of its mean hop or more
DUPLICATE_RADIUS_M = 300.0  # fixes of one time this close are one position measured twice: averaged
SPIKE_PASSES = 3  # the spike rule is applied again after removals, at most this many times
OFF_TRACK_SIGMAS = 6.0  # a fix further off the cubic through its neighbours than this many of the track's robust stds
OFF_TRACK_M = 1000.0  # ... and than this many metres lies off its track (a position error under the speed bound)
OFF_TRACK_SPAN_STEPS = 12.0  # a fix whose four neighbours span more median steps than this is not judged (a gap)
OFF_TRACK_PASSES = 10  # the off-track rule is applied again after removals, at most this many times
SPIKE_RUN = 3  # consecutive fixes away from their track together (a fill position repeated) are one spike
LONE_GAP_S = 10 * 86400.0  # an end fix further than this from the rest of its track, and ...
LONE_GAP_FACTOR = 100.0  # ... than this many times the track's median step, is a lone fix
MIN_FIXES = 3  # a physical trajectory left with fewer fixes gives no velocity: dropped
AGROUND_RADIUS_M = 200.0  # fixes held within this distance of one place ...
AGROUND_S = 4 * 86400.0  # ... for longer than this are not in the water (aground, ashore): not 2 days, since a
# drifter of the basin-year benchmark's QG ocean, near a stagnation point, stayed within 200 m for 58 hours
_DEG_M = EARTH_RADIUS_M * np.pi / 180  # metres per degree of latitude
_BOUND = f"max({MAX_SPEED_M_S:g} m/s, {SPEED_FACTOR:g}x the track's median speed)"  # the notes' speed bound


@dataclasses.dataclass(frozen=True)
class CleanReport:
    """What `clean_fixes` did: counts of fixes (or trajectories, or groups of one time) per rule.

    Location counts and error medians are None when the file has no such variable.
    """

    fixes_read: int = 0
    fixes_kept: int = 0
    missing_times_dropped: int = 0
    impossible_positions_dropped: int = 0  # lon/lat off the sphere: fill values
    undrogued_dropped: int = 0
    undrogued_kept: int = 0
    exact_duplicates_dropped: int = 0
    trajectories_sorted: int = 0
    conflicts_averaged: int = 0  # groups of one time averaged into one fix
    conflicts_dropped: int = 0  # groups of one time dropped whole
    conflict_fixes_dropped: int = 0  # the fixes of those groups
    spikes_dropped: int = 0
    off_track_dropped: int = 0  # fixes off the curve through their neighbours, under the spike rule's speed
    lone_fixes_dropped: int = 0  # end fixes far in time from the rest of their track
    carried_dropped: int = 0  # fixes reached and left faster than a spike's bound (on a ship's deck)
    aground_dropped: int = 0  # fixes held in one place for days
    trajectories_emptied: int = 0
    short_trajectories_dropped: int = 0  # physical files: trajectories left with 1 or 2 fixes
    short_trajectory_fixes_dropped: int = 0
    location_gps: int | None = None
    location_argos: int | None = None
    position_std_median_m: float | None = None
    velocity_std_median_m_s: float | None = None
    spike_rule: bool = True  # False for model units: no physical speed to judge spikes by

    def notes(self) -> tuple[str, ...]:
        """Returns one short line per rule that did something (and per GDP variable found)."""
        fixes = lambda n, kind="": counted(n, f"{kind}fix".strip(), f"{kind}fixes".strip())
        tracks = lambda n: counted(n, "trajectory", "trajectories")
        lines = []
        if self.missing_times_dropped:
            lines.append(f"clean: {fixes(self.missing_times_dropped)} without a time dropped")
        if self.impossible_positions_dropped:
            lines.append(f"clean: {fixes(self.impossible_positions_dropped)} at no place on the sphere dropped "
                         "(latitude beyond 90 degrees or longitude outside -360..720: fill values)")
        if self.undrogued_dropped:
            lines.append(f"clean: {fixes(self.undrogued_dropped, 'undrogued ')} dropped (drogue_status 0; "
                         "--keep-undrogued keeps them)")
        if self.undrogued_kept:
            lines.append(f"clean: {fixes(self.undrogued_kept, 'undrogued ')} kept (keep_undrogued)")
        if self.exact_duplicates_dropped:
            lines.append(f"clean: {fixes(self.exact_duplicates_dropped, 'exact duplicate ')} dropped")
        if self.trajectories_sorted:
            lines.append(f"clean: times sorted in {tracks(self.trajectories_sorted)}")
        if self.conflicts_averaged:
            lines.append(f"clean: {counted(self.conflicts_averaged, 'time')} with conflicting positions within "
                         f"{DUPLICATE_RADIUS_M:g} m averaged into one fix")
        if self.conflicts_dropped:
            within = f"more than {DUPLICATE_RADIUS_M:g} m apart" if self.spike_rule else "in model units"
            lines.append(f"clean: {counted(self.conflicts_dropped, 'time')} with conflicting positions {within} "
                         f"dropped ({fixes(self.conflict_fixes_dropped)})")
        if self.lone_fixes_dropped:
            lines.append(f"clean: {fixes(self.lone_fixes_dropped, 'lone ')} dropped (at a track's start or end, over "
                         f"{LONE_GAP_S / 86400:g} days and {LONE_GAP_FACTOR:g} median steps from the next fix: a "
                         "wrong time)")
        if self.spikes_dropped:
            lines.append(f"clean: {counted(self.spikes_dropped, 'position spike')} dropped (alone or up to {SPIKE_RUN} "
                         f"in a row, reached and left faster than {_BOUND} and off their neighbours' line)")
        if self.off_track_dropped:
            lines.append(f"clean: {fixes(self.off_track_dropped)} off their track dropped (over "
                         f"{OFF_TRACK_SIGMAS:g} robust stds and {OFF_TRACK_M:g} m from the cubic through their two "
                         "neighbours each side: a position error under the spike rule's speed)")
        if self.carried_dropped:
            lines.append(f"clean: {fixes(self.carried_dropped)} carried dropped (reached and left faster than "
                         f"{_BOUND} along their track: a drifter on a ship's deck)")
        if self.aground_dropped:
            lines.append(f"clean: {fixes(self.aground_dropped)} aground dropped (held within {AGROUND_RADIUS_M:g} m "
                         f"of one place for over {AGROUND_S / 86400:g} days: a drifter ashore or beached)")
        if self.trajectories_emptied:
            lines.append(f"clean: {tracks(self.trajectories_emptied)} left without a located fix dropped "
                         "(every fix cleaned away, or none with a position)")
        if self.short_trajectories_dropped:
            lines.append(f"clean: {tracks(self.short_trajectories_dropped)} with fewer than {MIN_FIXES} fixes "
                         f"dropped ({fixes(self.short_trajectory_fixes_dropped)})")
        if self.location_gps is not None:
            lines.append(f"clean: location_type: {self.location_gps} GPS and {self.location_argos} Argos fixes kept")
        if self.position_std_median_m is not None:
            lines.append(f"clean: position error (err_lat/err_lon) median {self.position_std_median_m:.3g} m")
        if self.velocity_std_median_m_s is not None:
            lines.append(f"clean: velocity error (err_ve/err_vn) median {self.velocity_std_median_m_s:.3g} m/s")
        return tuple(lines)

    def attrs(self) -> dict:
        """Returns the counts as netCDF global attributes `clean_<field>` (None fields left out, bools as 0/1)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f"clean_{f.name}"] = int(value) if isinstance(value, (bool, np.bool_)) else value
        return out


def clean_fixes(raw: RawTracks, *, keep_undrogued: bool = False) -> tuple[RawTracks, CleanReport]:
    """Returns `raw` with the module's rules applied, and the report of what they did.

    The result's trajectories are those of `raw` less the ones left empty (ids, field and release subset
    alike), each with increasing times; `per_fix` variables follow their fixes, plus `position_std_m` and
    `velocity_std_m_s` when the errors are present. `raw` is not modified.

    Parameters
    ----------
    raw : RawTracks
        Per trajectory, times `(n,)` (seconds since 1970-01-01T00:00:00Z when `raw.physical_time`, else model
        units) and positions `(n, 2)` (lon/lat degrees, metres or model units, as `raw.coordinates` says).
    keep_undrogued : bool, default False
        Keep the fixes with GDP `drogue_status` 0.

    Returns
    -------
    cleaned : RawTracks
        The fixes that pass, in the units of `raw`.
    report : CleanReport
        What each rule did: counts, and `notes()` one line per rule that acted.

    Examples
    --------
    One model-unit track with an exact duplicate and unsorted times:

    >>> import numpy as np
    >>> from lagda.io.tracks import RawTracks
    >>> raw = RawTracks(times=[np.array([0.0, 2.0, 1.0, 2.0])], positions=[np.array([[0.1, 0.1], [0.3, 0.3],
    ...                 [0.2, 0.2], [0.3, 0.3]])], ids=np.array([7]), field=None, coordinates="model",
    ...                 physical_time=False)
    >>> cleaned, report = clean_fixes(raw)
    >>> cleaned.times[0].tolist()
    [0.0, 1.0, 2.0]
    >>> report.notes()
    ('clean: 1 exact duplicate fix dropped', 'clean: times sorted in 1 trajectory')
    """
    counts = dict.fromkeys(["missing_times_dropped", "impossible_positions_dropped", "undrogued_dropped",
                            "undrogued_kept",
                            "exact_duplicates_dropped", "trajectories_sorted", "conflicts_averaged",
                            "conflicts_dropped", "conflict_fixes_dropped", "spikes_dropped", "off_track_dropped",
                            "lone_fixes_dropped",
                            "carried_dropped", "aground_dropped",
                            "trajectories_emptied",
                            "short_trajectories_dropped", "short_trajectory_fixes_dropped"], 0)
    metric = raw.coordinates in ("lonlat", "projected")
    per_fix = _derived_errors(raw)
    out_t, out_p, out_v, keep_traj = [], [], {name: [] for name in per_fix}, []
    n_read = 0
    for i, (t, p) in enumerate(zip(raw.times, raw.positions)):
        t, p = np.asarray(t, np.float64).ravel(), np.asarray(p, np.float64).reshape(-1, 2)
        v = {name: np.asarray(values[i]).ravel() for name, values in per_fix.items()}
        n_read += len(t)
        ok = np.isfinite(t)
        timed = np.flatnonzero(ok)
        padding = len(t) - (int(timed[-1]) + 1 if len(timed) else 0)  # a padded array's slots past the last fix
        counts["missing_times_dropped"] += int(np.sum(~ok)) - padding
        if raw.coordinates == "lonlat":
            nowhere = ok & ((np.abs(p[:, 1]) > 90.0) | (p[:, 0] < -360.0) | (p[:, 0] > 720.0))
            counts["impossible_positions_dropped"] += int(np.sum(nowhere))
            ok &= ~nowhere
        if "drogue_status" in v:
            undrogued = ok & _is_zero(v["drogue_status"])
            counts["undrogued_kept" if keep_undrogued else "undrogued_dropped"] += int(np.sum(undrogued))
            ok &= keep_undrogued | ~undrogued
        t, p, v = t[ok], p[ok], {name: a[ok] for name, a in v.items()}
        t, p, v = _duplicates_and_order(t, p, v, raw.coordinates, counts)
        if raw.physical_time:
            lone = lone_end_mask(t)
            counts["lone_fixes_dropped"] += int(lone.sum())
            t, p, v = t[~lone], p[~lone], {name: a[~lone] for name, a in v.items()}
        if metric and len(t) >= 3:
            spikes = np.zeros(len(t), bool)
            for _ in range(SPIKE_PASSES):
                new = spike_mask(t, np.where(spikes[:, None], np.nan, p), raw.coordinates)
                if not new.any():
                    break
                spikes |= new
            counts["spikes_dropped"] += int(spikes.sum())
            t, p, v = t[~spikes], p[~spikes], {name: a[~spikes] for name, a in v.items()}
            off = off_track_mask(t, p, raw.coordinates)
            counts["off_track_dropped"] += int(off.sum())
            t, p, v = t[~off], p[~off], {name: a[~off] for name, a in v.items()}
        if metric and raw.physical_time and len(t) >= 3:
            carried, aground = out_of_water_mask(t, p, raw.coordinates)
            # a drifter at rest for days is out of the water in the ocean; in a flow given in metres (a model's, a
            # test's) a stagnation line can hold one still
            aground &= raw.coordinates == "lonlat"
            counts["carried_dropped"] += int(carried.sum())
            counts["aground_dropped"] += int(aground.sum())
            out = carried | aground
            t, p, v = t[~out], p[~out], {name: a[~out] for name, a in v.items()}
        located = int(np.sum(np.all(np.isfinite(p), axis=1)))  # a fix whose position is missing (NaN) stays one
        if located == 0 and np.size(raw.times[i]) > 0:  # every fix gone, or none with a position (all flagged)
            counts["trajectories_emptied"] += 1
            continue
        if metric and 0 < located < MIN_FIXES:  # no velocity to take from it
            counts["short_trajectories_dropped"] += 1
            counts["short_trajectory_fixes_dropped"] += len(t)
            continue
        keep_traj.append(i)
        out_t.append(t)
        out_p.append(p)
        for name in out_v:
            out_v[name].append(v[name])
    keep = np.asarray(keep_traj, np.int64)
    cleaned = dataclasses.replace(
        raw, times=out_t, positions=out_p, ids=np.asarray(raw.ids)[keep], per_fix=out_v,
        field=None if raw.field is None else np.asarray(raw.field)[keep],
        release=None if raw.release is None else np.asarray(raw.release)[keep])
    report = CleanReport(fixes_read=n_read, fixes_kept=int(sum(len(t) for t in out_t)), spike_rule=metric,
                         **counts, **_variable_summary(out_v))
    return cleaned, report


def out_of_water_mask(t: np.ndarray, p: np.ndarray, coordinates: str) -> tuple[np.ndarray, np.ndarray]:
    """Returns (carried, aground), bool `(n,)`: the fixes of one track (increasing times `t` `(n,)` seconds,
    positions `p` `(n, 2)` lon/lat degrees or metres, as `coordinates` says, after the spike rule) not in the water.

    Carried: an interior fix whose hops from the fix before it and to the fix after it are both faster than the
    spike rule's bound (`spike_mask`) and that is no spike (a spike is reached and left off its track's line): a run
    of such fixes is a drifter moving faster than any current, on a ship's deck. Aground: each fix of a run held
    within AGROUND_RADIUS_M of the run's first fix for longer than AGROUND_S (a run starts at the first fix, not in
    an earlier run, whose fix just over AGROUND_S later lies that close). NaN positions are skipped.

    Examples
    --------
    >>> t = 3600.0 * np.arange(80)
    >>> x = np.c_[360.0 * np.arange(80), np.zeros(80)]  # 0.1 m/s eastward, metres
    >>> x[40:43] += 20000.0 * np.arange(1, 4)[:, None] * [1, 0]  # 5.6 m/s for three hours
    >>> x[43:] = x[42]  # then held in one place for 37 hours
    >>> carried, aground = out_of_water_mask(t, x, "projected")
    >>> np.flatnonzero(carried).tolist(), int(aground.sum())
    ([40, 41], 0)
    """
    carried, aground = np.zeros(len(t), bool), np.zeros(len(t), bool)
    idx = np.flatnonzero(np.all(np.isfinite(p), axis=1))
    if len(idx) < 3:
        return carried, aground
    tt, pp = t[idx], p[idx]
    _, fast, _ = _hops(tt, pp, coordinates)
    carried[idx[1:-1]] = fast[:-1] & fast[1:]
    later = np.searchsorted(tt, tt + AGROUND_S, side="right")  # each fix's first fix over AGROUND_S later
    has = later < len(tt)
    starts = np.flatnonzero(has)
    starts = starts[_distance(pp[starts], pp[later[starts]], coordinates) <= AGROUND_RADIUS_M]
    away = lambda s, a, b: _distance(pp[a:b], np.broadcast_to(pp[s], pp[a:b].shape), coordinates) > AGROUND_RADIUS_M
    end = -1
    for s in starts:  # few: a drifter in the water leaves any 200 m within days
        if s < end or away(s, s, later[s] + 1).any():
            continue
        far = np.flatnonzero(away(s, later[s], len(pp)))
        end = later[s] + (int(far[0]) if len(far) else len(pp) - later[s])
        aground[idx[s:end]] = True
    return carried, aground & ~carried


def lone_end_mask(t: np.ndarray) -> np.ndarray:
    """Returns a bool `(n,)`: the lone end fixes of one track with increasing times `t` `(n,)` in seconds.

    The first (or last) fix is lone when its step to the next (previous) fix exceeds both `LONE_GAP_S` and
    `LONE_GAP_FACTOR` times the median step; the rule is applied again at each end, at most `SPIKE_PASSES`
    times, and leaves at least 2 fixes. Such a fix gives no velocity, only a displacement over weeks or
    decades, and would stretch the track's time window.

    Examples
    --------
    >>> hourly = 1.7e9 + 3600.0 * np.arange(6)  # six hourly fixes in 2023, one dated 1970, one 30 days on
    >>> lone_end_mask(np.concatenate([[0.0], hourly, [hourly[-1] + 30 * 86400.0]])).astype(int).tolist()
    [1, 0, 0, 0, 0, 0, 0, 1]
    """
    mask = np.zeros(len(t), bool)
    if len(t) < 3:
        return mask
    bound = max(LONE_GAP_S, LONE_GAP_FACTOR * float(np.median(np.diff(t))))
    lo, hi = 0, len(t) - 1
    for _ in range(SPIKE_PASSES):
        if hi - lo >= 2 and t[lo + 1] - t[lo] > bound:
            mask[lo], lo = True, lo + 1
        if hi - lo >= 2 and t[hi] - t[hi - 1] > bound:
            mask[hi], hi = True, hi - 1
    return mask


def spike_mask(t: np.ndarray, p: np.ndarray, coordinates: str) -> np.ndarray:
    """Returns a bool `(n,)`: the position spikes of one track with increasing times `t` `(n,)`.

    With `v` the speeds of the hops between consecutive finite fixes and `bound = max(MAX_SPEED_M_S,
    SPEED_FACTOR * median(v))`: an interior fix is a spike when both its hops are faster than `bound` and its
    distance from the straight line between its neighbours (at its time) exceeds `SPIKE_RESIDUAL` times the
    mean of its two hops; an end fix is a spike when its hop is faster than `bound` and the next hop is not.
    A run of 2 to `SPIKE_RUN` fixes (a fill position written several times) is a spike when the hops into and
    out of it are faster than `bound`, the hops inside it and the hop over it are not, and each of its fixes is
    that far off the line between the fixes around it; a run at a track's end, when its hop to the rest is faster
    than `bound` and the hops inside it and as many hops of the rest beyond are not. A jet at constant speed below
    the bound is never cut, at any speed its median sets. NaN fixes are skipped. `p`: `(n, 2)` lon/lat degrees
    ("lonlat") or metres ("projected"); `t` in seconds.

    Examples
    --------
    >>> t = 3600.0 * np.arange(8)
    >>> x = np.c_[1000.0 * np.arange(8), np.zeros(8)]  # 0.28 m/s eastward, metres
    >>> x[3:5] = [5e6, 5e6]  # a fill position twice
    >>> spike_mask(t, x, "projected").astype(int).tolist()
    [0, 0, 0, 1, 1, 0, 0, 0]
    """
    mask = np.zeros(len(t), bool)
    idx = np.flatnonzero(np.all(np.isfinite(p), axis=1))
    if len(idx) < 3:
        return mask
    tt, pp = t[idx], p[idx]
    hop, fast, bound = _hops(tt, pp, coordinates)
    w = ((tt[1:-1] - tt[:-2]) / (tt[2:] - tt[:-2]))[:, None]
    a, b = pp[:-2], pp[2:].copy()
    if coordinates == "lonlat":
        b[:, 0] = a[:, 0] + _wrap(b[:, 0] - a[:, 0])
    residual = _distance(pp[1:-1], a + w * (b - a), coordinates)
    mask[idx[1:-1]] = fast[:-1] & fast[1:] & (residual > SPIKE_RESIDUAL * 0.5 * (hop[:-1] + hop[1:]))
    mask[idx[0]] = fast[0] & ~fast[1]
    mask[idx[-1]] = fast[-1] & ~fast[-2]
    for run in range(2, SPIKE_RUN + 1):
        if len(idx) < run + 2:
            break
        first = np.arange(1, len(idx) - run)  # interior runs first..first+run-1, between first-1 and first+run
        before, after = pp[first - 1], pp[first + run].copy()
        if coordinates == "lonlat":
            after[:, 0] = before[:, 0] + _wrap(after[:, 0] - before[:, 0])
        over = _distance(before, after, coordinates) / (tt[first + run] - tt[first - 1]) <= bound
        reach = SPIKE_RESIDUAL * 0.5 * (hop[first - 1] + hop[first + run - 1])
        off = np.ones(len(first), bool)  # and together: no fast hop inside the run
        for k in range(run):
            if k < run - 1:
                off &= ~fast[first + k]
            w = ((tt[first + k] - tt[first - 1]) / (tt[first + run] - tt[first - 1]))[:, None]
            off &= _distance(pp[first + k], before + w * (after - before), coordinates) > reach
        for start in first[fast[first - 1] & fast[first + run - 1] & over & off]:
            mask[idx[start:start + run]] = True
        if len(idx) >= 2 * run + 2:  # a run at an end, the track's next `run` hops steady
            if fast[run - 1] and not fast[run:2 * run].any() and not fast[:run - 1].any():
                mask[idx[:run]] = True
            if fast[-run] and not fast[-2 * run:-run].any() and not fast[-run + 1:].any():
                mask[idx[-run:]] = True
    return mask


def off_track_mask(t: np.ndarray, p: np.ndarray, coordinates: str) -> np.ndarray:
    """Returns a bool `(n,)`: the fixes of one track with increasing times `t` `(n,)` that lie off its path.

    Each fix with two finite fixes either side is compared with the cubic through those four at its time: with
    Lagrange weights `w` `(4,)` from the times, its distance `r` (m) from the prediction, in the units of white
    position noise `z = r / sqrt(1 + sum(w^2))`, so that irregular times are judged alike. The track's noise scale
    `s` is the median `z` / sqrt(2 ln 2) (a 2-d Gaussian's median radius, per component). A fix is off its track
    when `z > OFF_TRACK_SIGMAS s`, `r > OFF_TRACK_M` and no fix within two places has a larger `z` (a displaced
    fix moves its neighbours' predictions too, by at most 2/3 of its offset); the rule is applied again without
    the fixes found, at most `OFF_TRACK_PASSES` times. Not judged: the first and last two fixes, a fix whose four
    neighbours span over `OFF_TRACK_SPAN_STEPS` median steps (a gap) or that has a hop among them faster than the
    spike rule's bound (a kink where a drifter is picked up: the cubic cannot follow it; `out_of_water_mask`
    judges it), a track of fewer than 6 finite fixes.

    A cubic follows a drifter turning by theta per step to r = R theta^4 / 6 (R the turn's radius): hourly fixes
    in an eddy or an inertial loop are predicted to metres, and a fix displaced by a kilometre or more stands out;
    where the fixes are sparse for the motion (6-hourly fixes of an inertial loop) every `z` is large, `s` with
    them, and nothing is dropped. `p`: `(n, 2)` lon/lat degrees ("lonlat") or metres ("projected"); `t` seconds.

    Examples
    --------
    >>> t = 3600.0 * np.arange(12)
    >>> x = np.c_[1000.0 * np.arange(12), 20.0 * np.sin(np.arange(12.0))]  # 0.28 m/s east, 20 m wiggles
    >>> x[6, 1] += 4000.0  # 4 km off: hops of 1.2 m/s, under the spike rule's 3 m/s
    >>> bool(spike_mask(t, x, "projected").any()), np.flatnonzero(off_track_mask(t, x, "projected")).tolist()
    (False, [6])
    """
    mask = np.zeros(len(t), bool)
    idx = np.flatnonzero(np.all(np.isfinite(p), axis=1))
    for _ in range(OFF_TRACK_PASSES):
        if len(idx) < 6:
            break
        tt, pp = t[idx], p[idx]
        centre = np.arange(2, len(idx) - 2)
        around = centre[:, None] + np.array([-2, -1, 1, 2])  # (m, 4): two finite fixes either side
        s = tt[around] - tt[centre, None]
        w = np.ones_like(s)
        for k in range(4):
            for j in range(4):
                if j != k:
                    w[:, k] *= s[:, j] / (s[:, j] - s[:, k])
        offset = _offsets(pp[around], pp[centre, None], coordinates)  # (m, 4, 2) m from the fix
        r = np.hypot(*np.einsum("mk,mkc->cm", w, offset))
        z = r / np.sqrt(1.0 + np.sum(w**2, axis=1))
        fast = _hops(tt, pp, coordinates)[1]
        judged = ((s[:, -1] - s[:, 0] <= OFF_TRACK_SPAN_STEPS * np.median(np.diff(tt)))
                  & ~(fast[centre - 2] | fast[centre - 1] | fast[centre] | fast[centre + 1]))
        if judged.sum() < 3:
            break
        scale = np.median(z[judged]) / np.sqrt(2.0 * np.log(2.0))
        padded = np.full(len(idx) + 4, -np.inf)
        padded[centre + 2] = z
        largest = np.max([padded[centre + 2 + k] for k in (-2, -1, 1, 2)], axis=0)
        off = judged & (z > OFF_TRACK_SIGMAS * scale) & (r > OFF_TRACK_M) & (z >= largest)
        if not off.any():
            break
        mask[idx[centre[off]]] = True
        idx = np.delete(idx, centre[off])
    return mask


def _hops(tt: np.ndarray, pp: np.ndarray, coordinates: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Returns (the hops between consecutive fixes `(n - 1,)` in metres, whether each is faster than the bound,
    the bound max(MAX_SPEED_M_S, SPEED_FACTOR x their median speed) m/s) of finite fixes at times `tt`."""
    hop = _distance(pp[:-1], pp[1:], coordinates)
    speed = hop / np.diff(tt)
    bound = max(MAX_SPEED_M_S, SPEED_FACTOR * float(np.median(speed)))
    return hop, speed > bound, bound


def _duplicates_and_order(t, p, v, coordinates, counts):
    """Returns (t, p, v) sorted by time with exact duplicates dropped and conflicting ones averaged or dropped."""
    if len(t) == 0:
        return t, p, v
    if len(t) > 1 and np.any(np.diff(t) < 0):
        counts["trajectories_sorted"] += 1
    order = np.lexsort((p[:, 1], p[:, 0], t))  # by time, then position: exact duplicates become neighbours
    t, p, v = t[order], p[order], {name: a[order] for name, a in v.items()}
    same_p = np.all((p[1:] == p[:-1]) | (np.isnan(p[1:]) & np.isnan(p[:-1])), axis=1)
    exact = np.concatenate([[False], (t[1:] == t[:-1]) & same_p])
    counts["exact_duplicates_dropped"] += int(exact.sum())
    t, p, v = t[~exact], p[~exact], {name: a[~exact] for name, a in v.items()}
    if len(t) < 2 or not np.any(t[1:] == t[:-1]):
        return t, p, v
    starts = np.flatnonzero(np.concatenate([[True], t[1:] != t[:-1]]))
    ends = np.append(starts[1:], len(t))
    rows, new_p, new_v = [], [], {name: [] for name in v}
    for s, e in zip(starts, ends):
        group = p[s:e]
        if e - s > 1:
            finite = group[np.all(np.isfinite(group), axis=1)]
            close = coordinates != "model" and _max_pairwise(finite, coordinates) <= DUPLICATE_RADIUS_M
            if not close:
                counts["conflicts_dropped"] += 1
                counts["conflict_fixes_dropped"] += e - s
                continue
            counts["conflicts_averaged"] += 1
            group = _mean_position(finite, coordinates)[None] if len(finite) else group[:1]
        rows.append(s)
        new_p.append(group[0])
        for name, a in v.items():
            new_v[name].append(_group_value(a[s:e]))
    rows = np.asarray(rows, np.int64)
    return (t[rows], np.asarray(new_p, np.float64).reshape(-1, 2),
            {name: np.asarray(values, dtype=v[name].dtype) for name, values in new_v.items()})


def _group_value(values: np.ndarray):
    """Returns one value for a group of duplicates: the mean of float errors, else the first."""
    if values.dtype.kind == "f":
        return np.nanmean(values) if np.any(np.isfinite(values)) else np.nan
    return values[0]


def _max_pairwise(p: np.ndarray, coordinates: str) -> float:
    """Returns the largest distance (m) between two of the positions `p` `(k, 2)`; 0 for fewer than two."""
    if len(p) < 2:
        return 0.0
    i, j = np.triu_indices(len(p), 1)
    return float(np.max(_distance(p[i], p[j], coordinates)))


def _mean_position(p: np.ndarray, coordinates: str) -> np.ndarray:
    """Returns the mean of positions `p` `(k, 2)`, longitudes unwrapped around the first."""
    p = p.copy()
    if coordinates == "lonlat":
        p[:, 0] = p[0, 0] + _wrap(p[:, 0] - p[0, 0])
    return p.mean(axis=0)


def _wrap(dlon):
    """Returns longitude differences in [-180, 180)."""
    return (np.asarray(dlon) + 180.0) % 360.0 - 180.0


def _offsets(p: np.ndarray, origin: np.ndarray, coordinates: str) -> np.ndarray:
    """Returns the positions `p` `(..., 2)` east and north of `origin` (broadcast against `p`) in metres: in lon/lat
    on the plane tangent at `origin` (for the few kilometres between a fix and its neighbours)."""
    d = p - origin
    if coordinates != "lonlat":
        return d
    d = np.stack([_wrap(d[..., 0]) * np.cos(np.deg2rad(origin[..., 1])), d[..., 1]], axis=-1)
    return _DEG_M * d


def _distance(a: np.ndarray, b: np.ndarray, coordinates: str) -> np.ndarray:
    """Returns distances (m) between positions `a` and `b` `(k, 2)`: haversine for lon/lat, else Euclidean."""
    if coordinates != "lonlat":
        return np.hypot(b[:, 0] - a[:, 0], b[:, 1] - a[:, 1])
    lon1, lat1, lon2, lat2 = (np.deg2rad(x) for x in (a[:, 0], a[:, 1], b[:, 0], b[:, 1]))
    h = np.sin(0.5 * (lat2 - lat1)) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(0.5 * (lon2 - lon1)) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def _is_zero(values: np.ndarray) -> np.ndarray:
    """Returns where a status flag is 0 / False (a missing, NaN flag is not)."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        return np.isfinite(values) & (values == 0)
    return values == 0


def _error(values) -> np.ndarray:
    """Returns an error variable as float64 with negative or non-finite values (fill values) as NaN."""
    values = np.asarray(values, np.float64)
    return np.where(np.isfinite(values) & (values >= 0), values, np.nan)


def _derived_errors(raw: RawTracks) -> dict:
    """Returns `raw.per_fix` plus `position_std_m` and `velocity_std_m_s` where their components are present."""
    per_fix = dict(raw.per_fix)
    if {"err_lat", "err_lon"} <= set(per_fix) and raw.coordinates == "lonlat":
        cos_lat = [np.cos(np.deg2rad(np.asarray(p, np.float64).reshape(-1, 2)[:, 1])) for p in raw.positions]
        per_fix["position_std_m"] = [_DEG_M * np.sqrt(0.5 * (_error(e_lat) ** 2 + (_error(e_lon) * c) ** 2))
                                     for e_lat, e_lon, c in zip(per_fix["err_lat"], per_fix["err_lon"], cos_lat)]
    if {"err_ve", "err_vn"} <= set(per_fix):
        per_fix["velocity_std_m_s"] = [np.sqrt(0.5 * (_error(e) ** 2 + _error(n) ** 2))
                                       for e, n in zip(per_fix["err_ve"], per_fix["err_vn"])]
    return per_fix


def _variable_summary(per_fix: dict) -> dict:
    """Returns the report's location counts and error medians of the kept fixes (None where absent)."""
    out = {}
    if "location_type" in per_fix:
        kind = np.concatenate([np.asarray(a, np.float64) for a in per_fix["location_type"]] or [np.zeros(0)])
        out["location_gps"], out["location_argos"] = int(np.sum(kind == 1)), int(np.sum(kind == 0))
    for name, key in (("position_std_m", "position_std_median_m"), ("velocity_std_m_s", "velocity_std_median_m_s")):
        if name in per_fix:
            values = np.concatenate([np.asarray(a, np.float64) for a in per_fix[name]] or [np.zeros(0)])
            finite = values[np.isfinite(values)]
            out[key] = float(np.median(finite)) if len(finite) else None
    return out
