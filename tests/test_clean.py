"""lagda.io.clean: the quality control of drifter fixes, on planted faults with exact counts (numpy only)."""

import dataclasses
import warnings

import numpy as np
import pytest
import xarray as xr

from lagda.io.clean import DUPLICATE_RADIUS_M, MAX_SPEED_M_S, CleanReport, clean_fixes, off_track_mask, spike_mask
from lagda.io.formats import read_tracks
from lagda.io.physical import EARTH_RADIUS_M
from lagda.io.tracks import RawTracks, check_fits_model, id_text

HOUR = 3600.0
T0 = 1.74e9  # seconds since 1970 (2025)
DEG = EARTH_RADIUS_M * np.pi / 180


def _path_m(n: int, speed: float, seed: int, noise_m: float = 100.0, heading: float | None = None) -> np.ndarray:
    """Returns `(n, 2)` metres of an hourly track at `speed` m/s that meanders (heading turning over 2 days)."""
    rng = np.random.default_rng(seed)
    heading = rng.uniform(0, 2 * np.pi) if heading is None else heading
    heading = 0.8 * np.sin(2 * np.pi * np.arange(n) / 48.0) + heading
    steps = speed * HOUR * np.stack([np.cos(heading), np.sin(heading)], axis=-1)
    return np.cumsum(steps, axis=0) + rng.normal(scale=noise_m, size=(n, 2))


def _to(coordinates: str, xy: np.ndarray, lon0: float = 179.5, lat0: float = 40.0) -> np.ndarray:
    """Returns metres `xy` as lon/lat near (lon0, lat0), longitudes in [-180, 180), or unchanged for 'projected'."""
    if coordinates == "projected":
        return xy.copy()
    lon = lon0 + xy[:, 0] / (DEG * np.cos(np.deg2rad(lat0)))
    return np.stack([(lon + 180) % 360 - 180, lat0 + xy[:, 1] / DEG], axis=-1)


def _raw(times, positions, coordinates="lonlat", ids=None, **per_fix) -> RawTracks:
    ids = np.arange(len(times)) if ids is None else np.asarray(ids)
    return RawTracks(list(times), list(positions), ids, None, coordinates, True, per_fix=per_fix)


@pytest.mark.parametrize("coordinates", ["lonlat", "projected"])
def test_spikes_50_km_off_are_dropped_and_a_2_m_s_jet_is_kept(coordinates):
    n = 240
    hours = T0 + HOUR * np.arange(n)
    jet = _path_m(n, 2.0, seed=1, heading=0.0)  # eastward across the dateline in lon/lat
    slow = [_path_m(n, 0.3, seed=s) for s in (2, 3)]
    planted = {1: [0, 17, 60, 61 + 40, 180, n - 1], 2: [5, 9, 120]}  # isolated fixes, at least 3 apart, ends too
    rng = np.random.default_rng(7)
    tracks = [jet.copy(), slow[0].copy(), slow[1].copy()]
    for i, rows in planted.items():
        angle = rng.uniform(0, 2 * np.pi, len(rows))
        tracks[i][rows] += 50e3 * np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    jet_spiked = jet.copy()
    jet_spiked[[30, 90]] += [[50e3, 0.0], [0.0, -50e3]]  # along and across a 2 m/s jet
    tracks.append(jet_spiked)
    raw = _raw([hours] * 4, [_to(coordinates, p) for p in tracks], coordinates)
    assert np.ptp(raw.positions[0][:, 0]) > 300 or coordinates == "projected"  # wrapped across 180
    cleaned, report = clean_fixes(raw)
    assert report.spikes_dropped == 6 + 3 + 2 and report.fixes_kept == 4 * n - 11
    assert len(cleaned.times[0]) == n  # the jet keeps every fix
    for i, rows in {**planted, 3: [30, 90]}.items():
        np.testing.assert_array_equal(cleaned.times[i], np.delete(hours, rows))
        np.testing.assert_array_equal(cleaned.positions[i], np.delete(raw.positions[i], rows, axis=0))
    assert any("11 position spikes dropped" in line for line in report.notes())
    assert clean_fixes(cleaned)[1].spikes_dropped == 0  # idempotent


