"""lagda map's tiles near the drifters: the local GP's velocities and segments, an eddy the tile basis cannot resolve,
bad fixes left out, a lone drifter, inertial loops and a jet."""

import dataclasses
import functools
import json

import numpy as np
import pytest
import xarray as xr

from lagda.io.physical import EARTH_RADIUS_M, parse_time
from lagda.mapping.run import map_archive
from tests.map_archives import START, U, V, settings, small_settings, write_archive


def _eddy_fixes(centre, days=10, n=24, seed=4, current=(U, V), peak=0.3, every_h=1, cluster=None):
    """Returns (Fixes, velocity(lon, lat) -> (u, v) m/s) of drifters in the uniform `current` plus a Gaussian eddy of
    40 km radius (`peak` m/s) at `centre`, a fix every `every_h` hours (Euler steps of 10 minutes) with 20 m noise;
    released uniformly within a degree of the centre, or with `cluster` (dlon, dlat degrees from the centre, std
    km) in a Gaussian cluster there."""
    from lagda.io.fixes import Fixes

    radius = 40e3
    amplitude = peak * radius * np.exp(0.5)  # psi = A exp(-r^2 / 2R^2): speed A r / R^2 exp(-r^2 / 2R^2)

    def velocity(lon, lat):
        x = np.deg2rad(lon - centre[0]) * EARTH_RADIUS_M * np.cos(np.deg2rad(lat))
        y = np.deg2rad(lat - centre[1]) * EARTH_RADIUS_M
        g = amplitude * np.exp(-(x**2 + y**2) / (2 * radius**2)) / radius**2
        return current[0] + g * y, current[1] - g * x  # u = -dpsi/dy, v = dpsi/dx

    rng = np.random.default_rng(seed)
    lon = centre[0] + rng.uniform(-1.0, 1.0, n)
    lat = centre[1] + rng.uniform(-1.0, 1.0, n)
    if cluster is not None:
        lat = centre[1] + cluster[1] + np.degrees(rng.normal(0.0, cluster[2] * 1e3, n) / EARTH_RADIUS_M)
        lon = centre[0] + cluster[0] + np.degrees(rng.normal(0.0, cluster[2] * 1e3, n) / EARTH_RADIUS_M) / np.cos(
            np.deg2rad(lat))
    steps, keep = days * 24 * 6, []
    for k in range(steps):
        if k % (6 * every_h) == 0:
            keep.append((lon.copy(), lat.copy()))
        u, v = velocity(lon, lat)
        lat = lat + np.degrees(600.0 * v / EARTH_RADIUS_M)
        lon = lon + np.degrees(600.0 * u / (EARTH_RADIUS_M * np.cos(np.deg2rad(lat))))
    lons, lats = (np.stack(a, axis=1) for a in zip(*keep))  # (drifter, fix)
    noise = lambda: np.degrees(rng.normal(0, 20.0, lons.shape) / EARTH_RADIUS_M)
    seconds = parse_time(START) + 3600.0 * every_h * np.arange(lons.shape[1])
    fixes = Fixes(traj=np.repeat(np.arange(n), lons.shape[1]), time=np.tile(seconds, n),
                  lon=(lons + noise() / np.cos(np.deg2rad(lats))).ravel(), lat=(lats + noise()).ravel(),
                  ids=np.arange(n))
    return fixes, velocity


@functools.cache
def _eddy_tile(n, every_h, cluster):
    """(settings, their first tile, grid, `_eddy_fixes` at the tile's centre, velocity): made once a test file for
    the tests that share them (the arguments given by position alone: the cache's key)."""
    s = settings(-40.0, 30.0)
    tile = s.tiles()[0]
    fixes, velocity = _eddy_fixes(tile.centre, n=n, every_h=every_h, cluster=cluster)
    return s, tile, s.grid(), fixes, velocity


@functools.cache
def _eddy_piece(n, every_h, cluster, local_gp):
    """The basis method's piece of `_eddy_tile`'s tile (with the local GP, or without), inverted once a test file
    for the tests that share it (a piece is not changed by those tests)."""
    from lagda.mapping.methods.basis import invert_tile, tile_fixes

    s, tile, grid, fixes, _ = _eddy_tile(n, every_h, cluster)
    return invert_tile(tile_fixes(fixes, tile), tile, grid, s.k_max, s.degree, local_gp=local_gp)


