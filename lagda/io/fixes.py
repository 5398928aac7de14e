"""The fixes of several drifters, flat, and their segments: what the archive readers return and the maps use.

`Fixes` holds the fixes (trajectory index, time, lon, lat, drogue) of an archive's selection, sorted by trajectory and
time once cleaned; `segments` splits them where the map can no longer take a velocity (a new drifter, or a step over
the drifter's gap limit), and `low_passed` takes the inertial oscillations and tides out of each segment.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MAX_GAP_S = 6 * 3600.0  # a drifter's fixes further apart than this are separate segments (`Fixes.gap_limits`) ...
MAX_STEP_S = 86400.0  # ... unless its median step is longer: then GAP_FACTOR times that step, taken at most this
MIN_SEGMENT_FIXES = 3  # a segment with fewer fixes gives no velocity to map


@dataclasses.dataclass(frozen=True)
class Fixes:
    """Fixes of several drifters, flat, grouped by trajectory (sorted by time in each once `clean`ed).

    Attributes
    ----------
    traj
        int64 `(fix,)` index into `ids`
    ids
        `(trajectory,)` the archive's ids as stored.
    time
        float64 `(fix,)` seconds since 1970-01-01T00:00:00Z
    lon, lat
        float64 `(fix,)` degrees.
    drogue
        `(fix,)` the archive's drogue_status (0: undrogued), or None when it has none.
    notes
        what the selection and cleaning did, one line each
    clean
        the counts of `clean` (name -> number).
    """

    traj: np.ndarray
    time: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    ids: np.ndarray
    drogue: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    clean: dict = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.time)

    def segments(self) -> list[np.ndarray]:
        """Returns the fix indices of each drifter segment the map can use: one drifter, no step over its gap limit
        (`gap_limits`), at least MIN_SEGMENT_FIXES fixes (the fixes sorted by trajectory and time)."""
        return [s for s in np.split(np.arange(len(self)), self._breaks()) if len(s) >= MIN_SEGMENT_FIXES]

    def _breaks(self) -> np.ndarray:
        """Returns the indices `(b,)` of the fixes that start a new segment (a new drifter or a step over its gap
        limit), the first fix not included."""
        return np.flatnonzero((np.diff(self.traj) != 0) | (np.diff(self.time) > self.gap_limits())) + 1

    def low_passed(self) -> "Fixes":
        """Returns the fixes with each drifter segment's positions (split as `segments` splits them, short ones
        too) averaged over the local inertial period and two tidal periods (lagda.io.lowpass), its note added.

        Examples
        --------
        >>> t = np.arange(97) * 3600.0  # hourly, 4 days: a 0.1 m/s drift north and a 0.1 m/s inertial loop
        >>> f = 2 * 7.2921159e-5 * np.sin(np.deg2rad(40.0))
        >>> lat = 40.0 + np.rad2deg((0.1 * t + 0.1 / f * np.sin(f * t)) / 6371008.8)
        >>> smooth = Fixes(np.zeros(97, np.int64), t, np.zeros(97), lat, np.array([1])).low_passed()
        >>> drift = 40.0 + np.rad2deg(0.1 * t / 6371008.8)
        >>> bool(np.abs(smooth.lat - drift)[30:67].max() * 111e3 < 5)  # metres, where both windows fit
        True
        >>> round(float(np.abs(lat - drift).max() * 111e3))  # the loop's radius in metres
        1065
        """
        from lagda.io.lowpass import low_pass

        if not len(self):
            return self
        lon, lat, note = low_pass(self.time, self.lon, self.lat, np.r_[0, self._breaks()])
        return dataclasses.replace(self, lon=lon, lat=lat, notes=(*self.notes, note))

    def drifter_steps(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns (traj `(m,)`, median `(m,)` seconds): the median step between consecutive fixes of each drifter
        of at least two fixes (traj increasing)."""
        same = np.diff(self.traj) == 0
        step, owner = np.diff(self.time)[same], self.traj[1:][same]
        order = np.lexsort((step, owner))
        step, owner = step[order], owner[order]
        starts = np.flatnonzero(np.r_[True, np.diff(owner) != 0]) if len(owner) else np.zeros(0, np.int64)
        counts = np.diff(np.r_[starts, len(owner)])
        return owner[starts], 0.5 * (step[starts + (counts - 1) // 2] + step[starts + counts // 2])

    def gap_limits(self) -> np.ndarray:
        """Returns float64 `(fix - 1,)`: the longest step between consecutive fixes that keeps a drifter's segment
        whole, in seconds: MAX_GAP_S, or when the drifter's median step is longer (12-hourly or daily fixes),
        lagda.io.tracks.GAP_FACTOR times that step (taken at most MAX_STEP_S: fixes further apart give no velocity
        the map can use). A longer step (a gap, or the drifter's absence from a tile) splits the segment."""
        from lagda.io.tracks import GAP_FACTOR

        drifters, median = self.drifter_steps()
        limit = np.full(max(len(self) - 1, 0), MAX_GAP_S)
        if len(drifters):  # a step within a drifter: its own limit (a step between drifters splits them anyway)
            at = np.minimum(np.searchsorted(drifters, self.traj[1:]), len(drifters) - 1)
            own = np.maximum(MAX_GAP_S, GAP_FACTOR * np.minimum(median[at], MAX_STEP_S))
            limit = np.where(drifters[at] == self.traj[1:], own, limit)
        return limit

    def cadence_note(self) -> str | None:
        """Returns one line on the drifters whose median step exceeds MAX_GAP_S (their segments split at a longer
        gap, `gap_limits`), or None when there is none."""
        from lagda.io.tracks import GAP_FACTOR

        median = self.drifter_steps()[1]
        sparse = median[median > MAX_GAP_S]
        if not len(sparse):
            return None
        low, high = (f"{np.min(sparse) / 3600:.3g}", f"{np.max(sparse) / 3600:.3g}")
        return (f"{len(sparse)} of {len(median)} drifters have fixes further apart than {MAX_GAP_S / 3600:g} h "
                f"(median step {low if low == high else f'{low}-{high}'} h): their tracks are split "
                f"at steps over {GAP_FACTOR:g} times their median step (at most {GAP_FACTOR * MAX_STEP_S / 3600:g} "
                f"h), and their velocities span their steps (smoother than from hourly fixes)")

    def subset(self, keep) -> "Fixes":
        """Returns the fixes where boolean `keep` `(fix,)` holds (same ids and notes)."""
        return dataclasses.replace(self, traj=self.traj[keep], time=self.time[keep], lon=self.lon[keep],
                                   lat=self.lat[keep], drogue=None if self.drogue is None else self.drogue[keep])


def unsegmented_text() -> str:
    """Returns how a note names the fixes in no drifter segment (`Fixes.segments`)."""
    from lagda.io.tracks import GAP_FACTOR

    return (f"in no run of {MIN_SEGMENT_FIXES} fixes at most {MAX_GAP_S / 3600:g} h apart (or {GAP_FACTOR:g} times "
            f"a drifter's median step, up to {GAP_FACTOR * MAX_STEP_S / 3600:g} h)")
