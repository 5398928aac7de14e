"""The global synthetic archive (experiments/globe): its flow is
divergence-free on the sphere, its Zarr store reads as its netCDF file does, and its drifters cross the dateline
without a jump, reach beyond 70 degrees and stay on land once stranded."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("global_land_mask")
pytest.importorskip("zarr")
from experiments.globe import archive as archive_module  # noqa: E402 (after the skips)
from experiments.globe import flow as flow_module  # noqa: E402

# a tiny archive with many polar, dateline and coastal releases and no spikes, gaps or noise: the clean tracks
CLEAN = archive_module.GlobalArchiveConfig(drifters=30, days=10, polar=0.3, dateline=0.3, coastal=0.3,
                                           spike_rate=0.0, gaps_per_30d=0.0, missing=0.0, noise_m=(0.0, 0.0),
                                           strand_days=(3.0, 5.0), seed=3)


@pytest.fixture(scope="module")
def clean():
    return archive_module.make_archive(CLEAN, log=lambda *a: None)


def _great_circle_m(lon1, lat1, lon2, lat2):
    phi1, phi2, dlam = np.deg2rad(lat1), np.deg2rad(lat2), np.deg2rad(lon2 - lon1)
    cos = np.sin(phi1) * np.sin(phi2) + np.cos(phi1) * np.cos(phi2) * np.cos(dlam)
    return flow_module.EARTH_RADIUS_M * np.arccos(np.clip(cos, -1, 1))


def _tracks(rows):
    edges = np.concatenate([[0], np.cumsum(rows["rowsize"])])
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def test_the_flow_is_divergence_free_on_the_sphere():
    """Catches a wrong metric factor (1/cos lat in v, R) or a derivative of the streamfunction dropped (of the land
    taper, of an eddy): the divergence would then be of the vorticity's size, here it is below 1e-5 of it."""
    flow = flow_module.GlobalFlow(flow_module.FlowConfig(days=20.0, seed=2))
    rng = np.random.default_rng(0)
    lon, lat = rng.uniform(-180, 180, 4000), np.rad2deg(np.arcsin(rng.uniform(-0.97, 0.97, 4000)))
    lon, lat = lon[~flow.is_land(lon, lat)], lat[~flow.is_land(lon, lat)]
    h, t, R = 1e-4, 5 * 86400.0, flow_module.EARTH_RADIUS_M  # h in degrees
    u_e, v_e = flow.velocity(lon + h, lat, t)
    u_w, v_w = flow.velocity(lon - h, lat, t)
    u_n, v_n = flow.velocity(lon, lat + h, t)
    u_s, v_s = flow.velocity(lon, lat - h, t)
    step, cos = np.deg2rad(2 * h), np.cos(np.deg2rad(lat))
    cos_n, cos_s = np.cos(np.deg2rad(lat + h)), np.cos(np.deg2rad(lat - h))
    div = ((u_e - u_w) / step + (v_n * cos_n - v_s * cos_s) / step) / (R * cos)
    vort = ((v_e - v_w) / step - (u_n * cos_n - u_s * cos_s) / step) / (R * cos)
    speed = np.hypot(*flow.velocity(lon, lat, t))
    assert 0.08 < np.sqrt(np.mean(speed ** 2)) < 0.25  # a realistic RMS speed at sea, m/s
    assert np.sqrt(np.mean(div ** 2)) < 1e-5 * np.sqrt(np.mean(vort ** 2))