@pytest.mark.parametrize("every_h", [1.0, 2.5, 6.0])
def test_the_local_gps_velocities_span_about_six_hours_at_any_cadence(every_h):
    # two drifters in the uniform current (U, V) for four days, a fix every `every_h` hours: each gives 16 chunk
    # velocities, every one the current, their midpoints 3 to 12 hours apart (a 6-hourly track, one fix a chunk,
    # gave none when they were taken within each chunk)
    from lagda.assimilation.local_gp import LOCAL_CHUNK_S, chunk_velocities
    from lagda.io.fixes import Fixes

    seconds = 3600.0 * every_h * np.arange(int(96 / every_h) + 1)
    phi0 = np.deg2rad(30.0)
    phi = phi0 + V * seconds / EARTH_RADIUS_M
    lat = np.degrees(phi)
    lon = -40.0 + np.degrees(U / V * (np.arctanh(np.sin(phi)) - np.arctanh(np.sin(phi0))))  # dlon/dt = U / (R cos)
    fixes = Fixes(traj=np.repeat([0, 1], len(seconds)), time=np.tile(seconds, 2), lon=np.tile(lon, 2),
                  lat=np.tile(lat, 2), ids=np.arange(2))
    _, _, mid, velocity, span, segment = chunk_velocities(fixes, fixes.segments(), LOCAL_CHUNK_S)
    np.testing.assert_array_equal(segment, np.repeat([0, 1], 16))
    assert len(velocity) == 2 * 16
    np.testing.assert_allclose(velocity, np.tile([U, V], (len(velocity), 1)), rtol=1e-3)
    apart = np.diff(mid[:16]) / 3600.0
    assert np.all((apart >= 3.0) & (apart <= 12.0)), apart
    assert np.all((span >= 3 * 3600.0) & (span <= 12 * 3600.0)), span


def test_a_drifters_segments_split_at_gaps_measured_against_its_own_cadence():
    # hourly fixes split at a 7 h gap; 6-hourly ones jittered by two minutes stay whole; daily fixes split only at
    # a gap over 36 h; fixes two days apart give no segment (nor a note's median over 24 h: the limit stays 36 h)
    from lagda.io.fixes import Fixes

    hours = {0: np.r_[np.arange(10), 17 + np.arange(10)],
             1: 6.0 * np.arange(12) + np.tile([0.0, 2 / 60, -2 / 60], 4),
             2: np.r_[24.0 * np.arange(6), 24.0 * 5 + 48 + 24.0 * np.arange(4)],
             3: 48.0 * np.arange(8)}
    traj = np.concatenate([np.full(len(h), d) for d, h in hours.items()])
    fixes = Fixes(traj=traj, time=3600.0 * np.concatenate(list(hours.values())), lon=np.zeros(len(traj)),
                  lat=np.zeros(len(traj)), ids=np.arange(4))
    lengths = [(int(fixes.traj[s[0]]), len(s)) for s in fixes.segments()]
    assert lengths == [(0, 10), (0, 10), (1, 12), (2, 6), (2, 4)]
    steps = dict(zip(*fixes.drifter_steps()))
    assert steps == {0: 3600.0, 1: 21720.0, 2: 86400.0, 3: 172800.0}  # 1: steps 6 h + 2, - 4, + 2 min, ...
    note = fixes.cadence_note()
    assert note.startswith("3 of 4 drifters have fixes further apart than 6 h (median step 6.03-48 h)"), note
    exact = Fixes(traj=np.repeat([0, 1], 12), time=np.r_[3600.0 * np.arange(12), 21600.0 * np.arange(12)],
                  lon=np.zeros(24), lat=np.zeros(24), ids=np.arange(2))
    assert exact.cadence_note() is None and [len(s) for s in exact.segments()] == [12, 12]