def test_spike_rule_needs_both_hops_fast_and_off_the_line():
    t = HOUR * np.arange(21.0)
    line = np.stack([np.arange(21.0) * 10e3, np.zeros(21)], axis=-1)  # 10 km/h = 2.8 m/s: under the bound
    assert not spike_mask(t, line, "projected").any()
    fast = line * (MAX_SPEED_M_S * 2 * HOUR / 10e3)  # a straight line at 6 m/s: fast, but on its neighbours' line
    assert not spike_mask(t, fast, "projected").any()
    step = line.copy()
    step[10:] += [0.0, 40e3]  # a jump that stays: one fast hop, no isolated fix
    assert not spike_mask(t, step, "projected").any()
    off = line.copy()
    off[10] += [0.0, 40e3]
    assert np.flatnonzero(spike_mask(t, off, "projected")).tolist() == [10]
    off[10] += [0.0, -40e3 + 0.4 * 10e3]  # fast hops, but within 0.4 of a hop of the line: kept
    off[10, 0] += 30e3
    assert not spike_mask(t, off, "projected").any()


def _looping_m(t: np.ndarray, lat: float = 45.0) -> np.ndarray:
    """Returns `(n, 2)` metres at times `t`: a 0.1 m/s drift, a 10 km eddy at 0.8 m/s and a 0.15 m/s inertial loop."""
    f = 2 * 7.292e-5 * np.sin(np.deg2rad(lat))
    eddy, inertial = 0.8 / 10e3, 0.15 / f
    return np.stack([0.1 * t + 10e3 * np.cos(eddy * t) + inertial * np.sin(f * t),
                     10e3 * np.sin(eddy * t) + inertial * np.cos(f * t)], axis=-1)


