"""Removing inertial oscillations and tides from drifter positions before a map is made of them.

A drogued drifter's track holds, beside the mesoscale flow a daily map is of, loops at the local inertial period
2 pi / |f| (f = 2 Omega sin(latitude): 20.9 h at 35 N, 13.8 h at 60 N) and tidal currents (M2 12.42 h, S2 12 h,
K1 23.93 h, O1 25.82 h), often 0.1-0.3 m/s. Sampled hourly they are velocities like any other and the inversions
take them for the flow. Each drifter segment's positions are therefore averaged twice in time: over its local
inertial period, which removes an inertial loop exactly, then over two M2 periods (24.84 h), which removes M2
exactly (a boxcar of width W keeps sinc(W / P) of a period P; the two keep their product H). The average is then
twiced (Tukey): the average of what it took away is given back, so the whole keeps 2 H - H^2. That leaves the
inertial loop and M2 out exactly, S2, K1 and O1 at 8% of their amplitude or less (at 35 N under 2%), passes a
steady drift and a steadily turning drifter unchanged, and keeps 99% of a flow varying over 5 days at 35 N (69%
over 2 days), where the average alone kept 88% (44%). The inertial window is taken at most `MAX_INERTIAL_S`:
near the equator the inertial period grows without bound and the equatorial currents change within it.

The averages are of the track's piecewise-linear interpolant. Within about a day of either end of a segment,
where the two windows do not fit around a fix, the average where they last fit is carried to the fix by its
velocity and acceleration there (`low_pass_series`): exact for the inertial loop and M2, and for a drifter turning
steadily round an eddy; S2, K1 and O1 are reduced less there (to 15-35% at 35 N), and a flow varying within 2-3
days is overshot at the last fixes (up to 1.8 times a 2-day oscillation's amplitude). A segment shorter than both
windows (about two days) is its least-squares straight line.
"""

from __future__ import annotations

import numpy as np

from lagda.report import counted

OMEGA = 7.2921159e-5  # Earth's rotation rate, rad/s
M2_S = 12.4206012 * 3600.0  # the principal lunar semidiurnal tide's period
TIDAL_WINDOW_S = 2 * M2_S  # the second average's width
MAX_INERTIAL_S = 3 * 86400.0  # the first average's width at most (the inertial period at 9.6 degrees)


def inertial_period_s(lat) -> np.ndarray:
    """Returns the inertial period 2 pi / |2 Omega sin(lat)| in seconds at latitudes `lat` degrees `(...)`, taken
    at most MAX_INERTIAL_S.

    >>> round(float(inertial_period_s(30.0)) / 3600, 2)
    23.93
    """
    sin = np.abs(np.sin(np.deg2rad(np.asarray(lat, np.float64))))
    return np.minimum(np.pi / (OMEGA * np.maximum(sin, 1e-12)), MAX_INERTIAL_S)


def too_short(t: np.ndarray, inertial_s) -> bool:
    """Returns whether times t `(n,)` seconds span less than the two windows of `low_pass_series` (`inertial_s` a
    number or `(n,)`): such a series is its least-squares straight line."""
    return bool(t[-1] - t[0] < np.max(inertial_s) + TIDAL_WINDOW_S)


def low_pass_series(t: np.ndarray, x: np.ndarray, inertial_s) -> np.ndarray:
    """Returns x `(n,)` or `(n, c)` (c series at the same times) at increasing times t `(n,)` seconds averaged over
    `inertial_s` (a number or `(n,)`) and then over TIDAL_WINDOW_S, twiced: with F the mean of the piecewise-linear
    interpolant under the two windows centred on each time (a trapezoid) or, within half of both windows of either
    end, under those centred where they fit, carried to the time by its velocity and acceleration there,
    2 F(x) - F(F(x)). A parabola passes exactly, and oscillations of period `inertial_s` or of the M2 tide are
    removed, everywhere; a series shorter than both windows: its least-squares straight line."""
    t, x = np.asarray(t, np.float64), np.asarray(x, np.float64)
    columns = x.reshape(len(t), -1)
    a = 0.5 * np.broadcast_to(np.asarray(inertial_s, np.float64), t.shape)
    b = 0.5 * TIDAL_WINDOW_S
    s, y = t - t[0], columns - columns[0]
    if len(t) < 3 or too_short(t, inertial_s):
        line = columns.copy() if len(t) < 2 else columns[0] + np.vander(s, 2) @ np.polyfit(s, y, 1)
        return line.reshape(x.shape)
    h = np.diff(s)[:, None]
    centre = np.clip(s, a + b, s[-1] - a - b)
    d = (s - centre)[:, None]
    # the trapezoid's corners `(4, n)` about each centre, each in its interval k of the times, e into it
    corners = np.stack([centre + sign_a * a + sign_b * b for sign_a in (1, -1) for sign_b in (1, -1)])
    k = np.clip(np.searchsorted(s, corners, side="right") - 1, 0, len(s) - 2)
    e = (corners - s[k])[..., None]
    scale = (4 * a * b)[:, None]

    def trapezoid(y):  # the average of y `(n, c)`: the trapezoid's mean, or near the ends carried by slope, curvature
        g = np.diff(y, axis=0) / h
        area = np.r_[np.zeros((1, y.shape[1])), np.cumsum(0.5 * (y[1:] + y[:-1]) * h, axis=0)]  # of y from s[0]
        area2 = np.r_[np.zeros((1, y.shape[1])),
                      np.cumsum(area[:-1] * h + y[:-1] * h**2 / 2 + g * h**3 / 6, axis=0)]  # the integral of that
        # y, its integral and the integral of that at the corners; their differences across the corners are the
        # curvature, slope and mean at the centres
        yk, gk, ak = y[k], g[k], area[k]
        values = (yk + gk * e, ak + yk * e + gk * e**2 / 2, area2[k] + ak * e + yk * e**2 / 2 + gk * e**3 / 6)
        curvature, slope, mean = ((c[0] - c[1] - c[2] + c[3]) / scale for c in values)
        return mean + d * slope + 0.5 * d**2 * curvature

    once = trapezoid(y)
    return (columns[0] + 2 * once - trapezoid(once)).reshape(x.shape)  # twiced: what it took, given back