@pytest.mark.parametrize(("every_h", "n"), [(1, 24), (6, 24), (1, 150)], ids=["hourly", "6-hourly", "dense"])
def test_the_local_gp_maps_an_eddy_the_tile_basis_cannot_resolve(every_h, n):
    # k_max 3 over a 5-degree box resolves waves of 180 km and longer; the eddy's radius is 40 km: the local GP of
    # what the basis leaves out returns it along the drifters, and its std narrows there, from hourly fixes, from
    # the GDP's 6-hourly ones, and from 150 drifters' hourly fixes (a dense deployment: the few velocities at the
    # eddy's peak are far above the residuals' 99th percentile, which once rejected the fit)
    from lagda.mapping.methods.basis import tile_fixes

    s, tile, grid, fixes, velocity = _eddy_tile(n, every_h, None)
    fixes = tile_fixes(fixes, tile)
    days, rows, cols = grid.window(tile)
    lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
    true_u, true_v = velocity(lon2, lat2)
    near = np.zeros(lon2.shape, bool)  # the cells holding a fix on some day
    edge = lambda centres: np.append(centres - 0.5 * s.resolution, centres[-1] + 0.5 * s.resolution)
    iy, ix = np.digitize(fixes.lat, edge(grid.lat[rows])) - 1, np.digitize(fixes.lon, edge(lon2[0])) - 1
    inside = (iy >= 0) & (iy < near.shape[0]) & (ix >= 0) & (ix < near.shape[1])
    near[iy[inside], ix[inside]] = True
    near &= np.hypot(true_u - U, true_v - V) > 0.05  # where the eddy is
    errors, stds = {}, {}
    for local in (True, False):
        piece = _eddy_piece(n, every_h, None, local)
        errors[local] = np.sqrt(np.mean((piece["u"][:, near] - true_u[near]) ** 2
                                        + (piece["v"][:, near] - true_v[near]) ** 2))
        stds[local] = float(np.median(piece["u_std"][:, near]))
        assert ("ell_km" in piece["info"].get("local_gp", {})) == local
    eddy = np.sqrt(np.mean((true_u[near] - U) ** 2 + (true_v[near] - V) ** 2))
    assert near.sum() >= 10 and errors[False] > 0.15 * eddy  # the basis alone misses a good part of the eddy
    # at least 40% of the basis's error gone (the fit's noise floor, NOISE_FLOOR, keeps it from following the
    # tracks' 20 m position noise more closely)
    assert errors[True] < 0.6 * errors[False]
    assert stds[True] < stds[False]


def test_the_local_gp_maps_the_flank_of_an_eddy_a_dense_cluster_skirts():
    # 150 drifters released in a 7 km cluster 60 km west and 55 km north of the eddy (a GLAD-like deployment), fixed
    # hourly: the basis fits the cluster's velocities closely, so the flank beside it is larger than any residual
    # from the basis at the drifters (the fit was rejected when that was the yardstick), and 4,400 velocities are
    # more than one GP is conditioned on (longer chunks once smeared them): at the cells holding a fix each day the
    # local GP takes away at least two thirds of the basis field's error
    from lagda.assimilation.local_gp import LOCAL_MAX_POINTS
    from lagda.mapping.methods.basis import tile_fixes

    s, tile, grid, fixes, velocity = _eddy_tile(150, 1, (-0.6, 0.5, 7.0))
    fixes = tile_fixes(fixes, tile)
    days, rows, cols = grid.window(tile)
    lon2, lat2 = np.meshgrid(tile.relative_lon(grid.lon[cols]), grid.lat[rows])
    true_u, true_v = velocity(lon2, lat2)
    edge = lambda centres: np.append(centres - 0.5 * s.resolution, centres[-1] + 0.5 * s.resolution)
    iy, ix = np.digitize(fixes.lat, edge(grid.lat[rows])) - 1, np.digitize(fixes.lon, edge(lon2[0])) - 1
    day = np.floor((fixes.time - grid.days[days][0]) / 86400.0 + 0.5).astype(int)
    held = np.zeros((len(grid.days[days]), *lon2.shape), bool)  # the cells holding a fix on each day
    inside = (iy >= 0) & (iy < lon2.shape[0]) & (ix >= 0) & (ix < lon2.shape[1]) & (day >= 0) & (day < len(held))
    held[day[inside], iy[inside], ix[inside]] = True
    errors = {}
    for local in (True, False):
        piece = _eddy_piece(150, 1, (-0.6, 0.5, 7.0), local)
        errors[local] = np.sqrt(np.mean(((piece["u"] - true_u) ** 2 + (piece["v"] - true_v) ** 2)[held]))
        if local:
            assert piece["info"]["local_gp"]["velocities"] > LOCAL_MAX_POINTS
    eddy = np.sqrt(np.mean(np.broadcast_to((true_u - U) ** 2 + (true_v - V) ** 2, held.shape)[held]))
    assert held.sum() >= 20 and errors[False] > 0.2 * eddy  # the basis alone misses a good part of the flank
    assert errors[True] < errors[False] / 3


