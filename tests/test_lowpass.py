"""lagda.io.lowpass: inertial loops and tides leave a drifter's positions, a steady drift and slow flows stay, against
closed forms (a boxcar of width W passes a linear drift, nulls a period W, and scales a sinusoid of period P by
sinc(W / P); the two boxcars' product H, twiced, by 2 H - H^2, which passes a parabola whole)."""

import numpy as np
import pytest

from lagda.io.fixes import Fixes
from lagda.io.lowpass import TIDAL_WINDOW_S, inertial_period_s, low_pass, low_pass_segment, low_pass_series
from lagda.io.physical import EARTH_RADIUS_M

HOURS = np.arange(0, 6 * 24 + 1) * 3600.0  # six days, hourly


def loop_track(lat0, amplitude, period_s, t=HOURS, drift=(0.1, 0.05), phase=0.3):
    """Returns (lon, lat) degrees of a drifter in a steady drift (m/s) that also loops clockwise at `amplitude` m/s
    with `period_s`, and of the drift alone."""
    w = 2 * np.pi / period_s
    x, y = drift[0] * t, drift[1] * t
    loop_x, loop_y = amplitude / w * np.sin(w * t + phase), amplitude / w * np.cos(w * t + phase)
    to_deg = lambda xm, ym: (np.degrees(xm / (EARTH_RADIUS_M * np.cos(np.radians(lat0)))),
                             lat0 + np.degrees(ym / EARTH_RADIUS_M))
    return to_deg(x + loop_x, y + loop_y), to_deg(x, y)


def metres(a, b, lat0):
    """The distance (m) between lon/lat arrays a and b."""
    dx = np.radians(a[0] - b[0]) * EARTH_RADIUS_M * np.cos(np.radians(lat0))
    return np.hypot(dx, np.radians(a[1] - b[1]) * EARTH_RADIUS_M)


@pytest.mark.parametrize("lat0", [20.0, 45.0, -60.0])
def test_an_inertial_loop_leaves_the_track_to_the_end(lat0):
    """A 0.15 m/s loop at the local inertial period (a radius of 1-3 km) goes, at every fix, ends included."""
    lonlat, drift = loop_track(lat0, 0.15, float(inertial_period_s(lat0)), drift=(0.1, 0.0))  # f the same
    radius = metres(lonlat, drift, lat0).max()
    assert radius > 1000
    assert metres(low_pass_segment(HOURS, *lonlat), drift, lat0).max() < 0.01 * radius


@pytest.mark.parametrize("period_h, at_the_ends", [(12.4206012, 0.015), (12.0, 0.4), (23.93, 0.15), (25.82, 0.2)])
def test_the_tides_leave_the_track(period_h, at_the_ends):
    """At 35 N, away from the ends the tides M2, S2, K1, O1 (a 0.1 m/s ellipse) keep |2 H - H^2| of their amplitude,
    H the two windows' product of sincs (M2: none); within two days of the ends, where the averages are carried by
    their slope and curvature, M2 stays removed and the others are reduced to `at_the_ends`."""
    t = np.arange(0, 10 * 24 + 1) * 3600.0
    lonlat, drift = loop_track(35.0, 0.1, period_h * 3600.0, t=t, drift=(0.1, 0.0))
    radius = metres(lonlat, drift, 35.0).max()
    left = metres(low_pass_segment(t, *lonlat), drift, 35.0) / radius
    h = np.sinc(inertial_period_s(35.0) / (period_h * 3600.0)) * np.sinc(TIDAL_WINDOW_S / (period_h * 3600.0))
    assert left[48:-48].max() == pytest.approx(abs(2 * h - h**2), abs=0.002)
    assert left.max() < at_the_ends


def test_a_steady_drift_passes_exactly_with_irregular_fixes_and_a_gap():
    """Two segments of one drifter (a 2-day gap between them) in different steady drifts, fixes at random times:
    each segment is a straight line, which no average changes; averaged across the gap, the turn would be rounded."""
    rng = np.random.default_rng(1)
    t = np.sort(np.r_[rng.uniform(0, 3, 60), rng.uniform(5, 8, 60)]) * 86400.0
    after = t > 4 * 86400.0
    lat = np.where(after, 30.0 + 1e-6 * (t - 5 * 86400.0), 30.0 - 1e-6 * t)
    lon = np.where(after, -40.0 + 2e-6 * t, -40.0 + 1e-6 * t)
    fixes = Fixes(np.zeros(len(t), np.int64), t, lon, lat, np.array([7])).low_passed()
    np.testing.assert_allclose(fixes.lat, lat, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fixes.lon, lon, rtol=0, atol=1e-9)
    assert fixes.notes[-1].startswith("low-pass: ")