@pytest.mark.parametrize("coordinates", ["lonlat", "projected"])
def test_fixes_a_few_km_off_an_hourly_track_are_dropped_and_nothing_else(coordinates):
    n = 600
    hours = HOUR * np.arange(n)
    rng = np.random.default_rng(3)
    tracks = [_path_m(n, 0.3, seed=8, noise_m=20.0), _looping_m(hours) + rng.normal(scale=20.0, size=(n, 2))]
    planted = {0: [2, 40, 43, 300, n - 3], 1: [10, 11, 200, 450]}  # alone, 3 apart, side by side, near the ends
    spiked = [p.copy() for p in tracks]
    for i, rows in planted.items():
        angle, km = rng.uniform(0, 2 * np.pi, len(rows)), rng.uniform(3, 8, len(rows))
        spiked[i][rows] += 1e3 * km[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    raw = _raw([T0 + hours] * 4, [_to(coordinates, p, lon0=-30.0) for p in spiked + tracks], coordinates)
    cleaned, report = clean_fixes(raw)
    assert report.spikes_dropped == 0  # hops of 1-2 m/s: under the spike rule's bound
    assert report.off_track_dropped == 9 and report.fixes_kept == 4 * n - 9
    for i, rows in planted.items():
        np.testing.assert_array_equal(cleaned.times[i], np.delete(T0 + hours, rows))
    assert [len(t) for t in cleaned.times[2:]] == [n, n]  # the same tracks unspiked keep every fix
    assert any("9 fixes off their track dropped" in line for line in report.notes())
    assert clean_fixes(cleaned)[1].off_track_dropped == 0  # idempotent


def test_off_track_rule_keeps_what_a_cubic_follows_noise_and_fixes_too_sparse_to_judge():
    rng = np.random.default_rng(4)
    hours = HOUR * np.arange(2000.0)
    s = hours / 86400.0
    cubic = np.stack([3e3 * s**3 - 40e3 * s**2, -2e3 * s**3], axis=-1)  # accelerating to 150 m/s: exact for a cubic
    assert not off_track_mask(hours, cubic, "projected").any()
    noise = rng.normal(scale=300.0, size=(len(hours), 2))  # 300 m white noise on a straight drift: the median
    drift = np.stack([0.2 * hours, 0.0 * hours], axis=-1) + noise  # sets the scale; 6 stds are 1.8 km
    assert not off_track_mask(hours, drift, "projected").any()
    drift[[500, 1200]] += [[0.0, 3e3], [-3.5e3, 0.0]]  # 3 km in standard units 3e3 / 1.39 = 7.2 stds
    assert np.flatnonzero(off_track_mask(hours, drift, "projected")).tolist() == [500, 1200]
    six_hourly = 6 * HOUR * np.arange(240.0)  # the loops aliased: every fix misses the cubic by kilometres
    loops = _looping_m(six_hourly) + rng.normal(scale=20.0, size=(240, 2))
    loops[[60, 150]] += [[4e3, 0.0], [0.0, 6e3]]
    assert not off_track_mask(six_hourly, loops, "projected").any()
    gap = np.concatenate([hours[:50], hours[50:100] + 3 * 86400.0])  # 3 days missing between fixes 49 and 50
    line = np.stack([0.2 * gap, np.zeros(100)], axis=-1)
    line[[49, 50, 51]] += [0.0, 5e3]  # beside the gap: their neighbours span days, not judged
    line[20] += [0.0, 5e3]
    assert np.flatnonzero(off_track_mask(gap, line, "projected")).tolist() == [20]


@pytest.mark.parametrize("coordinates", ["lonlat", "projected"])
def test_a_fill_position_written_two_or_three_times_in_a_row_is_one_spike(coordinates):
    n = 120
    hours = T0 + HOUR * np.arange(n)
    path = _to(coordinates, _path_m(n, 0.3, seed=5), lon0=-35.0, lat0=35.0)
    fill = np.array([0.0, 0.0]) if coordinates == "lonlat" else np.array([-4e6, 2e6])  # null island, far away
    planted = [[40, 41], [70, 71, 72], [0, 1], [n - 3, n - 2, n - 1], [100]]  # in the middle, at the ends, alone
    tracks = path.copy()
    for rows in planted:
        tracks[rows] = fill
    cleaned, report = clean_fixes(_raw([hours, hours], [tracks, path], coordinates))
    dropped = sorted(sum(planted, []))
    assert report.spikes_dropped == len(dropped) == 11
    np.testing.assert_array_equal(cleaned.times[0], np.delete(hours, dropped))
    assert len(cleaned.times[1]) == n  # the same track without them keeps every fix
    assert any("up to 3 in a row" in line for line in report.notes())
    four = path.copy()
    four[50:54] = fill  # longer than SPIKE_RUN: not judged a spike (a track may truly jump and stay)
    assert not spike_mask(hours, four, coordinates)[50:54].any()


def test_positions_off_the_sphere_are_fill_values_dropped_and_counted():
    t = T0 + HOUR * np.arange(30.0)
    p = _to("lonlat", _path_m(30, 0.3, seed=6), lon0=-40.0)
    p[[3, 20]] = [[-999.0, 35.0], [-40.0, 9999.0]]
    p[25, 0] += 360.0  # the same place written 0..360: kept
    cleaned, report = clean_fixes(_raw([t], [p]))
    assert report.impossible_positions_dropped == 2 and report.spikes_dropped == 0
    np.testing.assert_array_equal(cleaned.times[0], np.delete(t, [3, 20]))
    assert any("2 fixes at no place on the sphere" in line for line in report.notes())
    model = clean_fixes(_raw([t], [p], "projected"))[1]  # metres: no such bound
    assert model.impossible_positions_dropped == 0


def test_duplicates_conflicts_and_unsorted_times_exact_counts():
    t = T0 + HOUR * np.arange(10.0)
    p = _to("lonlat", _path_m(10, 0.3, seed=4), lon0=-40.0)
    north = lambda metres: np.array([0.0, metres / DEG])
    times = np.concatenate([t, [t[3], t[5], t[7]]])  # an exact duplicate, a close and a far conflict: unsorted
    positions = np.concatenate([p, [p[3], p[5] + north(100.0), p[7] + north(2000.0)]])
    ids = np.array([300234060000000, 300234060000001], np.int64)
    raw = _raw([times, t[::-1]], [positions, p[::-1]], ids=ids)
    cleaned, report = clean_fixes(raw)
    assert (report.exact_duplicates_dropped, report.trajectories_sorted) == (1, 2)
    assert (report.conflicts_averaged, report.conflicts_dropped, report.conflict_fixes_dropped) == (1, 1, 2)
    np.testing.assert_array_equal(cleaned.times[0], np.delete(t, 7))
    expected = np.delete(p, 7, axis=0)
    expected[5] = p[5] + north(50.0)  # the mean of the two close fixes
    np.testing.assert_allclose(cleaned.positions[0], expected, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(cleaned.times[1], t)
    np.testing.assert_array_equal(cleaned.positions[1], p)
    assert raw.times[1][0] > raw.times[1][1]  # the input is left as it was
    assert 100.0 < DUPLICATE_RADIUS_M < 2000.0
    notes = report.notes()
    assert len(notes) == 4 and any("1 exact duplicate" in line for line in notes)
    assert any("averaged" in line for line in notes) and any("(2 fixes)" in line for line in notes)
    attrs = report.attrs()
    assert attrs["clean_exact_duplicates_dropped"] == 1 and attrs["clean_conflicts_dropped"] == 1
    assert "clean_location_gps" not in attrs and attrs["clean_spike_rule"] == 1
    assert id_text(ids[0]) == "300234060000000" and id_text(np.str_("a")) == "a"


def test_undrogued_fixes_dropped_by_default_kept_when_asked():
    t = T0 + HOUR * np.arange(12.0)
    p = _to("lonlat", _path_m(12, 0.3, seed=5), lon0=10.0)
    drogue = np.ones(12, np.int8)
    drogue[5:] = 0  # lost its drogue at the sixth fix
    raw = _raw([t, t, t], [p, p, p], ids=["a", "b", "c"],
               drogue_status=[drogue, np.ones(12, np.int8), np.zeros(12, np.int8)])
    cleaned, report = clean_fixes(raw)
    assert report.undrogued_dropped == 7 + 12 and report.trajectories_emptied == 1
    assert cleaned.ids.tolist() == ["a", "b"] and len(cleaned.times[0]) == 5 and len(cleaned.times[1]) == 12
    assert [len(d) for d in cleaned.per_fix["drogue_status"]] == [5, 12]
    kept, report = clean_fixes(raw, keep_undrogued=True)
    assert report.undrogued_kept == 19 and report.undrogued_dropped == 0 and len(kept.ids) == 3
    assert CleanReport().notes() == ()


def _gdp_file(path, feature_type=True):
    """Writes a clouddrift GDP-hourly-style ragged file (no CF ragged attributes) with planted faults.

    Returns the expected counts.
    """
    n = [30, 40, 25]
    ids = np.array([300234060000000, 300234060000001, 300234060000002], np.int64)
    t, lon, lat, drogue, err = [], [], [], [], []
    for i, k in enumerate(n):
        xy = _to("lonlat", _path_m(k, 0.4, seed=10 + i), lon0=-30.0 + i, lat0=35.0)
        times = T0 + HOUR * np.arange(k)
        d = np.ones(k, np.int8)
        if i == 1:
            d[-6:] = 0  # 6 undrogued fixes
            times[[10, 11]] = times[[11, 10]]  # unsorted
            xy[[10, 11]] = xy[[11, 10]]
            xy[20] += [0.5, 0.0]  # a spike ~40 km off
        t.append(times)
        lon.append(xy[:, 0])
        lat.append(xy[:, 1])
        drogue.append(d)
        err.append(np.full(k, 1e-3))
    t[0] = np.insert(t[0], 5, t[0][4])  # an exact duplicate
    lon[0], lat[0] = np.insert(lon[0], 5, lon[0][4]), np.insert(lat[0], 5, lat[0][4])
    drogue[0], err[0] = np.insert(drogue[0], 5, 1), np.insert(err[0], 5, 1e-3)
    err[2][3] = -1e34  # a fill value: unknown
    cat = np.concatenate
    rowsize = np.array([len(a) for a in t], np.int64)
    ds = xr.Dataset(
        {"rowsize": ("traj", rowsize), "location_type": ("traj", np.array([1, 0, 1], np.int8)),
         "lon": ("obs", cat(lon), {"units": "degrees_east"}), "lat": ("obs", cat(lat), {"units": "degrees_north"}),
         "ve": ("obs", np.zeros(rowsize.sum())), "vn": ("obs", np.zeros(rowsize.sum())),
         "err_lat": ("obs", cat(err)), "err_lon": ("obs", cat(err)),
         "err_ve": ("obs", np.full(rowsize.sum(), 0.02)), "err_vn": ("obs", np.full(rowsize.sum(), 0.02)),
         "drogue_status": ("obs", cat(drogue))},
        coords={"id": ("traj", ids), "time": ("obs", cat(t), {"units": "seconds since 1970-01-01 00:00:00"})},
        attrs={"featureType": "trajectory"} if feature_type else {})
    ds.to_netcdf(path)
    return ids


@pytest.mark.parametrize("feature_type", [True, False])
def test_clouddrift_gdp_file_with_featuretype_and_no_ragged_attributes_is_read_and_cleaned(tmp_path, feature_type):
    ids = _gdp_file(tmp_path / "gdp.nc", feature_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracks = read_tracks(tmp_path / "gdp.nc")
    assert any("assumed a contiguous ragged array" in str(w.message) and "rowsize(traj)" in str(w.message)
               for w in caught)
    report = tracks.clean
    assert (report.exact_duplicates_dropped, report.trajectories_sorted, report.spikes_dropped) == (1, 1, 1)
    assert report.undrogued_dropped == 6 and report.fixes_read == 96 and report.fixes_kept == 96 - 8
    assert (report.location_gps, report.location_argos) == (30 + 25, 40 - 6 - 1)
    assert tracks.trajectory_id.tolist() == ids.tolist()
    assert np.sum(np.isfinite(tracks.times), axis=1).tolist() == [30, 40 - 7, 25]
    # err_lat = err_lon = 1e-3 degrees: per component sqrt((1 + cos^2 lat) / 2) * 1e-3 degrees in metres
    std = tracks.position_std_m
    assert std.shape == tracks.times.shape and np.isnan(std[2, 3]) and np.sum(np.isnan(std[2, :25])) == 1
    lat = np.deg2rad(tracks.mapping.from_model(tracks.positions[0, :, 0], tracks.positions[0, :, 1])[1])
    np.testing.assert_allclose(std[0, :30], 1e-3 * DEG * np.sqrt(0.5 * (1 + np.cos(lat[:30]) ** 2)), rtol=1e-12)
    np.testing.assert_allclose(tracks.velocity_std_m_s[np.isfinite(tracks.times)], 0.02)
    assert any(note.startswith("clean: position error") for note in tracks.notes)
    assert report.attrs()["clean_undrogued_dropped"] == 6
    assert tracks.for_field(0).position_std_m.shape == std.shape
    kept = read_tracks(tmp_path / "gdp.nc", keep_undrogued=True)
    assert kept.clean.undrogued_kept == 6 and np.sum(np.isfinite(kept.times[1])) == 39


def test_model_unit_csv_with_duplicated_and_unsorted_times_is_read(tmp_path):
    rows = ["id,time,x,y", "a,0.2,0.3,0.3", "a,0.1,0.2,0.2", "a,0.3,0.4,0.4", "a,0.3,0.4,0.4", "a,0.4,0.5,0.5",
            "a,0.4,0.6,0.5", "a,0.5,0.6,0.6"]
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    tracks = read_tracks(tmp_path / "m.csv")
    np.testing.assert_allclose(tracks.times[0], [0.1, 0.2, 0.3, 0.5])
    c = tracks.clean
    assert (c.exact_duplicates_dropped, c.trajectories_sorted, c.conflicts_dropped, c.spike_rule) == (1, 1, 1, False)
    assert any("in model units dropped" in note for note in tracks.notes)


def test_gap_and_missing_lines_are_one_summary_each_with_the_file_ids(tmp_path):
    _gdp_file(tmp_path / "gdp.nc")
    tracks = read_tracks(tmp_path / "gdp.nc", keep_undrogued=True)
    times, positions = tracks.times.copy(), tracks.positions.copy()
    hour = HOUR / tracks.mapping.time_scale_s
    for i in range(3):  # a 31 h gap in drifter 2, 5 h in the others
        times[i, 12:] += (30 if i == 2 else 4) * hour
        positions[i, 5] = np.nan
    lines = check_fits_model(dataclasses.replace(tracks, times=times, positions=positions), hour)
    assert len(lines) == 4 and lines[:3] == [f"trajectory 30023406000000{i}: 1 missing position" for i in range(3)]
    assert lines[3] == ("gaps: 3 of 3 drifters have steps over 1.5x their median step (those drifters' median step "
                        "1 h); largest 31 h (drifter 300234060000002)")


def test_a_subset_of_an_archive_is_cleaned_from_its_dataset(tmp_path):
    from lagda.io.readers.cf_dataset import raw_from_dataset

    _gdp_file(tmp_path / "gdp.nc")
    with xr.open_dataset(tmp_path / "gdp.nc", decode_times=False) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = raw_from_dataset(ds.isel(traj=[1], obs=slice(31, 71)), "subset")  # drifter 1's rows
    assert raw.ids.tolist() == [300234060000001] and len(raw.times[0]) == 40 and "drogue_status" in raw.per_fix
    cleaned, report = clean_fixes(raw)
    assert (report.trajectories_sorted, report.spikes_dropped, report.undrogued_dropped) == (1, 1, 6)


@pytest.mark.parametrize("coordinates", ["lonlat", "model"])
def test_a_physical_trajectory_left_with_two_fixes_is_dropped_and_counted(coordinates):
    # a drifter that only passes through the box (2 fixes there) gives no velocity: physical files drop it with a
    # count; lagda's own model-unit files keep every trajectory (check_fits_model judges them)
    hours = T0 + HOUR * np.arange(48)
    good = _to("lonlat", _path_m(48, 0.3, seed=4))
    short_t, short_p = hours[:2], good[:2] + 0.5
    dup_t = np.array([hours[0], hours[0], hours[1], hours[2]])  # 4 fixes, one an exact duplicate: 3 kept
    dup_p = np.stack([good[0], good[0], good[1], good[2]]) + 1.0
    raw = _raw([hours, short_t, dup_t], [good, short_p, dup_p], coordinates, ids=[7, 8, 9])
    cleaned, report = clean_fixes(raw)
    if coordinates == "lonlat":
        assert list(cleaned.ids) == [7, 9] and report.short_trajectories_dropped == 1
        assert report.short_trajectory_fixes_dropped == 2 and report.fixes_kept == 48 + 3
        assert any("1 trajectory with fewer than 3 fixes dropped (2 fixes)" in line for line in report.notes())
        assert report.attrs()["clean_short_trajectories_dropped"] == 1
    else:
        assert list(cleaned.ids) == [7, 8, 9] and report.short_trajectories_dropped == 0


def test_a_padded_arrays_slots_are_no_fixes_without_a_time():
    """A (trajectory, obs) file pads its shorter tracks with NaN past their last fix: those slots are not counted as
    fixes without a time; a missing time between two fixes is."""
    hours = T0 + HOUR * np.arange(48)
    good = _to("lonlat", _path_m(48, 0.3, seed=6))
    padded_t, padded_p = np.append(hours[:40], np.full(8, np.nan)), np.vstack([good[:40], np.full((8, 2), np.nan)])
    padded_t[10] = np.nan
    cleaned, report = clean_fixes(_raw([hours, padded_t], [good, padded_p]))
    assert report.missing_times_dropped == 1 and len(cleaned.times[1]) == 39


def test_a_trajectory_without_a_position_is_dropped_and_counted():
    """Every fix of a drifter flagged bad (its positions read as missing, its times kept): no track is left of it,
    where check_fits_model refused the whole file ("no valid observation"); one with two positions left is short."""
    hours = T0 + HOUR * np.arange(48)
    good = _to("lonlat", _path_m(48, 0.3, seed=5))
    two = good.copy()
    two[2:] = np.nan
    cleaned, report = clean_fixes(_raw([hours, hours, hours], [good, np.full((48, 2), np.nan), two], ids=[1, 2, 3]))
    assert list(cleaned.ids) == [1] and report.trajectories_emptied == 1 and report.short_trajectories_dropped == 1
    assert report.notes()[-2].startswith("clean: 1 trajectory left without a located fix dropped")


def test_lone_end_fixes_far_in_time_are_dropped_and_counted():
    """A fix dated 1970 and one 30 days after the rest of an hourly track give no velocity and would stretch the
    track's window over decades: both dropped and counted; a 3-day gap at an end, and any gap inside, are kept."""
    hours = 3600.0 * np.arange(48)
    start = 1.7e9
    lon, lat = -40.0 + 1e-3 * np.arange(50), np.full(50, 34.0)
    wrong = np.concatenate([[0.0], start + hours, [start + hours[-1] + 30 * 86400.0]])
    gap = np.concatenate([start + hours, start + hours[-1] + np.array([3 * 86400.0, 3 * 86400.0 + 3600])])
    raw = RawTracks([wrong, gap], [np.stack([lon, lat], -1)] * 2, np.array([1, 2]), None, "lonlat", True)
    cleaned, report = clean_fixes(raw)
    assert report.lone_fixes_dropped == 2 and len(cleaned.times[0]) == 48 and len(cleaned.times[1]) == 50
    assert cleaned.times[0][0] == start and any("2 lone fixes dropped" in line for line in report.notes())


@pytest.mark.parametrize("coordinates", ["lonlat", "projected"])
def test_a_drifter_carried_on_a_ship_then_ashore_is_dropped_and_a_fast_jet_and_a_slow_drift_are_kept(coordinates):
    """A drifter picked up (six hourly hops at 4.7 m/s along a straight line: no spike), then held in a harbour for
    8 days (50 m noise): the carried fixes and (in longitude/latitude) the days ashore are dropped and counted, the
    drift before them kept.
    A jet at 2.5 m/s (no hop over the bound) and a drift of 0.02 m/s for 10 days (no 4-day stretch within 200 m)
    keep every fix, and so does a drifter held within 200 m for 3 days (a stagnation point of a model ocean)."""
    rng = np.random.default_rng(4)
    hours = T0 + HOUR * np.arange(240)
    drift = _path_m(40, 0.2, seed=5, noise_m=50.0)
    ship = drift[-1] + 4.7 * HOUR * np.arange(1, 7)[:, None] * [np.cos(0.3), np.sin(0.3)]
    harbour = ship[-1] + rng.normal(scale=50.0, size=(192, 2))
    picked = np.concatenate([drift, ship, harbour])
    jet, slow = _path_m(240, 2.5, seed=6, noise_m=50.0, heading=0.0), _path_m(240, 0.02, seed=7, noise_m=20.0)
    still = _path_m(240, 0.2, seed=8, noise_m=50.0)
    still[100:172] = still[100] + rng.normal(scale=30.0, size=(72, 2))
    raw = _raw([hours[:len(picked)], hours, hours, hours], [_to(coordinates, p) for p in (picked, jet, slow, still)],
               coordinates)
    cleaned, report = clean_fixes(raw)
    assert report.spikes_dropped == 0
    assert report.carried_dropped == 5  # the fixes on deck, each reached and left at 4.7 m/s
    notes = "\n".join(report.notes())
    assert "5 fixes carried dropped" in notes
    if coordinates == "lonlat":  # the last fix on deck (the harbour's place) and 8 days there
        assert report.aground_dropped == 193 and "193 fixes aground dropped" in notes
        np.testing.assert_array_equal(cleaned.times[0], hours[:40])
    else:  # metres: a flow's stagnation line may hold a drifter still
        assert report.aground_dropped == 0
        np.testing.assert_array_equal(cleaned.times[0], np.delete(hours[:len(picked)], np.arange(40, 45)))
    assert len(cleaned.times[1]) == len(cleaned.times[2]) == len(cleaned.times[3]) == 240