@pytest.mark.parametrize(("n", "cluster"), [(24, None), (150, (-0.6, 0.5, 7.0))], ids=["scattered", "cluster"])
def test_the_local_fit_leaves_out_a_bad_fixs_velocities_not_an_eddys(n, cluster):
    # ten fixes 5 km off their track (at a 6-hour chunk's first fix: each moves two chunk velocities by 0.23 m/s
    # against their neighbours) are left out with their velocities, and the map is nearly the clean one's; the
    # clean tracks lose almost none, the cluster skirting the eddy none of its flank's (a screen on the residuals
    # themselves left out 72 of them: most of the cluster's residuals are tiny, the flank's far off them)
    import dataclasses

    from lagda.mapping.methods.basis import invert_tile, tile_fixes

    s, tile, grid, fixes, _ = _eddy_tile(n, 1, cluster)
    per_drifter = len(fixes.time) // len(fixes.ids)
    lat = fixes.lat.copy()
    lat[[d * per_drifter + k for d in range(0, 20, 4) for k in (60, 150)]] += np.degrees(5000.0 / EARTH_RADIUS_M)
    pieces = {"clean": _eddy_piece(n, 1, cluster, True),  # as the tests above have it
              "spiked": invert_tile(tile_fixes(dataclasses.replace(fixes, lat=lat), tile), tile, grid, s.k_max,
                                    s.degree)}
    dropped = {name: piece["info"]["local_gp"]["outliers"] for name, piece in pieces.items()}
    assert dropped["clean"] <= 0.01 * pieces["clean"]["info"]["local_gp"]["velocities"]
    assert dropped["spiked"] >= dropped["clean"] + 20
    change = np.hypot(pieces["spiked"]["u"] - pieces["clean"]["u"], pieces["spiked"]["v"] - pieces["clean"]["v"])
    assert change.max() < 0.02  # m/s: the bad velocities were 0.23 m/s off


def test_a_tile_answered_zero_counts_the_velocity_variance_once():
    # drifters in still water: the basis estimate is zero through its guard, its posterior is the prior, and the
    # local GP maps the velocities themselves; the total variance is the GP's (with the drifters' mean square
    # velocity far from them), not the GP's plus the basis prior's
    from lagda.assimilation import local_gp
    from lagda.mapping.methods import basis

    s = settings(-40.0, 30.0)
    tile = s.tiles()[0]
    grid = s.grid()
    fixes, _ = _eddy_fixes(tile.centre, current=(0.0, 0.0), peak=0.0)
    fixes = basis.tile_fixes(fixes, tile)
    piece = basis.invert_tile(fixes, tile, grid, s.k_max, s.degree)
    assert piece["info"]["zero_guard"] and "ell_km" in piece["info"]["local_gp"]
    segments = fixes.segments()
    mapping, tracks = basis.tile_tracks(fixes, segments, tile)
    mean, _, _, chosen = basis._posterior(tracks, s.k_max, s.degree)
    assert not np.any(mean)
    gp, hyper, _, spread, _, _, _, (seen, departure) = local_gp._local_fit(fixes, segments, mean, chosen["model"],
                                                                             mapping, tile, s.k_max)
    days, rows, cols = grid.window(tile)
    _, _, var_local = local_gp._local_on(gp, tile, *np.meshgrid(grid.lon[cols], grid.lat[rows]), grid.days[days])
    expected = [var_local + (var_local / hyper.s2) ** 2 * max(spread + m**2 - hyper.s2, 0.0) for m in seen]
    # the zero basis field departs from the drifters' mean velocity by less than their own velocities do: no excess
    assert np.all(np.abs(seen) < departure)
    np.testing.assert_allclose(piece["u_std"], np.sqrt(expected[0]), rtol=1e-5)
    np.testing.assert_allclose(piece["v_std"], np.sqrt(expected[1]), rtol=1e-5)