def low_pass_segment(t: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool | None]:
    """Returns (lon, lat) `(n,)` degrees of one drifter segment's fixes at increasing times t `(n,)` seconds, low-passed
    by `low_pass_series` over the local inertial period (`inertial_period_s` at each fix's latitude) and two M2
    periods (longitudes unwrapped for it, each returned on its fix's side of 180 E; a fix without a position stays one,
    and the averages pass over it), and whether the segment was too short for the windows (`too_short`; None: under
    3 fixes with a position, left as they are)."""
    out_lon, out_lat = np.array(lon, np.float64), np.array(lat, np.float64)
    ok = np.isfinite(out_lon) & np.isfinite(out_lat)
    t, lon, lat = np.asarray(t, np.float64)[ok], out_lon[ok], out_lat[ok]
    if len(t) < 3:
        return out_lon, out_lat, None
    width = inertial_period_s(lat)
    unwrapped = np.unwrap(lon, period=360.0)
    smooth = low_pass_series(t, np.stack([unwrapped, lat], axis=-1), width)
    smooth_lon = smooth[:, 0] + (lon - unwrapped)  # each fix back on its own side of 180 E
    out_lon[ok] = np.where(smooth_lon < -180.0, smooth_lon + 360.0,
                           np.where(smooth_lon >= 360.0, smooth_lon - 360.0, smooth_lon))
    out_lat[ok] = np.clip(smooth[:, 1], -90.0, 90.0)
    return out_lon, out_lat, too_short(t, width)


def low_pass(time: np.ndarray, lon: np.ndarray, lat: np.ndarray, starts) -> tuple[np.ndarray, np.ndarray, str]:
    """Returns (lon, lat) `(n,)` degrees of flat fixes at times `(n,)` seconds, sorted by time within each segment
    (from each index of `starts` to the next; split a drifter at its gaps first), each segment low-passed by
    `low_pass_segment`, and the line that says what was done. `lagda map` and `lagda assimilate` call it through
    `lagda.io.fixes.Fixes.low_passed`.

    Examples
    --------
    Three days of hourly fixes drifting north at 0.1 m/s through a 0.15 m/s inertial loop at 45 N:

    >>> t = np.arange(73) * 3600.0
    >>> f = 2 * OMEGA * np.sin(np.deg2rad(45.0))
    >>> lat = 45.0 + np.rad2deg((0.1 * t + 0.15 / f * np.cos(f * t)) / 6371008.8)
    >>> lon, smooth, note = low_pass(t, np.zeros(73), lat, starts=[0])
    >>> north = lambda lat: np.diff(np.deg2rad(lat)) * 6371008.8 / 3600.0  # m/s between fixes
    >>> round(float(np.abs(north(lat) - 0.1).max()), 2), bool(np.abs(north(smooth) - 0.1).max() < 3e-3)
    (0.15, True)
    >>> note[:58]
    'low-pass: averaged over the inertial period (16.9 h), then'
    """
    out_lon, out_lat = np.array(lon, np.float64), np.array(lat, np.float64)
    bounds = np.r_[np.asarray(starts, np.int64), len(time)]
    shorts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out_lon[a:b], out_lat[a:b], short = low_pass_segment(time[a:b], lon[a:b], lat[a:b])
        shorts += [] if short is None else [short]
    segments, short = len(shorts), sum(shorts)
    period = (np.minimum(inertial_period_s(lat[np.isfinite(lat)]), MAX_INERTIAL_S) / 3600.0  # the widths used
              if np.isfinite(lat).any() else np.zeros(1))
    low, high = f"{np.min(period):.3g}", f"{np.max(period):.3g}"
    return out_lon, out_lat, (
        f"low-pass: averaged over the inertial period ({low if low == high else f'{low}-{high}'} h), then "
        f"{TIDAL_WINDOW_S / 3600:.4g} h: no inertial oscillations or tides (--no-low-pass)"
        + (f"; {short} of {counted(segments, 'segment')} too short for them: "
           f"{'a straight line' if short == 1 else 'straight lines'}" if short else ""))