def test_the_zarr_store_reads_as_the_netcdf_file(tmp_path):
    """Catches a store lagda cannot read as the GDP's (layout, chunking across trajectories, time encoding): lagda's
    reader and its lazy archive give the Zarr store's fixes equal to the netCDF file's, read in several chunks; and
    a truth rebuilt from the folder with a wrong time origin or settings: it must be the flow the drifters moved in."""
    from lagda.io.archive import Archive
    from lagda.io.formats import read_raw

    cfg = dataclasses.replace(archive_module.GlobalArchiveConfig(), days=4, chunk_obs=500)
    rows, stats = archive_module.make_archive(cfg, log=lambda *a: None)
    archive_module.write(rows, cfg, str(tmp_path))
    zarr, nc = read_raw(str(tmp_path / "archive.zarr")), read_raw(str(tmp_path / "archive.nc"))
    assert len(zarr.times) == len(nc.times) == stats["drifters"]
    assert sum(len(t) for t in zarr.times) == stats["fixes"] > 5 * cfg.chunk_obs
    assert [str(i) for i in zarr.ids] == [str(i) for i in nc.ids]
    for a, b, p, q in zip(zarr.times, nc.times, zarr.positions, nc.positions):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(p, q)
    lazy = [(lon, lat, seconds) for *_, lon, lat, seconds in Archive(str(tmp_path / "archive.zarr")).chunks(
        3000, "read")]
    np.testing.assert_array_equal(np.concatenate([c[0] for c in lazy]), np.concatenate([p[:, 0] for p in nc.positions]))
    np.testing.assert_array_equal(np.concatenate([c[2] for c in lazy]), np.concatenate(nc.times))
    truth = archive_module.truth(str(tmp_path))  # rebuilt from config.json, times as the fixes have them
    lon, lat, when = nc.positions[0][:50, 0], nc.positions[0][:50, 1], nc.times[0][30]
    moved = flow_module.GlobalFlow(cfg.flow()).velocity(lon, lat, when - nc.times[0][0])  # the first starts at 0
    np.testing.assert_array_equal(truth(lon, lat, when), moved)
    np.testing.assert_array_equal(truth(lon, lat, np.datetime64(int(when), "s")), moved)


def test_drifters_cross_the_dateline_and_the_poles_without_a_jump(clean):
    """Catches a longitude written unwrapped or wrapped with a jump (a 360-degree step is ~40,000 km in an hour)
    and a pole mishandled: every clean hourly step is below 5.4 km (1.5 m/s), some tracks cross the dateline,
    and some reach beyond 70 degrees of latitude (never beyond 89)."""
    rows, stats = clean
    crossers, step_max = 0, 0.0
    for sl in _tracks(rows):
        lon, lat, t = rows["lon"][sl], rows["lat"][sl], rows["time"][sl].astype("datetime64[s]").astype(float)
        moved = np.diff(t) > 0  # duplicated times repeat a fix
        step = _great_circle_m(lon[:-1], lat[:-1], lon[1:], lat[1:])[moved] / np.diff(t)[moved] * 3600.0
        step_max = max(step_max, step.max())
        crossers += bool(np.any(np.abs(np.diff(lon)) > 180.0))
    assert crossers >= 1 and crossers == stats["dateline_crossers"]
    assert step_max < 5.4e3
    assert np.all((rows["lon"] >= -180) & (rows["lon"] < 180))
    assert stats["above_70n"] + stats["below_70s"] >= 1 and np.abs(rows["lat"]).max() <= 89.0
    assert np.abs(rows["lat"]).max() > 70.0


def test_a_stranded_drifter_stays_on_land(clean):
    """Catches a stranded drifter that keeps moving or stops at sea: from its stranding hour its fixes are one
    point, it ends within `strand_days` of it, and lagda.io.land's 1-km mask puts the first such point on land
    (one, as each read of the mask takes about a second)."""
    from lagda.io.land import sea_fraction

    rows, stats = clean
    assert stats["stranded"] >= 1
    start = np.datetime64(CLEAN.start, "h")
    aground = []
    for sl, ident in zip(_tracks(rows), rows["id"]):
        if ident not in stats["stranded_ids"]:
            continue
        hour = stats["strand_hours"][stats["stranded_ids"].index(ident)]
        hours = (rows["time"][sl].astype("datetime64[h]") - start).astype(int)
        after = hours >= hour
        lon, lat = rows["lon"][sl][after], rows["lat"][sl][after]
        assert after.any() and np.ptp(lon) == 0 and np.ptp(lat) == 0
        assert hours[-1] - hour < CLEAN.strand_days[1] * 24
        aground.append((lon[0], lat[0]))
    res = flow_module.LAND_RES  # the 0.1-degree cell holding the first point, read from the 1-km mask
    centre_lon = -180 + (np.floor((aground[0][0] + 180) / res) + 0.5) * res
    centre_lat = -90 + (np.floor((aground[0][1] + 90) / res) + 0.5) * res
    assert sea_fraction(np.array([centre_lon]), np.array([centre_lat]), res)[0, 0] < 0.5