def _uniform_csv(path, starts, hours: int = 8 * 24, seed: int = 0) -> None:
    """Writes an `id,time,lon,lat` CSV of drifters in the uniform current (U, V) from `starts` [(lon, lat)], hourly
    fixes with 20 m noise."""
    rng = np.random.default_rng(seed)
    s = 3600.0 * np.arange(hours)
    times = [str(t)[:19] + "Z" for t in np.datetime64("2025-01-01T00:00:00") + s.astype("timedelta64[s]")]
    rows = []
    for k, (lon, lat) in enumerate(starts):
        lat_t = lat + np.degrees((V * s + rng.normal(0, 20, len(s))) / EARTH_RADIUS_M)
        lon_t = lon + np.degrees((U * s + rng.normal(0, 20, len(s))) / (EARTH_RADIUS_M * np.cos(np.radians(lat_t))))
        rows += [f"d{k},{t},{x:.6f},{y:.6f}" for t, x, y in zip(times, lon_t, lat_t)]
    path.write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")


def test_a_lone_drifter_fills_the_cells_no_other_tile_reaches_and_leaves_the_others_alone(map_scheduler, tmp_path):
    """A tile of one drifter segment was not inverted: a lone drifter far from the others had no map. It is now (the
    local GP of its velocities alone), and its piece enters the blend only where no tile of more drifters has
    weight: the cluster's map is bit-identical with and without the lone drifter, and the lone drifter's cells hold
    the current within their bands."""
    s, scheduler = small_settings(method="basis"), map_scheduler  # what the tile basis does
    s = dataclasses.replace(s, region=(-41.0, -29.0, 30.0, 33.0))
    cluster = [(-40.2, 31.2), (-39.9, 31.9), (-39.5, 31.5), (-39.8, 32.3)]
    _uniform_csv(tmp_path / "cluster.csv", cluster)
    _uniform_csv(tmp_path / "both.csv", [*cluster, (-32.0, 31.5)])  # in tiles whose halo meets the cluster's
    said = []
    maps = {}
    for name in ("cluster", "both"):
        said.clear()
        map_archive(tmp_path / f"{name}.csv", tmp_path / f"{name}.nc", s, scheduler=scheduler, progress=False,
                    say=said.append)
        maps[name] = xr.open_dataset(tmp_path / f"{name}.nc").load()
    records = {name: json.loads(m.attrs["tile_records"]) for name, m in maps.items()}
    lone = [r for r in records["both"] if r.get("segments") == 1 and "skipped" not in r]
    assert lone and all(r["segments"] >= 2 or "skipped" in r for r in records["cluster"])
    inverted = {name: [r for r in rs if "skipped" not in r and r not in lone] for name, rs in records.items()}
    assert inverted["both"] == inverted["cluster"]  # the lone drifter in no other tile
    line = [x for x in said if "mapped from their drifters" in x][0]
    assert f"({len(lone)} of a single drifter segment: about zero, its std at least" in line
    a, b = maps["cluster"], maps["both"]
    known = np.isfinite(a.u.values)
    for name in ("u", "v", "u_std", "v_std"):
        np.testing.assert_array_equal(b[name].values[known], a[name].values[known])
    seen = (b.n_fixes.values > 0) & ~known
    assert seen.sum() > 10 and np.all(np.isfinite(b.u.values[seen]))
    for c, truth in (("u", U), ("v", V)):
        error = b[c].values[seen] - truth
        assert np.sqrt(np.mean(error**2)) < 0.02
        assert np.mean(np.abs(error) < 1.96 * b[f"{c}_std"].values[seen]) > 0.9