def test_a_constant_acceleration_passes_whole():
    """x = a t^2 / 2 averaged over centred windows of widths W1 and W2 is x + a (W1^2 + W2^2) / 24 (plus the chords'
    a h^2 / 12 between hourly fixes), a constant the second, twicing pass takes back: the parabola passes, ends too,
    where one pass would leave each fix 216 m off (a = 1e-6 m/s^2, a drifter turning round an eddy)."""
    t = np.arange(0, 10 * 24 + 1) * 3600.0
    a, w1 = 1e-6, 20.0 * 3600.0
    x = 0.5 * a * t**2
    assert a * w1**2 / 24 == pytest.approx(216.0)
    np.testing.assert_allclose(low_pass_series(t, x, w1), x, rtol=0, atol=1e-6)


def test_a_five_day_oscillation_keeps_twice_the_product_of_the_two_sincs_less_its_square():
    """At 35 N a flow varying over 5 days keeps 2 H - H^2 = 0.987 of it, H = sinc(T_inertial / 5 d) sinc(24.84 h /
    5 d) = 0.885 (the module's docstring says 99%): the amplitude of the least-squares sinusoid away from the ends."""
    t = np.arange(0, 30 * 24 + 1) * 3600.0
    w = 2 * np.pi / (5 * 86400.0)
    smooth = low_pass_segment(t, t * 0.0, 35.0 + 0.01 * np.sin(w * t))[1]
    inner = (t > 3 * 86400.0) & (t < t[-1] - 3 * 86400.0)
    design = np.stack([np.sin(w * t), np.cos(w * t), np.ones_like(t)], -1)[inner]
    sin, cos, _ = np.linalg.lstsq(design, (smooth[inner] - 35.0) / 0.01, rcond=None)[0]
    h = np.sinc(inertial_period_s(35.0) * w / (2 * np.pi)) * np.sinc(TIDAL_WINDOW_S * w / (2 * np.pi))
    assert h == pytest.approx(0.885, abs=0.001) and 2 * h - h**2 == pytest.approx(0.987, abs=0.001)
    assert np.hypot(sin, cos) == pytest.approx(2 * h - h**2, abs=0.002) and abs(cos) < 0.002  # no phase shift


def test_longitudes_across_the_dateline_and_missing_positions():
    """A track crossing 180 E is averaged unwrapped, each fix returned on its own side; a fix without a position
    stays one and the averages pass over it."""
    lonlat, drift = loop_track(50.0, 0.15, float(inertial_period_s(50.0)), drift=(0.3, 0.0))
    lon = (lonlat[0] + 179.5 + 180.0) % 360.0 - 180.0  # from 179.5 E across the dateline
    assert lon.min() < -179 and lon.max() > 179
    lat = lonlat[1].copy()
    lat[40] = np.nan
    out_lon, out_lat, note = low_pass(HOURS, lon, lat, [0])
    assert note.startswith("low-pass: ") and "inertial period (15.6 h)" in note and "straight" not in note
    assert np.isnan(out_lat[40]) and np.isfinite(np.delete(out_lat, 40)).all()
    assert np.abs(out_lon).max() < 180.01  # not 360 off
    expected = (drift[0] + 179.5 + 180.0) % 360.0 - 180.0
    error = (out_lon - expected + 180.0) % 360.0 - 180.0
    assert np.abs(np.delete(error, 40)).max() * 111e3 * np.cos(np.radians(50)) < 30  # of a 1.3-km loop


def test_a_segment_shorter_than_the_two_windows_is_its_straight_line_and_said():
    """A day of fixes cannot hold both windows (15.6 h and 24.84 h at 50 N): its positions are the least-squares
    straight line through them, and the note counts such segments."""
    lonlat, _ = loop_track(50.0, 0.15, float(inertial_period_s(50.0)), t=HOURS[:25])
    out_lon, out_lat, note = low_pass(HOURS[:25], *lonlat, [0])
    np.testing.assert_allclose(np.diff(out_lat, 2), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.diff(out_lon, 2), 0.0, atol=1e-12)
    assert note.endswith("; 1 of 1 segment too short for them: a straight line")
