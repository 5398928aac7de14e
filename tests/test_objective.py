"""The objective map (lagda.mapping.methods.objective) and its prior covariance (lagda.mapping.covariance), tested
against mathematics: the exact posterior of a linear-Gaussian model, a non-divergent mean, the prior far from the data,
no seam across tile edges on a field with structure, and the covariance's scales recovered from pairs drawn from
a known one; and `--withhold` leaving out a drifter that continues under another id."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lagda.io.fixes import Fixes
from lagda.mapping import covariance as cov_module
from lagda.mapping.check import drifter_groups, withheld
from lagda.mapping.covariance import Covariance
from lagda.mapping.methods import objective
from lagda.mapping.methods.objective import Velocities, _block_posterior, covariance_blocks, map_tile
from lagda.mapping.tiles import DAY_S, Grid, tile_layout

COV = Covariance(ell_km=40.0, tau_days=3.0, phi=0.5, variance=0.01, tau_long_days=20.0, phi_long=0.3)


def _drifter(traj, lon0, lat0, u, v, days=10.0, step_h=6.0, t0=0.0):
    """Returns (traj, time, lon, lat) of a drifter moving at (u, v) m/s from (lon0, lat0) for `days`."""
    t = t0 + np.arange(0.0, days * DAY_S + 1, step_h * 3600.0)
    lat = lat0 + np.rad2deg(v * (t - t0) / 6371008.8)
    lon = lon0 + np.rad2deg(u * (t - t0) / (6371008.8 * np.cos(np.deg2rad(lat0))))
    return np.full(len(t), traj), t, lon, lat


def _fixes(*drifters) -> Fixes:
    traj, time, lon, lat = (np.concatenate(parts) for parts in zip(*drifters))
    return Fixes(traj.astype(np.int64), time, lon, lat, np.array([f"d{i}" for i in range(traj.max() + 1)]))


def test_block_posterior_is_the_exact_gaussian_posterior():
    """At the data points themselves the block posterior equals the closed-form Gaussian conditional built from the
    same covariance matrix (mean K*ᵀ (K + N)^-1 y, variance diag(K** - K*ᵀ (K + N)^-1 K*))."""
    rng = np.random.default_rng(0)
    points = np.column_stack([rng.uniform(-60, 60, (12, 2)), rng.uniform(0, 5, 12)])
    sigma = np.full(12, 0.1)
    anomaly = rng.normal(0, 0.1, (12, 2))
    cx, cy = np.array([[0.0, 10.0]]), np.array([[5.0, -5.0]])
    days = np.array([1.0, 2.5])
    mean, var = _block_posterior(points, anomaly, sigma, np.ones(12), cx, cy, days, np.full((2, 1, 2), 0.1), COV)
    k = covariance_blocks(points, points, sigma, sigma, COV) + np.diag(np.full(24, (1 - COV.correlated) * 0.01))
    for d, day in enumerate(days):
        cells = np.column_stack([cx.ravel(), cy.ravel(), np.full(2, day)])
        cross = covariance_blocks(cells, points, np.full(2, 0.1), sigma, COV)
        expect = cross @ np.linalg.solve(k, np.r_[anomaly[:, 0], anomaly[:, 1]])
        np.testing.assert_allclose(mean[d, 0, :, 0], expect[:2], atol=1e-12)
        np.testing.assert_allclose(mean[d, 0, :, 1], expect[2:], atol=1e-12)
        prior = covariance_blocks(cells, cells, np.full(2, 0.1), np.full(2, 0.1), COV)
        post = np.diag(prior - cross @ np.linalg.solve(k, cross.T))
        np.testing.assert_allclose(var[d, 0, :, 0], post[:2], atol=1e-12)  # every day computed at STD_EVERY 2
        np.testing.assert_allclose(var[d, 0, :, 1], post[2:], atol=1e-12)


def test_super_observations_of_velocities_at_one_place_and_time_are_the_exact_posterior(monkeypatch):
    """More velocities than a block takes (MAX_BLOCK_POINTS, set to 10 here), 8 each at 5 points and times: their
    super-observations (each point's mean, with an eighth of the uncorrelated variance) give the posterior of all
    40 exactly (Gaussian conditioning on n observations with independent errors at one point is conditioning on their
    mean), where keeping the 10 nearest of them does not."""
    monkeypatch.setattr(objective, "MAX_BLOCK_POINTS", 10)
    rng = np.random.default_rng(2)
    sites = np.column_stack([rng.uniform(-80, 80, (5, 2)), rng.uniform(0, 4, 5)])
    points = np.repeat(sites, 8, axis=0)
    sigma = np.full(40, 0.1)
    anomaly = rng.normal(0, 0.1, (40, 2))
    cx, cy = np.meshgrid([-10.0, 0.0, 10.0], [-5.0, 5.0])
    days, cell_sigma = np.array([0.5, 2.0, 3.5]), np.full((3, 2, 3), 0.1)
    obs = objective._superobservations(points, anomaly, sigma, COV)
    assert len(obs[0]) == 5 and np.all(obs[3] == 8)
    merged = _block_posterior(*objective._nearest(obs, cx, cy), cx, cy, days, cell_sigma, COV)
    exact = _block_posterior(points, anomaly, sigma, np.ones(40), cx, cy, days, cell_sigma, COV)
    for got, want in zip(merged, exact):
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)
    nearest = np.argsort(np.hypot(points[:, 0], points[:, 1]), kind="stable")[:10]
    kept = _block_posterior(points[nearest], anomaly[nearest], sigma[nearest], np.ones(10), cx, cy, days, cell_sigma,
                            COV)
    assert np.abs(kept[0] - exact[0]).max() > 1e-3


def test_posterior_mean_is_non_divergent():
    """Every column of the kernel is a non-divergent field, so the posterior mean is: its divergence (centred
    differences on a fine grid) is tiny against its vorticity."""
    rng = np.random.default_rng(1)
    points = np.column_stack([rng.uniform(-30, 30, (6, 2)), np.zeros(6)])
    h = 0.5
    x = np.arange(-60.0, 60.0 + h, h)
    cx, cy = np.meshgrid(x, x)
    mean, _ = _block_posterior(points, rng.normal(0, 0.1, (6, 2)), np.full(6, 0.1), np.ones(6), cx, cy,
                               np.zeros(1), np.full((1, *cx.shape), 0.1), COV)
    u, v = mean[0, ..., 0], mean[0, ..., 1]
    divergence = np.gradient(u, h, axis=1) + np.gradient(v, h, axis=0)
    vorticity = np.gradient(v, h, axis=1) - np.gradient(u, h, axis=0)
    inner = (slice(1, -1), slice(1, -1))  # centred differences (second order) away from the grid's edge
    assert np.abs(divergence[inner]).max() < 1e-3 * np.abs(vorticity[inner]).max()


def test_far_from_two_drifters_the_map_is_the_prior():
    """Two drifters in one corner of a tile: a few length scales away the mean is the prior mean (zero) and the
    std the prior std sqrt(variance); at the drifters the mean follows them and the std is smaller."""
    fixes = _fixes(_drifter(0, -39.0, 31.0, 0.3, 0.0), _drifter(1, -39.0, 31.2, 0.25, 0.05))
    tile = tile_layout((-40.0, -34.0, 30.0, 36.0), (0.0, 10 * DAY_S), 6.0, 1.0, 30.0, 15.0)[0]
    grid = Grid(np.arange(-40.875, -33.0, 0.25), np.arange(29.125, 37.0, 0.25), np.arange(0.0, 10.5 * DAY_S, DAY_S))
    piece = map_tile(Velocities.of_fixes(fixes).in_tile(tile), tile, grid, COV)
    days, rows, cols = grid.window(tile)
    lon, lat = np.meshgrid(grid.lon[cols], grid.lat[rows])
    far = (lon > -37.0) & (lat > 33.5)  # over 250 km (6 L) from both tracks
    assert far.any()
    assert np.abs(piece["u"][:, far]).max() < 1e-6 and np.abs(piece["v"][:, far]).max() < 1e-6
    np.testing.assert_allclose(piece["u_std"][:, far], np.sqrt(COV.variance), rtol=1e-5)
    near = (np.abs(lat - 31.125) < 0.01) & (np.abs(lon + 38.125) < 0.01)  # on the first drifter's track, day 2-3
    assert 0.1 < piece["u"][2][near][0] < 0.35
    assert piece["u_std"][2][near][0] < 0.9 * np.sqrt(COV.variance)


def test_a_dense_cluster_maps_as_all_its_velocities_and_says_so(monkeypatch):
    """Two clusters of 15 drifters, each cluster's drifters on one track: with a block taking at most 40 velocities
    the tile's map (super-observations) equals the map of all 600 at once, and the tile record and summary line
    count the merged blocks. A map that dropped velocities beyond 40, or merged them without dividing their
    uncorrelated variance, would differ."""
    drifters = [_drifter(i, -39.0, 31.0, 0.3, 0.0) for i in range(15)]
    drifters += [_drifter(15 + i, -38.0, 32.0, -0.1, 0.2) for i in range(15)]
    data = Velocities.of_fixes(_fixes(*drifters))
    tile = tile_layout((-40.0, -34.0, 30.0, 36.0), (0.0, 10 * DAY_S), 6.0, 1.0, 30.0, 15.0)[0]
    grid = Grid(np.arange(-40.875, -33.0, 0.25), np.arange(29.125, 37.0, 0.25), np.arange(0.0, 10.5 * DAY_S, DAY_S))
    exact = map_tile(data.in_tile(tile), tile, grid, COV)
    monkeypatch.setattr(objective, "MAX_BLOCK_POINTS", 40)
    merged = map_tile(data.in_tile(tile), tile, grid, COV)
    for key in ("u", "v", "u_std", "v_std"):
        np.testing.assert_allclose(merged[key], exact[key], rtol=1e-4, atol=1e-6)
    assert exact["info"]["blocks_merged"] == 0 and merged["info"]["blocks_merged"] > 0
    assert merged["info"]["blocks_thinned"] == 0
    line = objective.objective_summary([merged["info"]])
    assert f"in {merged['info']['blocks_merged']} of {merged['info']['blocks_informed']} blocks" in line


def test_no_seam_across_tile_edges_on_a_field_with_structure():
    """Drifters in a field of eddies mapped by neighbouring tiles and blended: across every tile edge inside the
    region the map changes no more than its typical cell-to-cell change (each tile conditions on its box, and
    the covariance is the archive's, the same in every tile)."""
    from lagda.mapping.blend import blend_block
    from lagda.mapping.resume import save_piece
    from lagda.mapping.settings import MapSettings

    rng = np.random.default_rng(3)
    drifters = []
    for i in range(40):  # velocities of a steady eddy field: u = -dpsi/dy, v = dpsi/dx at each fix
        lon0, lat0 = rng.uniform(-40.0, -30.0), rng.uniform(30.0, 36.0)
        t = np.arange(0.0, 10 * DAY_S + 1, 6 * 3600.0)
        lon, lat = [lon0], [lat0]
        for _ in t[1:]:
            k = 2 * np.pi / 2.0  # eddies of 2 degrees' wavelength, 0.2 m/s
            u = -0.2 * np.sin(k * lon[-1]) * np.sin(k * lat[-1])
            v = -0.2 * np.cos(k * lon[-1]) * np.cos(k * lat[-1])
            lat.append(lat[-1] + np.rad2deg(v * 21600.0 / 6371008.8))
            lon.append(lon[-1] + np.rad2deg(u * 21600.0 / (6371008.8 * np.cos(np.deg2rad(lat[-1])))))
        drifters.append((np.full(len(t), i), t, np.array(lon), np.array(lat)))
    fixes = _fixes(*drifters)
    cov = dataclasses.replace(COV, ell_km=60.0)
    region, period = (-40.0, -30.0, 30.0, 36.0), (0.0, 10 * DAY_S)
    tiles = tile_layout(region, period, 3.0, 1.5, 30.0, 15.0)
    grid = Grid(np.arange(-39.875, -30.0, 0.25), np.arange(30.125, 36.0, 0.25), np.arange(0.0, 10.5 * DAY_S, DAY_S))
    import tempfile

    with tempfile.TemporaryDirectory() as partial:
        import os

        os.makedirs(os.path.join(partial, "tiles"))
        data = Velocities.of_fixes(fixes)
        for tile in tiles:
            save_piece(partial, map_tile(data.in_tile(tile), tile, grid, cov))
        u = blend_block(partial, tiles, grid, MapSettings().tile_method(), 0, len(grid.days))[0]
    assert np.isfinite(u).all()
    step = np.abs(np.diff(u, axis=2))  # east-west cell-to-cell change
    edges = sorted({t.core[1] for t in tiles if t.core[1] < region[1] - 1e-9})
    assert edges
    for edge in edges:
        i = int(np.argmin(np.abs(grid.lon[:-1] + 0.125 - edge)))  # the pair of cells either side of the edge
        across = step[:, :, i]
        assert np.percentile(across, 99) <= max(2.0 * np.percentile(step, 99), 1e-9), edge


def test_covariance_scales_recovered_from_pairs():
    """Velocities drawn from the model's own covariance (a non-divergent field of known L, T, phi) give back those
    scales within the binned estimate's precision."""
    rng = np.random.default_rng(4)
    n = 1500
    points = np.column_stack([rng.uniform(-300, 300, (n, 2)), rng.uniform(0, 40, n)])
    truth = Covariance(ell_km=50.0, tau_days=4.0, phi=0.6, variance=1.0, phi_long=0.0)
    k = covariance_blocks(points, points, np.ones(n), np.ones(n), truth) + np.eye(2 * n) * 0.4
    draw = np.linalg.cholesky(k) @ rng.normal(size=2 * n)
    lat = 30.0 + points[:, 1] / 111.2
    lon = -40.0 + points[:, 0] / (111.2 * np.cos(np.deg2rad(lat)))
    found = cov_module.estimate(lon, lat, points[:, 2] * DAY_S, np.column_stack([draw[:n], draw[n:]]), np.arange(n))
    assert found.ell_km == pytest.approx(50.0, rel=0.2)
    assert found.correlated == pytest.approx(0.6, abs=0.12)
    assert found.variance == pytest.approx(1.0, rel=0.15)


def test_withhold_keeps_a_drifter_that_continues_under_another_id_together():
    """A drifter whose track goes on under a second id a day later, beside it: a third far away. Withholding the
    first withholds its continuation too (one group), and the other drifter is never split."""
    a = _drifter(0, -39.0, 31.0, 0.2, 0.0, days=5.0)
    b = _drifter(1, a[2][-1] + 0.02, 31.0, 0.2, 0.0, days=5.0, t0=a[1][-1] + DAY_S)
    c = _drifter(2, -30.0, 35.0, 0.1, 0.0, days=10.0)
    fixes = _fixes(a, b, c)
    groups = drifter_groups(fixes)
    assert groups[0] == groups[1] != groups[2]
    for fraction in (0.3, 0.5):
        held = withheld(fixes, fraction)
        assert held[fixes.traj == 0].all() == held[fixes.traj == 1].all()
        assert held[fixes.traj == 0].any() == held[fixes.traj == 1].any()


def test_the_default_map_fills_every_sea_cell_and_says_how_far_the_fixes_are(tmp_path):
    """`lagda map` with every default on a uniform current: every cell has a value and a std (the prior where no
    drifter is), `distance_to_fix` is 0-20 km on a fix's cell and NaN on a day without fixes, the current is
    recovered where the drifters are, and the note says the covariance the archive showed."""
    import xarray as xr

    from lagda.io.physical import parse_time
    from lagda.mapping import MapSettings, map_archive
    from tests.test_map import START, U, V, write_archive

    archive, out = tmp_path / "tracks.nc", tmp_path / "map.zarr"
    write_archive(archive, -40.0, 30.0, size=3.0, days=6, n=6, every_h=6.0)
    settings = MapSettings((-41.0, -35.0, 29.0, 35.0), (parse_time(START), parse_time(START) + 8 * DAY_S),
                           resolution=0.5, tile_deg=3.0, halo_deg=1.0, window_days=10.0, step_days=5.0)
    said = []
    map_archive(archive, out, settings, workers=1, progress=False, say=said.append)
    assert any(line.startswith("note: prior from ") and " pairs of " in line for line in said)
    assert any(line.startswith("note: far from the drifters the map is their regional mean (up to ") for line in said)
    with xr.open_zarr(out) as ds:
        assert np.isfinite(ds.u.values).all() and np.isfinite(ds.u_std.values).all() and (ds.u_std > 0).all()
        distance = ds.distance_to_fix.values
        with_fix = ds.n_fixes.values > 0
        assert with_fix.any() and (distance[with_fix] < 40.0).all()
        assert np.isnan(distance[-1]).all()  # the last day: the drifters' fixes ended two days before
        near = with_fix & (distance < 20.0)
        assert abs(float(np.median(ds.u.values[near])) - U) < 0.3 * np.hypot(U, V)
        assert abs(float(np.median(ds.v.values[near])) - V) < 0.3 * np.hypot(U, V)


def test_the_check_scores_by_distance_beside_a_binned_mean():
    """A map that is the uniform current (U, V) exactly and drifters in it: the check's error is 0 in every band
    that has velocities, and so is the binned mean's where the mapped drifters share a 1-degree cell with the
    withheld one (it is the same current); a withheld drifter far from the mapped ones is in the far band."""
    import xarray as xr

    from lagda.mapping.check import check_map

    u, v = 0.2, -0.1
    mapped = _fixes(_drifter(0, -39.0, 31.0, u, v, days=6.0), _drifter(1, -36.0, 33.0, u, v, days=6.0))
    held = _fixes(_drifter(0, -39.1, 31.05, u, v, days=6.0), _drifter(1, -31.0, 34.0, u, v, days=6.0))
    lon, lat = np.arange(-41.875, -29.0, 0.25), np.arange(29.125, 36.0, 0.25)
    times = (np.arange(0.0, 7 * DAY_S, DAY_S) * 1e9).astype("datetime64[ns]")
    shape = (len(times), len(lat), len(lon))
    maps = xr.Dataset({name: (("time", "lat", "lon"), np.full(shape, value)) for name, value in
                       (("u", u), ("v", v), ("u_std", 0.05), ("v_std", 0.05))},
                      coords={"time": times, "lat": lat, "lon": lon})
    scores = check_map(maps, held, mapped)
    assert scores["near_velocities"] > 0 and scores["far_velocities"] > 0
    # (the tracks are built with the cosine of their first latitude: their velocities differ by under 1%)
    assert scores["near_error"] < 0.01 and scores["far_error"] < 0.01 and scores["near_coverage_95"] == 1.0
    # the same current, binned from the mapped drifter beside it; zero in the cells its daily midpoints missed
    assert scores["near_binned_error"] < 0.5
    assert scores["far_binned_error"] == pytest.approx(1.0)  # no mapped drifter in its cells: zero