def test_inertial_oscillations_stay_out_of_the_daily_map(map_scheduler, tmp_path):
    """The drifters in the uniform current also loop at their local inertial period (0.15 m/s, all in phase, as
    wind makes them over hundreds of km), as a drogued drifter's hourly fixes do. The map is of the current: each
    drifter's positions are averaged over its inertial period and two tidal periods first. Without that average
    the maps hold the loops' phase (0.02 m/s here; 0.14 near the fixes of a month of eddies and loops). Within a
    day of either end of a drifter's track, where the average's windows do not fit (a quarter of these 8-day
    tracks), the average is carried from where they last fit, else the maps' first and last days hold the loops."""
    from lagda.cli import build_parser

    for command in ("map", "assimilate"):  # the command lines' switch
        parse = lambda *extra: build_parser().parse_args([command, "--tracks", "t.nc", "--out", "o.nc", *extra])
        assert parse().low_pass and not parse("--no-low-pass").low_pass
    s, scheduler = small_settings(method="basis"), map_scheduler  # what the tile basis does
    write_archive(tmp_path / "loops.nc", -40.0, 30.0, size=3.0, days=8, inertial=0.15)
    errors = {}
    for low_pass in (True, False):
        out = tmp_path / f"map_{low_pass}.nc"
        summary = map_archive(tmp_path / "loops.nc", out, dataclasses.replace(s, low_pass=low_pass),
                              scheduler=scheduler, progress=False, say=lambda _: None)
        assert any(n.startswith("low-pass: ") for n in summary["notes"]) == low_pass
        with xr.open_dataset(out) as m:
            seen = (m.n_fixes.values > 0) & np.isfinite(m.u.values)
            errors[low_pass] = np.sqrt(np.mean((m.u.values[seen] - U) ** 2 + (m.v.values[seen] - V) ** 2))
            assert ("low-pass: " in m.attrs["notes"]) == low_pass
    assert errors[True] < 0.002 and errors[False] > 0.01


def test_the_bands_beside_a_jet_its_drifters_gathered_in_hold_the_ocean_at_rest(map_scheduler, tmp_path):
    """Drifters gather in a narrow jet (1.2 m/s, 25 km wide), which the tile basis cannot resolve: its uniform
    current takes up their mean velocity and carries it to the cells beside the jet, where the ocean is at rest.
    Away from the drifters the std now holds their mean square velocity, not only their spread about their mean,
    and so it does in a tile whose local GP was rejected (its std was the error model's alone): the bands hold the
    resting ocean there, where they held it on 0.3% of those cells."""
    s, scheduler = small_settings(method="basis"), map_scheduler  # what the tile basis does
    s = dataclasses.replace(s, region=(-40.0, -34.0, 30.0, 34.0), period=(s.period[0], s.period[0] + 5 * 86400.0))
    jet_lat, peak, width_m = 32.0, 1.2, 25e3
    hours = np.arange(5 * 24)
    rows, t0 = [], np.datetime64("2025-01-01T00:00:00")
    for k, (lon, lat) in enumerate([(-39.8, 32.05), (-39.5, 31.95), (-39.2, 32.1), (-39.9, 31.9), (-39.0, 32.0),
                                    (-39.6, 32.3)]):
        for h in hours:
            rows.append(f"d{k},{str(t0 + np.timedelta64(int(h), 'h'))}Z,{lon:.6f},{lat:.6f}")
            y = (lat - jet_lat) * np.pi / 180 * EARTH_RADIUS_M
            u = peak * np.exp(-0.5 * (y / width_m) ** 2)
            lon += np.degrees(u * 3600.0 / (EARTH_RADIUS_M * np.cos(np.radians(lat))))
    (tmp_path / "jet.csv").write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")
    map_archive(tmp_path / "jet.csv", tmp_path / "jet.nc", s, scheduler=scheduler, progress=False,
                say=lambda _: None)
    with xr.open_dataset(tmp_path / "jet.nc") as m:
        lat = m.lat.values[None, :, None] + 0 * m.u.values
        u_true = peak * np.exp(-0.5 * ((lat - jet_lat) * np.pi / 180 * EARTH_RADIUS_M / width_m) ** 2)
        beside = (np.abs(lat - jet_lat) > 1.0) & np.isfinite(m.u.values)  # over 110 km from the jet
        held = (np.abs(m.u.values - u_true) < 1.96 * m.u_std.values) & (np.abs(m.v.values) < 1.96 * m.v_std.values)
        assert beside.sum() > 100 and np.mean(np.abs(m.u.values[beside])) > 0.2  # the jet carried beside it
        assert held[beside].mean() >= 0.9
