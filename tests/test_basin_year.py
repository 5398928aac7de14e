"""The basin-year benchmark's pieces on tiny cases: scores against closed forms, the GDP archive, the baselines."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy.special import erf

from experiments.basin.archive import ArchiveConfig, make_archive, to_gdp_dataset
from experiments.basin.methods import (
    Tiling,
    binned_means,
    crop_to_truth,
    fd_velocities,
    gp_tiles,
    score_map,
    score_on_own_cells,
    seam_mask,
)
from experiments.basin.ocean import OceanConfig, lonlat_to_plane, plane_to_lonlat, truth_on_grid

TIMES = np.datetime64("2001-01-01", "ns") + np.arange(20) * np.timedelta64(1, "D")
LON = -35.0 + 0.5 * (np.arange(20) + 0.5)
LAT = 25.0 + 0.5 * (np.arange(20) + 0.5)
TILING = Tiling(tile_size_deg=5.0, halo_deg=1.0, window_days=10.0, window_step_days=5.0)


def _frame(**data):
    return xr.Dataset({k: (("time", "lat", "lon"), v) for k, v in data.items()},
                      coords={"time": TIMES, "lat": LAT, "lon": LON})


def test_score_map_matches_closed_forms():
    rng = np.random.default_rng(0)
    shape = (TIMES.size, LAT.size, LON.size)
    truth = _frame(u=np.ones(shape), v=np.zeros(shape))
    seam = np.broadcast_to(seam_mask(LON, LAT, TILING), shape)
    sigma = np.where(seam, 0.2, 0.1)  # twice the noise within a halo of the interior edges
    n_fixes = np.ones(shape, np.int64)
    n_fixes[:, :, :2] = 0  # uninformed cells, given a huge error that must not count
    noise_u, noise_v = sigma * rng.standard_normal(shape), sigma * rng.standard_normal(shape)
    u, v = 1.0 + noise_u + np.where(n_fixes == 0, 50.0, 0.0), noise_v
    for c in (1.0, 0.6):
        store = _frame(u=u, v=v, u_std=c * sigma, v_std=c * sigma, n_fixes=n_fixes)
        store.attrs.update({f: getattr(TILING, f) for f in ("tile_size_deg", "halo_deg", "window_days",
                                                             "window_step_days")})
        score = score_map(store, truth)
        n = int((n_fixes > 0).sum())
        assert score["cells"] == n
        expected = erf(1.96 * c / np.sqrt(2))
        assert abs(score["coverage"] - expected) < 4 * np.sqrt(expected * (1 - expected) / (2 * n))
    informed = n_fixes > 0
    rms = np.sqrt(np.mean(2 * sigma[informed] ** 2))  # E|e|^2 = 2 sigma^2 per cell, |truth| = 1
    assert score["error"] == pytest.approx(rms, rel=0.03)
    assert score["seam_ratio"] == pytest.approx(2.0, rel=0.05)


def test_a_map_wider_and_longer_than_the_truth_is_scored_on_the_truths_cells_and_days():
    """A map made without --region or --period covers the archive's extent: cropped to the truth's grid it scores
    as the same map made on that grid; a map that misses truth cells is refused."""
    shape = (TIMES.size, LAT.size, LON.size)
    rng = np.random.default_rng(1)
    truth = _frame(u=rng.normal(size=shape), v=rng.normal(size=shape))
    fields = {k: rng.normal(size=shape) for k in ("u", "v")} | {"u_std": np.ones(shape), "v_std": np.ones(shape),
                                                                "n_fixes": np.ones(shape, np.int64)}
    on_grid = _frame(**fields)
    wide = on_grid.pad(lon=(3, 2), lat=(1, 4), time=(0, 2), constant_values=7.0)  # more cells and days
    wide = wide.assign_coords(lon=-35.0 + 0.5 * (np.arange(-3, 22) + 0.5), lat=25.0 + 0.5 * (np.arange(-1, 24) + 0.5),
                              time=np.datetime64("2001-01-01", "ns") + np.arange(22) * np.timedelta64(1, "D"))
    cropped, note = crop_to_truth(wide, truth)
    xr.testing.assert_identical(cropped, on_grid)
    assert note == "scored on the truth's grid: 20 of its 25 lon cells, 20 of its 25 lat cells, 20 of its 22 days"
    same, note = crop_to_truth(on_grid, truth)
    assert note == ""
    xr.testing.assert_identical(same, on_grid)
    with pytest.raises(ValueError, match="do not hold the truth's"):
        crop_to_truth(on_grid.isel(lon=slice(1, None)), truth)


def test_seam_mask_counts_cells_within_a_halo_of_interior_edges():
    mask = seam_mask(LON, LAT, TILING)  # 10 degrees, 5-degree tiles: one interior edge per axis, at 5 degrees
    columns = np.abs(LON - (-30.0)) < 1.0  # centres 0.25 and 0.75 degree from it, either side
    assert columns.sum() == 4
    assert mask.sum() == 4 * 20 + 4 * 20 - 16
    assert not seam_mask(LON, LAT, Tiling(10.0, 1.0, 10.0, 5.0)).any()


def test_windows_cover_the_period():
    assert TILING.windows(19.0).tolist() == [0.0, 5.0, 9.0]
    assert Tiling(5.0, 1.0, 30.0, 10.0).windows(10.0).tolist() == [0.0]


def _constant_track_archive(u0=0.2, v0=-0.1, n=48, planted=True):
    """A ragged archive of two drifters moving at (u0, v0) m/s from (-30, 30) and (-28, 32), hourly, with a
    duplicated time, a spike and an undrogued tail planted in the first (when `planted`)."""
    R = 6_371_008.8
    t = TIMES[0] + np.arange(n) * np.timedelta64(3600, "s")
    rows = {k: [] for k in ("time", "lon", "lat", "drogue_status")}
    for lon0, lat0 in ((-30.0, 30.0), (-28.0, 32.0)):
        lat = lat0 + np.rad2deg(v0 * 3600.0 * np.arange(n) / R)
        # eastward at u0 on the sphere: dlon/dt = u0 / (R cos lat), integrated exactly in lat
        dlon = np.concatenate([[0.0], np.cumsum(u0 * 3600.0 / (R * np.cos(np.deg2rad(0.5 * (lat[1:] + lat[:-1])))))])
        rows["time"].append(t)
        rows["lon"].append(lon0 + np.rad2deg(dlon))
        rows["lat"].append(lat)
        rows["drogue_status"].append(np.ones(n, np.int8))
    if planted:
        rows["lat"][0][10] += 0.45  # a spike of 50 km
        rows["drogue_status"][0][40:] = 0  # 8 undrogued fixes
        for k in rows:  # fix 20 of the first drifter repeated
            rows[k][0] = np.insert(rows[k][0], 21, rows[k][0][20])
    rowsize = np.array([len(r) for r in rows["time"]])
    data = {k: ("obs", np.concatenate(v)) for k, v in rows.items()}
    data["rowsize"] = ("traj", rowsize)
    return xr.Dataset(data), rowsize


def test_fd_velocities_quality_control_and_exact_velocity():
    archive, rowsize = _constant_track_archive()
    fixes, counts = fd_velocities(archive)
    assert counts["duplicate_times"] == 1 and counts["undrogued"] == 8 and counts["spikes"] == 1
    # every fix kept but the ends of each drifter; the spike's neighbours lose their centred difference
    assert counts["velocities"] == (48 - 8 - 1 - 2) + (48 - 2)
    far = np.abs(fixes["time"] - (TIMES[0].astype(np.int64) / 1e9 + 10 * 3600.0)) > 2 * 3600.0
    np.testing.assert_allclose(fixes["u"][far], 0.2, rtol=1e-4)
    np.testing.assert_allclose(fixes["v"][far], -0.1, rtol=1e-9)


def test_binned_means_average_within_bins_and_windows():
    t0 = TIMES[0].astype(np.int64) / 1e9
    fixes = {"time": t0 + 86400.0 * np.array([0.0, 0.2, 0.0, 3.0]), "lon": np.array([-34.9, -34.1, -33.9, -34.9]),
             "lat": np.array([25.1, 25.9, 25.1, 25.1]), "u": np.array([1.0, 3.0, 5.0, 7.0]),
             "v": np.array([0.0, 1.0, 2.0, 3.0])}
    daily = binned_means(fixes, LON, LAT, TIMES, bin_deg=1.0)
    assert float(daily["u"][0, 0, 0]) == 2.0 and float(daily["u"][0, 1, 1]) == 2.0  # the whole bin has the mean
    assert float(daily["u"][0, 0, 2]) == 5.0 and int(daily["n"][0, 0, 0]) == 2
    assert np.isnan(daily["u"][1, 0, 0]) and float(daily["u"][3, 0, 0]) == 7.0
    window = binned_means(fixes, LON, LAT, TIMES, bin_deg=1.0, window_days=5)  # days k - 2 .. k + 2
    assert float(window["u"][1, 0, 0]) == pytest.approx((1 + 3 + 7) / 3)
    assert float(window["u"][0, 0, 0]) == 2.0 and float(window["u"][5, 0, 0]) == 7.0
    assert np.isnan(window["u"][6, 0, 0])


def test_gp_tiles_map_a_uniform_current():
    rng = np.random.default_rng(3)
    n = 3000
    t0 = TIMES[0].astype(np.int64) / 1e9
    fixes = {"time": t0 + rng.uniform(0, 19, n) * 86400.0, "lon": rng.uniform(-36, -24, n),
             "lat": rng.uniform(24, 36, n)}
    fixes["u"] = 0.2 + 0.01 * rng.standard_normal(n)
    fixes["v"] = -0.1 + 0.01 * rng.standard_normal(n)
    gp = gp_tiles(fixes, LON, LAT, TIMES, TILING, n_sub=120, fit_tiles=2, fit_n=100, log=lambda *_: None)
    assert np.isfinite(gp["u"]).all() and np.isfinite(gp["v_std"]).all()
    np.testing.assert_allclose(gp["u"], 0.2, atol=0.01)
    np.testing.assert_allclose(gp["v"], -0.1, atol=0.01)
    truth = _frame(u=np.full(gp["u"].shape, 0.2), v=np.full(gp["u"].shape, -0.1))
    score = score_on_own_cells(gp, None, truth)
    assert score["cells"] == gp["u"].size and score["error"] < 0.05


def test_truth_on_grid_interpolates_a_fourier_mode_exactly():
    cfg = OceanConfig(nx=16, L=1.4e6)
    cell = (np.arange(16) + 0.5) * cfg.L / 16
    mode = lambda x, y: np.cos(2 * np.pi * (2 * x / cfg.L + 1 * y / cfg.L) + 0.3)
    grid = mode(cell[None, :], cell[:, None])[None]
    truth = truth_on_grid(cfg, 0.5 * grid, grid, LON, LAT, TIMES[:1])
    x, y = lonlat_to_plane(cfg, LON[None, :], LAT[:, None])
    np.testing.assert_allclose(truth["v"][0], mode(x, y), atol=1e-5)
    scale = np.cos(np.deg2rad(LAT))[:, None] / np.cos(np.deg2rad(30.0))
    np.testing.assert_allclose(truth["u"][0], 0.5 * scale * mode(x, y), atol=1e-5)
    lon, lat = plane_to_lonlat(cfg, x, y)
    np.testing.assert_allclose(lon, np.broadcast_to(LON[None, :], lon.shape), atol=1e-9)


def test_archive_is_a_gdp_ragged_file_that_lagda_reads(tmp_path):
    from lagda.io.formats import read_tracks

    cfg = OceanConfig(nx=16, L=1.4e6)
    steps = 24 * 12 + 1
    t = np.arange(steps)[None, :, None]
    start = np.array([[0.6e6, 0.7e6], [0.7e6, 0.2e6], [1.3e6, 0.7e6]])[:, None, :]
    velocity = np.array([[0.0, 0.3], [0.1, 0.0], [0.4, 0.0]])[:, None, :]  # the third crosses the east edge
    positions = start + velocity * 3600.0 * t
    clean = ArchiveConfig(release_days=0.01, min_life_days=11.99, missing=0.0, gaps_per_30d=0.0, spike_rate=0.0,
                          duplicate_rate=0.0, undrogued=0.0)
    rows, stats = make_archive(cfg, clean, positions, 3600.0, TIMES[0])
    assert stats["edge_splits"] == 1 and stats["trajectories"] == 4
    path = tmp_path / "archive.nc"
    ds = to_gdp_dataset(rows, deploy=False)
    assert not any(k.startswith("lagda") for k in ds.attrs)
    assert set(ds.dims) == {"traj", "obs"} and int(ds["rowsize"].sum()) == ds.sizes["obs"]
    ds.to_netcdf(path)
    tracks = read_tracks(path)
    assert list(tracks.trajectory_id) == list(rows["id"]) and tracks.mapping.coordinates == "lonlat"
    with xr.open_dataset(path) as back:
        lon = back["lon"].values
        split = np.cumsum(back["rowsize"].values)[:-1]
        assert np.abs(np.diff(lon)[np.setdiff1d(np.arange(lon.size - 1), split - 1)]).max() < 0.1  # no jump
    messy = ArchiveConfig(release_days=0.01, min_life_days=11.99, duplicate_rate=0.05, spike_rate=0.02, undrogued=1.0)
    rows, stats = make_archive(cfg, messy, positions, 3600.0, TIMES[0])
    ds = to_gdp_dataset(rows)
    fixes, counts = fd_velocities(ds)
    assert counts["duplicate_times"] == stats["exact_duplicates"] + stats["conflicting_duplicates"] > 0
    assert counts["undrogued"] == stats["undrogued_fixes"] - _undrogued_duplicates(ds) > 0
    assert stats["spikes"] > 0


def _undrogued_duplicates(ds) -> int:
    traj = np.repeat(np.arange(ds.sizes["traj"]), ds["rowsize"].values)
    t = ds["time"].values
    repeat = np.zeros(t.size, bool)
    repeat[1:] = (traj[1:] == traj[:-1]) & (t[1:] == t[:-1])
    return int((repeat & (ds["drogue_status"].values == 0)).sum())


def test_lagda_reads_the_archive_with_its_deployment_variables(tmp_path):
    from lagda.io.formats import read_tracks

    cfg = OceanConfig(nx=16, L=1.4e6)
    positions = np.array([0.6e6, 0.7e6]) + np.array([0.0, 0.3]) * 3600.0 * np.arange(48)[None, :, None]
    rows, _ = make_archive(cfg, ArchiveConfig(release_days=0.01, min_life_days=1.9, duplicate_rate=0.0), positions,
                           3600.0, TIMES[0])
    to_gdp_dataset(rows).to_netcdf(tmp_path / "archive.nc")
    assert len(read_tracks(tmp_path / "archive.nc").trajectory_id) == 1


def test_peak_tree_rss_sees_a_child_process():
    import subprocess
    import sys

    from experiments.basin.run import peak_tree_rss

    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time; b = bytearray(300 * 2**20); time.sleep(2)'])")
    wall, peak = peak_tree_rss(subprocess.Popen([sys.executable, "-c", code]), interval=0.1)
    assert peak > 300 * 2**20 and wall > 2.0  # the grandchild's 300 MiB count


def test_count_tiles_prefers_the_store_then_the_last_line_then_the_tiling():
    from experiments.basin.benchmark import quick
    from experiments.basin.run import count_tiles

    bench = quick()  # 10 x 10 degrees, 60 days
    store = xr.Dataset(attrs={"tile_size_deg": 5.0, "halo_deg": 1.0, "window_days": 20.0, "window_step_days": 10.0})
    assert count_tiles(store, bench, "done: 7 tiles in 3 s")[0] == 7
    assert count_tiles(store, bench, "done") == (4 * 5, "computed: 4 space tiles x 5 time windows")
    store.attrs["n_tiles"] = 9
    assert count_tiles(store, bench, "done: 7 tiles")[0] == 9


def test_result_velocity_reads_both_result_layouts():
    from experiments.basin.run import result_velocity

    u = np.arange(2 * 3 * 4, dtype=float).reshape(1, 2, 3, 4)
    old = xr.Dataset({"u_mean": (("field", "model_time", "y", "x"), u), "v_mean": (("field", "model_time", "y", "x"),
                                                                                   -u)},
                     coords={"lon": ("x", [350.0, 351.0, 352.0, 353.0]), "lat": ("y", [1.0, 2.0, 3.0]),
                             "time": ("model_time", TIMES[:2])})
    a, b = result_velocity(old)
    assert a.dims == ("time", "lat", "lon") and a["lon"].values.tolist() == [-10.0, -9.0, -8.0, -7.0]
    np.testing.assert_array_equal(b.values, -u[0])
    new = xr.Dataset({"u": (("time", "lat", "lon"), u[0]), "v": (("time", "lat", "lon"), -u[0])},
                     coords={"time": TIMES[:2], "lat": [1.0, 2.0, 3.0], "lon": [-10.0, -9.0, -8.0, -7.0]})
    np.testing.assert_array_equal(result_velocity(new)[0].values, u[0])


def test_csv_rows_merge_and_the_page_table_follows(tmp_path):
    from experiments.basin.year import page_table, write_csv
    from experiments.common.page_tables import write_page

    path = write_csv([{"method": "a", "config": "x", "error": 0.5}, {"method": "b", "config": "y", "error": 0.25}],
                     tmp_path / "t.csv")
    write_csv([{"method": "a", "config": "x", "error": 0.125}], path)
    page = tmp_path / "p.md"
    page.write_text("intro\n<!-- basin-year table: begin -->\nold\n<!-- basin-year table: end -->\nafter\n")
    text = write_page(path, page, page_table, "basin-year table").read_text()
    assert "old" not in text and text.startswith("intro") and text.endswith("after\n")
    assert "| b | y | 0.25 |" in text and "| a | x | 0.125 |" in text and "0.5 " not in text


def test_only_the_year_table_reaches_the_docs_page(tmp_path, monkeypatch, capsys):
    # `all --quick` keeps its table in its work folder; the docs page shows results/basin_year.csv alone
    import experiments.basin.year as by

    page = tmp_path / "page.md"
    page.write_text("<!-- basin-year table: begin -->\nold\n<!-- basin-year table: end -->\n")
    monkeypatch.setattr(by, "PAGE", page)
    monkeypatch.setattr(by, "CSV", by.write_csv([{"method": "year", "config": "x", "error": 0.5}],
                                                tmp_path / "year.csv"))
    by.write_csv([{"method": "quick", "config": "y", "error": 0.25}], tmp_path / "basin_year.csv")
    assert by.main(["page", "--quick", "--work", str(tmp_path)]) == 0
    assert "old" in page.read_text() and "this run's table is" in capsys.readouterr().out
    assert by.main(["page"]) == 0
    assert "| year | x | 0.5 |" in page.read_text() and "quick" not in page.read_text()
