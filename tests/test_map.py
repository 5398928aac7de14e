"""lagda map: tiles and blend on known currents (one crossing the dateline), resume after a kill, Dask workers."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xarray as xr

from lagda.io.physical import EARTH_RADIUS_M, parse_time
from lagda.mapping.dask_driver import _run_tile, local_cluster
from lagda.mapping.methods.interface import TileMethod, TileSummary
from lagda.mapping.run import map_archive
from lagda.mapping.settings import MapSettings

START = "2025-01-01T00:00:00Z"
U, V = 0.12, -0.05  # m/s


def write_archive(path, lon0, lat0, size=6.0, days=16, n=14, seed=0, spikes=0, every_h=1.0, inertial=0.0):
    """Writes a GDP-like ragged archive of drifters in the uniform current (U, V), a fix every `every_h` hours with
    20 m noise; with `inertial` m/s, the drifters also loop clockwise at their local inertial period, all in phase."""
    rng = np.random.default_rng(seed)
    t0 = np.datetime64("2025-01-01T00:00:00", "ns")
    rows, lons, lats, times = [], [], [], []
    for _ in range(n):
        lon, lat = lon0 + rng.uniform(0, size), lat0 + rng.uniform(0, size)
        s = 3600.0 * every_h * np.arange(int(days * 24 / every_h))
        f = 2 * 7.2921159e-5 * np.sin(np.radians(lat))
        loop_x, loop_y = inertial / f * np.sin(f * s), inertial / f * np.cos(f * s)  # u = U + A cos ft, v = V - A sin
        lat_t = lat + np.degrees((V * s + loop_y + rng.normal(0, 20, len(s))) / EARTH_RADIUS_M)
        lon_t = lon + np.degrees((U * s + loop_x + rng.normal(0, 20, len(s)))
                                 / (EARTH_RADIUS_M * np.cos(np.radians(lat_t))))
        if spikes:
            k = rng.choice(np.arange(5, len(s) - 5), spikes, replace=False)
            lat_t[k] += 0.45  # 50 km off
        rows.append(len(s))
        lons.append((lon_t + 180.0) % 360.0 - 180.0)
        lats.append(lat_t)
        times.append(t0 + (s * 1e9).astype("timedelta64[ns]"))
    xr.Dataset({"rowsize": ("traj", np.array(rows)), "id": ("traj", 300234060000000 + np.arange(n)),
                "lon": ("obs", np.concatenate(lons), {"units": "degrees_east"}),
                "lat": ("obs", np.concatenate(lats), {"units": "degrees_north"}),
                "time": ("obs", np.concatenate(times))}).to_netcdf(path)


def settings(lon0, lat0, size=6.0, method="basis"):
    """The tests' map settings; most of this file tests the basis method's tiles (tests/test_objective.py the
    default's)."""
    return MapSettings((lon0, (lon0 + size + 180.0) % 360.0 - 180.0, lat0, lat0 + size),
                       (parse_time(START), parse_time(START) + 14 * 86400.0), resolution=0.5, tile_deg=3.0,
                       halo_deg=1.0, window_days=10.0, step_days=5.0, k_max=3.0, degree=1, method=method)


@pytest.fixture(scope="module")
def uniform(tmp_path_factory):
    """(archive, settings, an uninterrupted map, the warnings it gave) of a uniform current north of the equator,
    with Dask's large-graph warning lowered from 10 MB to 4 kB (a task holding a tile's fixes here was up to 44 kB)."""
    import warnings

    import dask

    folder = tmp_path_factory.mktemp("map")
    archive = folder / "gdp.nc"
    write_archive(archive, -40.0, 30.0, spikes=3)
    out = folder / "map.nc"
    with warnings.catch_warnings(record=True) as caught, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "4kB"}):
        warnings.simplefilter("always")
        summary = map_archive(archive, out, settings(-40.0, 30.0), workers=2, progress=False, say=lambda _: None)
    return archive, settings(-40.0, 30.0), out, summary, [str(w.message) for w in caught]


def test_tiles_fixes_go_to_the_workers_as_data_not_in_the_task_graph(uniform):
    """A dense tile (300 drifters at 15-minute fixes: 20 MB) made Dask warn "Sending large graph" when its fixes
    were arguments of the task; scattered first, the graph holds their key alone."""
    assert not [message for message in uniform[-1] if "large graph" in message]


def test_local_cluster_workers_keep_the_adaptive_malloc_threshold_and_leave_ctrl_c_to_lagda():
    """Dask's default MALLOC_TRIM_THRESHOLD_ (a fixed mmap threshold: page faults on every matrix) is not set; the
    workers ignore SIGINT (a terminal's Ctrl-C reaches them too: each printed a traceback), the map stops on it."""
    import signal

    from dask.distributed import Client

    # Python's own Ctrl-C handler here, whatever started the tests (a shell's `&` or nohup starts them ignoring
    # SIGINT, which the workers would inherit): their SIG_IGN must be lagda's doing, and this process's is left
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with local_cluster(1) as cluster, Client(cluster) as client:
            assert list(client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")).values()) == [None]
            assert list(client.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS")).values()) == ["1"]
            assert list(client.run(lambda: signal.getsignal(signal.SIGINT) is signal.SIG_IGN).values()) == [True]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_uniform_current_is_recovered_on_every_tile_without_seams(uniform):
    _, s, out, summary, _ = uniform
    assert summary["inverted"] == summary["tiles"] == len(s.tiles())
    with xr.open_dataset(out) as ds:
        assert ds.u.dims == ("time", "lat", "lon") and ds.u.attrs["units"] == "m s-1"
        where = ds.n_fixes > 0
        assert int(where.sum()) > 100
        u, v = ds.u.where(where), ds.v.where(where)
        # every cell with drifters, in every tile and across tile edges, within 10% of the current's speed
        speed = np.hypot(U, V)
        assert float(np.nanmax(np.abs(u - U))) < 0.1 * speed and float(np.nanmax(np.abs(v - V))) < 0.1 * speed
        assert float(np.nanmedian(ds.u_std.where(where))) > 0
        assert "spikes" in ds.attrs["notes"] and ds.attrs["clean_spikes_dropped"] == 3 * 14  # 3 per drifter
        records = json.loads(ds.attrs["tile_records"])  # what each tile chose, the local GP's scales included
        assert len(records) == summary["tiles"] and ds.attrs["local_gp"].startswith("near the drifters, in ")
        fitted = [r["local_gp"] for r in records if isinstance(r.get("local_gp"), dict)]
        assert fitted and all(10.0 <= f["ell_km"] and f["std_m_s"] > 0 for f in fitted)
        # the cleaned spikes leave no velocity off the uniform current: the tiles' outlier screen drops none
        assert ds.attrs["tile_velocity_outliers_dropped"] == 0
        assert all(r.get("velocity_outliers_dropped") == 0 for r in records if "skipped" not in r)
        assert "far off their tile's fitted field" not in " ".join(summary["notes"])  # none left out: not said


@pytest.mark.parametrize("lon0, lat0", [(176.0, -20.0), (-20.0, 64.0)], ids=["dateline", "65N-iceland"])
def test_a_current_across_the_dateline_or_at_high_latitude(tmp_path, lon0, lat0):
    """The high-latitude box holds Iceland's north coast: its land cells are NaN, its sea cells mapped."""
    archive, out = tmp_path / "tracks.nc", tmp_path / "map.zarr"
    write_archive(archive, lon0, lat0, n=10)
    s = settings(lon0, lat0)
    if lat0 < 60:
        map_archive(archive, out, s, workers=1, progress=False, say=lambda _: None)
    else:  # a scheduler that is already running (--scheduler ADDRESS), as a cluster of machines would be
        from dask.distributed import LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
            map_archive(archive, out, s, scheduler=cluster.scheduler_address, progress=False, say=lambda _: None)
    with xr.open_zarr(out) as ds:
        lon = ds.lon.values
        assert np.all(np.diff(lon) > 0) and lon[0] == pytest.approx(lon0 + 0.25)
        assert lon[-1] == pytest.approx(lon0 + 5.75)  # 176 .. -178 is given as 176.25 .. 181.75: increasing
        where = ds.n_fixes > 0
        assert int(where.sum()) > 50
        speed = np.hypot(U, V)
        # at 64-70 N the tangent plane's east-west scale varies by up to 20% across a tile's box, a trend the
        # periodic basis fits only in part: the typical cell is off by a few per cent there
        worst, typical = (0.1, 0.03) if lat0 < 60 else (0.2, 0.05)
        for c, true in (("u", U), ("v", V)):
            error = np.abs(ds[c].where(where).values - true)
            assert np.nanmax(error) < worst * speed and np.nanmedian(error) < typical * speed
        land = ds.sea_area_fraction.values == 0
        assert ds.sea_area_fraction.attrs["standard_name"] == "sea_area_fraction"
        (note,) = [n for n in json.loads(ds.attrs["notes"]) if n.startswith("land:")]
        if lat0 > 60:  # these drifters, made without land, cross Iceland: the note counts their fixes there
            assert land.sum() == 32 and "left NaN" in note and "fixes lie in them" in note
            for name in ("u", "v", "u_std", "v_std"):
                assert np.isnan(ds[name].values[:, land]).all() and np.isfinite(ds[name].values[:, ~land]).all()
        else:
            assert not land.any() and note.startswith("land: 0 of 144 cells")
        if lat0 < 60:  # the figure of a map across the dateline: one piece, its longitudes continued past 180
            from lagda.mapping.plot import busiest_day, map_figure

            figure = map_figure(ds, busiest_day(ds))
            assert all(ax.get_xlim() == pytest.approx((176.0, 182.0), abs=0.3) for ax in figure.axes[:3])


def test_a_killed_map_resumes_to_the_same_store(uniform, tmp_path):
    archive, s, reference, _, _ = uniform
    out = tmp_path / "map.nc"
    cmd = [sys.executable, "-m", "lagda", "map", "--tracks", str(archive), "--region", *map(str, s.region),
           "--period", "2025-01-01", "2025-01-15", "--resolution", "0.5", "--tile-size", "3", "--halo", "1",
           "--window-days", "10", "--window-step", "5", "--k-max", "3", "--degree", "1", "--workers", "1",
           "--tile-method", "basis",
           "--out", str(out)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    tiles = tmp_path / "map.nc.partial" / "tiles"
    deadline = time.time() + 120
    while time.time() < deadline and not (tiles.is_dir() and any(p.suffix == ".npz" for p in tiles.iterdir())):
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the command and its Dask workers
    child.wait()
    assert not out.exists(), "killed after the end: the test did not interrupt the run"
    assert (tmp_path / ".map.nc.lock").exists()  # its lock file is left, its lock gone with it
    resumed = subprocess.run([*cmd, "--resume", "--no-progress"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "note: " in resumed.stderr and "tile/s" not in resumed.stderr  # the notes without the bar
    assert not (tmp_path / "map.nc.partial").exists() and not (tmp_path / ".map.nc.lock").exists()
    with xr.open_dataset(out) as a, xr.open_dataset(reference) as b:
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)
    again = subprocess.run([*cmd, "--resume", "--plot", str(tmp_path / "day.png")], capture_output=True, text=True)
    assert again.returncode == 0 and "already complete" in again.stderr
    assert "(the day with the most fixes)" in again.stdout and (tmp_path / "day.png").stat().st_size > 0


def test_map_refuses_bad_input_in_one_line(uniform, tmp_path):
    archive, s, _, _, _ = uniform
    run = lambda *extra: subprocess.run([sys.executable, "-m", "lagda", "map", "--tracks", str(archive), "--region",
                                         "-40", "-34", "30", "36", "--period", "2025-01-01", "2025-01-15",
                                         "--out", str(tmp_path / "m.nc"), *extra], capture_output=True, text=True)
    bad = run("--region", "-40", "-34", "80", "86")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "latitudes" in bad.stderr
    none = run("--period", "2030-01-01", "2030-01-15")
    assert none.returncode == 2 and "no fix" in none.stderr
    whole = run("--withhold", "1")
    assert whole.returncode == 2 and whole.stderr.strip() == ("lagda map: error: --withhold 1: the fraction of "
                                                              "drifters to withhold must be in [0, 1)")
    assert not any(p.name.startswith("m.nc") for p in tmp_path.iterdir())


FAULTS = ["map-partial:created", "map-partial:renamed", "map-tile:written@2", "map-tile:renamed@2", "map-final:open",
          "map-final:written", "map-final:renamed", "map-partial-removal:renamed"]


@pytest.fixture(scope="module")
def small_map(uniform, tmp_path_factory):
    """(archive, settings of a 3-tile map, a running in-process scheduler, its uninterrupted map)."""
    from dask.distributed import LocalCluster

    archive = uniform[0]
    s = MapSettings((-40.0, -37.0, 30.0, 33.0), (parse_time(START), parse_time(START) + 8 * 86400.0),
                    resolution=0.5, tile_deg=3.0, halo_deg=1.0, window_days=8.0, step_days=4.0, k_max=3.0, degree=1)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        out = tmp_path_factory.mktemp("reference") / "map.nc"
        map_archive(archive, out, s, scheduler=cluster.scheduler_address, progress=False, say=lambda _: None)
        yield archive, s, cluster.scheduler_address, out


@pytest.mark.parametrize("fault", FAULTS)
def test_an_interrupt_at_each_transition_then_resume_gives_the_same_map(small_map, tmp_path, monkeypatch, fault):
    from simulate.atomic import FAULT_ENV, reset_fault_counts

    archive, s, scheduler, reference = small_map
    out = tmp_path / "map.nc"
    run = lambda **kw: map_archive(archive, out, s, scheduler=scheduler, progress=False, say=lambda _: None, **kw)
    reset_fault_counts()
    monkeypatch.setenv(FAULT_ENV, f"{fault}:interrupt")
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.delenv(FAULT_ENV)
    summary = run(resume=True)
    assert summary.get("already_complete", False) == fault.startswith(("map-final:renamed", "map-partial-removal"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.nc"]  # no temporary, no partial folder left
    with xr.open_dataset(out) as a, xr.open_dataset(reference) as b:
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


def test_a_second_map_on_the_same_output_is_refused_before_it_writes(small_map, tmp_path):
    from simulate.atomic import Busy, OutputLock

    archive, s, scheduler, _ = small_map
    out = tmp_path / "map.nc"
    with OutputLock(out, "lagda map"):  # a run writing it (another process's lock is tested with lagda simulate)
        with pytest.raises(Busy, match=f"another lagda map is writing {out} \\(pid {os.getpid()} on "):
            map_archive(archive, out, s, scheduler=scheduler, progress=False, say=lambda _: None)
        assert sorted(p.name for p in tmp_path.iterdir()) == [".map.nc.lock"]
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match=f"cannot write .*: directory {tmp_path / 'missing'} does not exist"):
        map_archive(archive, tmp_path / "missing" / "map.nc", s, scheduler=scheduler, progress=False,
                    say=lambda _: None)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match=f"cannot write .*: {tmp_path / 'a-file'} is a file, not a directory"):
        map_archive(archive, tmp_path / "a-file" / "map.nc", s, scheduler=scheduler, progress=False,
                    say=lambda _: None)


def test_a_map_that_cannot_be_written_keeps_its_tiles_and_says_resume(small_map, tmp_path, monkeypatch):
    """The final write failing (a full disk: netCDF4's RuntimeError) is one OSError naming the tiles saved and
    --resume; the resume, with room again, writes the uninterrupted map."""
    archive, s, scheduler, reference = small_map
    out = tmp_path / "map.nc"
    dump = xr.Dataset.dump_to_store

    def full_disk(self, store, **kwargs):
        raise RuntimeError("NetCDF: HDF error")

    monkeypatch.setattr(xr.Dataset, "dump_to_store", full_disk)
    with pytest.raises(OSError, match=r"NetCDF: HDF error .*; \d+ tiles are saved in .*resume=True"):
        map_archive(archive, out, s, scheduler=scheduler, progress=False, say=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.nc.partial"]
    monkeypatch.setattr(xr.Dataset, "dump_to_store", dump)
    map_archive(archive, out, s, scheduler=scheduler, resume=True, progress=False, say=lambda _: None)
    with xr.open_dataset(out) as a, xr.open_dataset(reference) as b:
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


def _other_codes_run_tile(*args):
    """`_run_tile` as a worker with another lagda install returns it (a module function: Dask pickles it by
    reference)."""
    piece = _run_tile(*args)
    return {**piece, "info": {**piece["info"], "code": "0" * 16}}


def test_tiles_of_other_lagda_code_are_never_blended_into_a_map(small_map, tmp_path, monkeypatch):
    """A tile from a worker running other code stops the run; a partial run made by other code is not resumed; a
    complete map made by other code is left as it is on --resume, said in a note. With this code's digest the
    resume writes the uninterrupted map."""
    import netCDF4

    from lagda.mapping import dask_driver
    from simulate.provenance import code_digest

    archive, s, scheduler, reference = small_map
    out, said = tmp_path / "map.nc", []
    go = lambda **kw: map_archive(archive, out, s, scheduler=scheduler, progress=False, say=said.append, **kw)
    monkeypatch.setattr(dask_driver, "_run_tile", _other_codes_run_tile)
    with pytest.raises(dask_driver.TileFailed, match=rf"made by a Dask worker running other lagda code \(source digest "
                                                 rf"0{{16}}; this run's is {code_digest()}\): install the same"):
        go()
    monkeypatch.undo()
    partial = tmp_path / "map.nc.partial"
    assert not list((partial / "tiles").iterdir())  # nothing of the other code saved
    manifest = json.loads((partial / "manifest.json").read_text())
    assert manifest["code"] == code_digest()
    (partial / "manifest.json").write_text(json.dumps({**manifest, "code": "0" * 16}))
    with pytest.raises(ValueError, match=rf"cannot resume {out}: its partial run was made by other lagda code "
                                         rf"\(source digest 0{{16}}; this is {code_digest()}\); pass overwrite=True"):
        go(resume=True)
    del manifest["code"]  # a partial run made before lagda recorded its code
    (partial / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"made by other lagda code \(no source digest recorded"):
        go(resume=True)
    go(resume=True, overwrite=True)
    with xr.open_dataset(out) as a, xr.open_dataset(reference) as b:
        assert json.loads(a.attrs["manifest"])["code"] == code_digest()
        assert "code" not in a.attrs["tile_records"]  # said once, in the manifest
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)
    with netCDF4.Dataset(out, "a") as ds:  # the complete map as other code made it
        ds.setncattr("manifest", json.dumps({**json.loads(ds.getncattr("manifest")), "code": "1" * 16}))
    said.clear()
    assert go(resume=True)["already_complete"]
    assert said[0] == (f"note: {out} was made by other lagda code (source digest {'1' * 16}; this is "
                       f"{code_digest()}): left as it is; overwrite=True makes it again with this code")


_GATE = {"first": None, "open": threading.Event()}


def _gated_run_tile(fixes, tile, *args):
    """`_run_tile`, the tiles after `_GATE["first"]` held until `_GATE["open"]` (a module function: Dask pickles
    it by reference, also for in-process workers)."""
    if tile.key != _GATE["first"]:
        _GATE["open"].wait(60)
    return _run_tile(fixes, tile, *args)


async def _lose_a_pending_tiles_worker(dask_scheduler):
    """Removes from the scheduler the worker holding the fixes of a tile not yet computed, as when its machine is
    lost (the scheduler's own steps for a worker that stops answering); returns the tile's task key."""
    for task in dask_scheduler.tasks.values():
        if task.key.startswith("tile-") and task.state != "memory":
            holder = next(iter(next(iter(task.dependencies)).who_has)).address
            await dask_scheduler.remove_worker(holder, stimulus_id="test-lost-worker")
            return task.key
    return None


@pytest.mark.parametrize("sends", [3, 1], ids=["sent-again", "given-up-then-resumed"])
def test_a_lost_dask_worker_loses_no_tile(small_map, tmp_path, monkeypatch, sends):
    """The worker holding a pending tile's fixes is lost after the first tile is saved: the tile is sent again and
    the map is the uninterrupted one; allowed one send only, the run stops (TileFailed) keeping the saved tile, and
    a --resume writes the same map."""
    from dask.distributed import Client, LocalCluster

    import lagda.mapping.dask_driver as driver

    archive, s, _, reference = small_map
    out, notes, lost = tmp_path / "map.nc", [], []
    save = driver.save_piece
    _GATE["first"] = s.tiles()[0].key
    _GATE["open"].clear()

    def save_then_lose_a_worker(partial, piece):
        save(partial, piece)
        if not lost:
            lost.append(client.run_on_scheduler(_lose_a_pending_tiles_worker))
            _GATE["open"].set()

    monkeypatch.setattr(driver, "_run_tile", _gated_run_tile)
    monkeypatch.setattr(driver, "save_piece", save_then_lose_a_worker)
    monkeypatch.setattr(driver, "TILE_SENDS", sends)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        go = lambda **kw: map_archive(archive, out, s, scheduler=cluster.scheduler_address, progress=False,
                                      say=notes.append, **kw)
        if sends == 1:
            with pytest.raises(driver.TileFailed,
                               match="each of the 1 times it was sent.*the same call with resume=True"):
                go()
            assert len(os.listdir(f"{out}.partial/tiles")) >= 1
            go(resume=True)
        else:
            go()
    tile = lost[0].removeprefix("tile-").rsplit("-", 1)[0]  # its first send was lost
    assert lost[0].endswith("-1") and (f"note: tile {tile}: its Dask worker was lost; sent again" in notes) == \
        (sends > 1)
    with xr.open_dataset(out) as a, xr.open_dataset(reference) as b:
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


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


def test_daily_fixes_are_mapped_and_said_two_day_fixes_refused(tmp_path):
    # the uniform current from a fix a day: every cell with a fix has it, and a note says the segments' limit;
    # from a fix every two days there is no velocity to map: one error, nothing written
    archive, out = tmp_path / "daily.nc", tmp_path / "map.nc"
    write_archive(archive, -40.0, 30.0, size=3.0, days=16, n=14, every_h=24.0)
    said = []
    summary = map_archive(archive, out, settings(-40.0, 30.0, size=3.0), workers=1, progress=False,
                          say=said.append)
    assert summary["inverted"] == summary["tiles"]
    assert any("14 of 14 drifters have fixes further apart than 6 h (median step 24 h)" in s for s in said)
    assert any("fitted to 24-h velocities" in s for s in said), said
    with xr.open_dataset(out) as ds:
        fixed = ds.n_fixes.values > 0
        assert fixed.sum() > 50
        np.testing.assert_allclose(ds.u.values[fixed], U, atol=0.01)
        np.testing.assert_allclose(ds.v.values[fixed], V, atol=0.01)
    sparse = tmp_path / "two_days.nc"
    write_archive(sparse, -40.0, 30.0, size=3.0, days=16, n=14, every_h=48.0)
    with pytest.raises(ValueError, match="none of the .* fixes the cleaning kept in the region and period lies in a "
                                         "drifter segment"):
        map_archive(sparse, tmp_path / "none.nc", settings(-40.0, 30.0, size=3.0), workers=1, progress=False,
                    say=said.append)
    assert not any(p.name.startswith("none.nc") for p in tmp_path.iterdir())


@pytest.mark.parametrize(("every_h", "n"), [(1, 24), (6, 24), (1, 150)], ids=["hourly", "6-hourly", "dense"])
def test_the_local_gp_maps_an_eddy_the_tile_basis_cannot_resolve(every_h, n):
    # k_max 3 over a 5-degree box resolves waves of 180 km and longer; the eddy's radius is 40 km: the local GP of
    # what the basis leaves out returns it along the drifters, and its std narrows there, from hourly fixes, from
    # the GDP's 6-hourly ones, and from 150 drifters' hourly fixes (a dense deployment: the few velocities at the
    # eddy's peak are far above the residuals' 99th percentile, which once rejected the fit)
    from lagda.mapping.methods.basis import invert_tile, tile_fixes

    s = settings(-40.0, 30.0)
    tile = s.tiles()[0]
    grid = s.grid()
    fixes, velocity = _eddy_fixes(tile.centre, n=n, every_h=every_h)
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
        piece = invert_tile(fixes, tile, grid, s.k_max, s.degree, local_gp=local)
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
    from lagda.mapping.methods.basis import invert_tile, tile_fixes

    s = settings(-40.0, 30.0)
    tile = s.tiles()[0]
    grid = s.grid()
    fixes, velocity = _eddy_fixes(tile.centre, n=150, cluster=(-0.6, 0.5, 7.0))
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
        piece = invert_tile(fixes, tile, grid, s.k_max, s.degree, local_gp=local)
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

    s = settings(-40.0, 30.0)
    tile = s.tiles()[0]
    grid = s.grid()
    fixes, _ = _eddy_fixes(tile.centre, n=n, cluster=cluster)
    per_drifter = len(fixes.time) // len(fixes.ids)
    lat = fixes.lat.copy()
    lat[[d * per_drifter + k for d in range(0, 20, 4) for k in (60, 150)]] += np.degrees(5000.0 / EARTH_RADIUS_M)
    pieces = {name: invert_tile(tile_fixes(f, tile), tile, grid, s.k_max, s.degree)
              for name, f in (("clean", fixes), ("spiked", dataclasses.replace(fixes, lat=lat)))}
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


def test_the_blend_in_blocks_of_days_writes_the_same_map(uniform, tmp_path, monkeypatch):
    # the blend holds BLEND_DAYS map times at once: blocks of 4 days (four blocks, the last short) give the map
    # the one-block run wrote, cell for cell
    import lagda.mapping.write as write

    archive, s, reference, _, _ = uniform
    monkeypatch.setattr(write, "BLEND_DAYS", 4)
    out = tmp_path / "blocks.zarr"
    map_archive(archive, out, s, workers=1, progress=False, say=lambda _: None)
    with xr.open_zarr(out) as a, xr.open_dataset(reference) as b:
        assert len(a.time) == 15 and a.u.encoding["chunks"][0] == 4
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


def test_archive_extent_is_the_shortest_arc_across_the_dateline_rounded_out_to_the_cells(tmp_path):
    """Drifters from 176 E to 178 W and 77 N to 83 N: the region crosses the dateline (east < west), rounded out to
    0.5-degree cells, clipped at 80 N with the fixes beyond counted; the period runs over the fixes' map days."""
    from lagda.mapping.archive import _shortest_arc, archive_extent

    archive = tmp_path / "gdp.nc"
    write_archive(archive, 176.0, 77.0, days=3, n=6)
    with xr.open_dataset(archive) as ds:
        lon, lat = ds.lon.values, ds.lat.values
        seconds = (ds.time.values - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "s")
    assert lon.min() < -170 and lon.max() > 170 and lat.max() > 80  # the archive crosses the dateline and 80 N
    east_of_176 = lon % 360.0  # the drifters' arc, unbroken
    kept = lat <= 80.0
    region, period, notes = archive_extent(archive, 0.5, 86400.0)
    expected = (np.floor(east_of_176[kept].min() / 0.5) * 0.5,
                np.floor(east_of_176[kept].max() / 0.5) * 0.5 + 0.5 - 360,
                np.floor(lat.min() / 0.5) * 0.5, min(80.0, np.floor(lat[kept].max() / 0.5) * 0.5 + 0.5))
    np.testing.assert_allclose(region, expected)
    assert region[1] < region[0]  # across the dateline
    assert period == (np.floor(seconds.min() / 86400) * 86400, np.floor(seconds.max() / 86400) * 86400)
    assert f"{int(np.sum(~kept))} fixes poleward of 80 degrees left out" in notes[0]
    assert notes[1].startswith("--period not given") and len(notes) == 2
    assert _shortest_arc(np.ones(720, bool), 0.5) == (-180.0, 180.0)  # fixes all round: the whole band
    # a region given: the period of its fixes only, and the note says so
    _, within, (note,) = archive_extent(archive, 0.5, 86400.0, region=(170.0, 179.0, 70.0, 80.0))
    assert within == period and note.startswith("--period not given") and "in the region" in note


def test_map_without_region_and_period_maps_the_archives_extent_and_says_so(tmp_path):
    """No region and no period: the archive's extent, said in a note, kept in the map's notes and manifest (so the
    same command resumes), and a map on the cells that hold fixes."""
    from lagda.mapping.archive import archive_extent

    archive, out = tmp_path / "gdp.nc", tmp_path / "map.nc"
    write_archive(archive, -40.0, 30.0, size=2.0, days=5, n=5)
    said = []
    s = settings(-40.0, 30.0)
    summary = map_archive(archive, out, MapSettings(None, None, s.resolution, s.cadence_s, s.tile_deg, s.halo_deg,
                                                    s.window_days, s.step_days, s.k_max, s.degree),
                          workers=1, progress=False, say=said.append)
    region, period, notes = archive_extent(archive, s.resolution, s.cadence_s)
    assert summary["notes"][:2] == notes and f"note: {notes[0]}" in said and f"note: {notes[1]}" in said
    with xr.open_dataset(out) as ds:
        assert json.loads(ds.attrs["notes"])[:2] == notes
        stored = json.loads(ds.attrs["manifest"])["settings"]
        assert tuple(stored["region"]) == region and tuple(stored["period"]) == period
        assert ds.lon.values[0] == region[0] + s.resolution / 2 and ds.lat.values[-1] == region[3] - s.resolution / 2
        assert np.all(np.isfinite(ds.u.values[ds.n_fixes.values > 0]))
    again = map_archive(archive, out, MapSettings(None, None, s.resolution, s.cadence_s, s.tile_deg, s.halo_deg,
                                                  s.window_days, s.step_days, s.k_max, s.degree),
                        resume=True, progress=False, say=said.append)
    assert again.get("already_complete")


def test_a_region_or_period_with_no_fix_or_upside_down_is_refused_in_one_line(tmp_path):
    """A region holding no fix said so (the cleaning of no fix once failed with an IndexError), and a region south
    of itself or a period ending before it starts before the archive is read."""
    from lagda.mapping.archive import archive_extent

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=2.0, days=3, n=3)
    with pytest.raises(ValueError, match="no fix in the region given to take the map's period from"):
        archive_extent(archive, 0.5, 86400.0, region=(10.0, 16.0, 0.0, 6.0))
    with pytest.raises(ValueError, match="south < north"):
        MapSettings(region=(-40.0, -34.0, 36.0, 30.0))
    with pytest.raises(ValueError, match="the end must be after the start"):
        MapSettings(period=(parse_time("2025-01-15"), parse_time("2025-01-01")))


def test_a_tile_that_cannot_be_inverted_is_said_with_why(small_map, tmp_path):
    """Drifters that never move (no velocity variance to choose a prior from): the tile is left NaN and the note
    says why, not that it lacked drifters."""
    _, s, scheduler, _ = small_map
    s = dataclasses.replace(s, method="basis")  # what the tile basis does
    hours = np.datetime64("2025-01-01T00", "ns") + np.arange(3 * 24) * np.timedelta64(1, "h")
    rows = [f"{k},{str(h)[:19]}Z,{-39.0 + 0.5 * k},{31.0 + 0.4 * k}" for k in range(4) for h in hours]
    (tmp_path / "still.csv").write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")
    said = []
    summary = map_archive(tmp_path / "still.csv", tmp_path / "m.nc", s, scheduler=scheduler, progress=False,
                          say=said.append)
    assert summary["inverted"] == 0
    line = [x for x in said if "tiles mapped from their drifters" in x][0]
    assert "without a drifter" not in line and "whose tracks could not be inverted" in line
    assert "no drifter moves between its fixes (every velocity is zero)" in line
    warning = [x for x in said if x.startswith("warning: no tile was inverted, so the map holds no velocity")]
    assert len(warning) == 1 and "no drifter moves" in warning[0] and "segments" not in warning[0]
    # still for 8 days: out of the water (aground), every fix cleaned away, and the refusal says so
    days = np.datetime64("2025-01-01T00", "ns") + np.arange(8 * 24) * np.timedelta64(1, "h")
    rows = [f"{k},{str(h)[:19]}Z,{-39.0 + 0.5 * k},{31.0 + 0.4 * k}" for k in range(4) for h in days]
    (tmp_path / "ashore.csv").write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=r"the cleaning kept none of the fixes in the region and period \(768 "
                                         "fixes aground dropped"):
        map_archive(tmp_path / "ashore.csv", tmp_path / "a.nc", s, scheduler=scheduler, progress=False,
                    say=lambda _: None)


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


def test_a_lone_drifter_fills_the_cells_no_other_tile_reaches_and_leaves_the_others_alone(small_map, tmp_path):
    """A tile of one drifter segment was not inverted: a lone drifter far from the others had no map. It is now (the
    local GP of its velocities alone), and its piece enters the blend only where no tile of more drifters has
    weight: the cluster's map is bit-identical with and without the lone drifter, and the lone drifter's cells hold
    the current within their bands."""
    _, s, scheduler, _ = small_map
    s = dataclasses.replace(s, method="basis")  # what the tile basis does
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


def test_archive_extent_leaves_out_spikes_and_lone_fixes_and_reads_whole_tracks_in_slices(tmp_path):
    """A fix at (0 E, 0 N) (a position spike) and one dated 1970 (a lone fix decades from its track) would stretch
    the map to a 40-degree box and 55 years: the extent is the clean archive's, and the note counts both. Read in
    slices shorter than one track, the extent and the selected fixes are the same."""
    from lagda.io.archive import _Ragged
    from lagda.mapping.archive import archive_extent, select_fixes

    clean_path, bad = tmp_path / "clean.nc", tmp_path / "bad.nc"
    write_archive(clean_path, -40.0, 30.0, size=2.0, days=5, n=5)  # 120 hourly fixes a drifter
    with xr.open_dataset(clean_path) as ds:
        ds = ds.load()
    lon, lat, time = ds.lon.values.copy(), ds.lat.values.copy(), ds.time.values.copy()
    lon[50], lat[50] = 0.0, 0.0  # drifter 0's 51st fix
    time[130] = np.datetime64("1970-01-01T00:00:00", "ns")  # drifter 1's 11th fix
    ds.assign(lon=("obs", lon, ds.lon.attrs), lat=("obs", lat, ds.lat.attrs), time=("obs", time)).to_netcdf(bad)
    region, period, notes = archive_extent(bad, 0.5, 86400.0)
    assert (region, period) == archive_extent(clean_path, 0.5, 86400.0)[:2]
    assert region[1] - region[0] <= 3.0 and period[1] - period[0] <= 5 * 86400.0
    left_out = "598 fixes the map can use (1 position spikes, 1 lone fixes at a track's end (a wrong time) left out)"
    assert left_out in notes[0]
    with xr.open_dataset(bad, decode_times=False) as ds:  # slices end at a drifter's end, at least one drifter each
        slices = lambda n: [(sl.start, sl.stop) for sl, *_ in _Ragged(ds, bad).chunks(n, whole_trajectories=True)]
        assert slices(50) == [(120 * k, 120 * k + 120) for k in range(5)]
        assert slices(250) == [(0, 240), (240, 480), (480, 600)]
    assert archive_extent(bad, 0.5, 86400.0, chunk_fixes=50) == (region, period, notes)
    whole, sliced = select_fixes(bad, region, period), select_fixes(bad, region, period, chunk_fixes=50)
    for name in ("traj", "time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(sliced, name))
    seconds = (time - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "s")
    inside = ((lon >= region[0]) & (lon <= region[1]) & (lat >= region[2]) & (lat <= region[3])
              & (seconds >= period[0]) & (seconds <= period[1]))
    assert len(whole) == inside.sum() and np.all(np.diff(whole.traj) >= 0)


def write_years(path, shift_end_days=0.0, lives=True):
    """Writes a ragged archive of 40 drifters over four years, 6-hourly, ordered by their start date as clouddrift
    writes the GDP's ragged files, with the GDP's per-drifter start_date and end_date (the end moved by
    `shift_end_days`)."""
    rng = np.random.default_rng(3)
    starts = np.round(np.sort(rng.uniform(0, 4 * 365, 40)) * 86400.0) + parse_time("2020-01-01T00:00:00Z")
    days = rng.integers(30, 200, 40)
    order = np.arange(40)  # starts are sorted
    times = [starts[k] + 21600.0 * np.arange(4 * days[k]) for k in order]
    lon = np.concatenate([-40.0 + rng.uniform(0, 4) + 0.01 * np.arange(len(t)) % 3 for t in times])
    lat = np.concatenate([30.0 + rng.uniform(0, 4) + 0.005 * np.arange(len(t)) % 2 for t in times])
    since = {"units": "seconds since 1970-01-01 00:00:00"}
    variables = {"rowsize": ("traj", np.array([len(t) for t in times])), "id": ("traj", 1000 + order),
                 "lon": ("obs", lon), "lat": ("obs", lat), "time": ("obs", np.concatenate(times), since)}
    if lives:
        variables["start_date"] = ("traj", np.array([t[0] for t in times]), since)
        variables["end_date"] = ("traj", np.array([t[-1] for t in times]) + shift_end_days * 86400.0, since)
    xr.Dataset(variables).to_netcdf(path)
    return np.concatenate(times), lon, lat


def test_a_year_of_a_longer_archive_is_read_by_the_drifters_that_live_in_it(tmp_path):
    """Of a four-year archive whose drifters state their lives (the GDP's start_date, end_date), the selection of
    one year reads the positions of only the drifters alive in it, and selects the same fixes as a reading of
    every fix; the extent in that year is the same too. Lives that disagree with the fixes (every end_date 20 days
    early) are found out: every fix is read again, and a note says so."""
    from lagda.mapping.archive import archive_extent, select_fixes

    times, lon, lat = write_years(tmp_path / "years.nc")
    write_years(tmp_path / "plain.nc", lives=False)
    write_years(tmp_path / "wrong.nc", shift_end_days=-20.0)
    year = (parse_time("2021-03-01T00:00:00Z"), parse_time("2022-03-01T00:00:00Z"))
    region = (-45.0, -30.0, 25.0, 40.0)  # every fix
    inside = (times >= year[0]) & (times <= year[1])
    selected = {name: select_fixes(tmp_path / name, region, year, chunk_fixes=400)
                for name in ("years.nc", "plain.nc", "wrong.nc")}
    for fixes in selected.values():
        assert len(fixes) == inside.sum()
        for name in ("traj", "time", "lon", "lat"):
            np.testing.assert_array_equal(getattr(fixes, name), getattr(selected["plain.nc"], name))
    np.testing.assert_array_equal(np.sort(selected["plain.nc"].time), np.sort(times[inside]))
    def read(name):  # (times, positions) read, from the note
        note = next(n for n in selected[name].notes if n.startswith("read the times of"))
        return int(note.split("times of ")[1].split(" ")[0]), int(note.split("positions of ")[1].split(" ")[0])

    assert inside.sum() <= read("years.nc")[1] <= read("years.nc")[0] < 0.5 * len(times)
    assert read("wrong.nc")[0] == read("plain.nc")[0] == len(times)
    assert "start_date and end_date" in " ".join(selected["years.nc"].notes)
    assert any("drifter lives were not used: drifter" in n for n in selected["wrong.nc"].notes)
    assert not any("lives were not used" in n for n in selected["years.nc"].notes)
    extents = [archive_extent(tmp_path / name, 0.5, 86400.0, period=year, chunk_fixes=400)
               for name in ("years.nc", "plain.nc", "wrong.nc")]
    assert extents[0] == extents[1] == extents[2]


def test_a_year_of_a_folder_of_drifter_files_reads_the_files_of_the_drifters_that_live_in_it(tmp_path):
    """Of a folder of four years of GDP hourly files (a file per drifter, stating its deploy_date and end_date),
    the selection of one year reads only the files of the drifters alive in it, and selects the same fixes as the
    ragged file of the same drifters; a file whose end_date is 20 days early is found out when read: every file
    is read again, and a note says so."""
    import netCDF4

    from lagda.mapping.archive import select_fixes
    from lagda.testing import write_gdp_hourly_files

    times, _, _ = write_years(tmp_path / "years.nc")
    files = write_gdp_hourly_files(tmp_path / "years.nc", tmp_path / "gdp")
    year = (parse_time("2021-03-01T00:00:00Z"), parse_time("2022-03-01T00:00:00Z"))
    region = (-45.0, -30.0, 25.0, 40.0)  # every fix
    reference = select_fixes(tmp_path / "years.nc", region, year)
    folder = select_fixes(tmp_path / "gdp", region, year, chunk_fixes=400)
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(folder, name), getattr(reference, name))
    with xr.open_dataset(tmp_path / "years.nc", decode_times=False) as ds:
        lives = (ds.end_date.values + 86400.0 >= year[0]) & (ds.start_date.values - 86400.0 <= year[1])
    alive = int(np.sum(lives))
    assert 0 < alive < len(files) // 2
    assert f"read {alive} of the {len(files)} files: the other {len(files) - alive} state lives of their drifters " \
           "(deploy_date and end_date, widened by 1 day) that miss the period" in folder.notes
    assert any(n.startswith(f"assumed: {alive} of {len(files)} files in ") and "(each): no featureType" in n
               for n in folder.notes)
    inside = files[int(np.flatnonzero(lives)[0])]
    with netCDF4.Dataset(inside, "a") as ds:
        ds["end_date"][:] = ds["end_date"][:] - 20 * 86400.0
    wrong = select_fixes(tmp_path / "gdp", region, year, chunk_fixes=400)
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(wrong, name), getattr(reference, name))
    assert any(n.startswith("the archive's drifter lives were not used: ") and inside in n for n in wrong.notes)
    assert not any(n.startswith("read ") and " of the " in n and "files" in n for n in wrong.notes)


def test_a_files_stated_life_is_read_alike_from_netcdf4_netcdf3_and_zarr(tmp_path):
    """The span of the lives a file states (`_file_life`: start_date or deploy_date, end_date, widened by a day)
    is the same read through h5py (netCDF-4), netCDF4 (netCDF-3) and xarray (Zarr); a missing end (-1e34, the
    GDP's fill) is no end; a CSV, or a file that states no dates, states no life."""
    from lagda.io.archive import LIFE_SLACK_S, _file_life

    since = {"units": "hours since 2020-01-01 00:00:00"}
    ds = xr.Dataset({"ID": ("traj", [7, 8]), "rowsize": ("traj", [2, 2]),
                     "deploy_date": ("traj", [24.0, 48.0], since), "end_date": ("traj", [72.0, -1e34], since),
                     "time": ("obs", [24.0, 25.0, 48.0, 49.0], since), "lon": ("obs", np.zeros(4)),
                     "lat": ("obs", np.zeros(4))})
    ds.to_netcdf(tmp_path / "four.nc", format="NETCDF4", encoding={n: {"_FillValue": None} for n in ds.variables})
    ds.to_netcdf(tmp_path / "three.nc", format="NETCDF3_64BIT")
    ds.to_zarr(tmp_path / "store.zarr", zarr_format=2)
    start = parse_time("2020-01-02T00:00:00Z") - LIFE_SLACK_S
    for name in ("four.nc", "three.nc", "store.zarr"):
        assert _file_life(str(tmp_path / name)) == (start, np.inf, "deploy_date and end_date"), name
    ds.drop_vars(["deploy_date", "end_date"]).to_netcdf(tmp_path / "none.nc")
    (tmp_path / "fixes.csv").write_text("id,time,lon,lat\na,2020-01-01T00:00:00Z,0,0\n")
    assert _file_life(str(tmp_path / "none.nc")) is None and _file_life(str(tmp_path / "fixes.csv")) is None


def test_map_reads_other_track_files_as_the_ragged_archive(tmp_path):
    """The archive's fixes as ERDDAP writes a CSV (a row of units under the header), as a two-dimensional
    (trajectory, obs) CF netCDF, as the GDP's hourly files (a file per drifter: their folder, or the files listed,
    read a group of files at a time) and as two CSV files of the first and last days of every drifter (read one
    at a time): the extent and the selected fixes are the ragged file's. Tracks in model units are refused in one
    line."""
    from lagda.mapping.archive import archive_extent, select_fixes
    from lagda.testing import write_gdp_hourly_files

    ragged, table, grid = tmp_path / "gdp.nc", tmp_path / "erddap.csv", tmp_path / "grid.nc"
    write_archive(ragged, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(ragged) as ds:
        ds = ds.load()
    n, m = len(ds.rowsize), int(ds.rowsize[0])
    stamps = np.datetime_as_string(ds.time.values, unit="s")
    rows = [f"{i},{t}Z,{float(lat)!r},{float(lon)!r}" for i, t, lat, lon in
            zip(np.repeat(ds.id.values, ds.rowsize.values), stamps, ds.lat.values, ds.lon.values)]
    table.write_text("\n".join(["ID,time,latitude,longitude", ",UTC,degrees_north,degrees_east", *rows]) + "\n")
    xr.Dataset({"id": ("trajectory", ds.id.values, {"cf_role": "trajectory_id"}),
                "lon": (("trajectory", "obs"), ds.lon.values.reshape(n, m), {"units": "degrees_east"}),
                "lat": (("trajectory", "obs"), ds.lat.values.reshape(n, m), {"units": "degrees_north"}),
                "time": (("trajectory", "obs"), ds.time.values.reshape(n, m))},
               attrs={"featureType": "trajectory"}).to_netcdf(grid)
    files = write_gdp_hourly_files(ragged, tmp_path / "gdp")  # a file per drifter, as NCEI serves the GDP
    halves = [tmp_path / "months" / f"{k}.csv" for k in (1, 2)]  # every drifter in two files (two downloads)
    halves[0].parent.mkdir()
    half = [[row for row, stamp in zip(rows, stamps) if (stamp < stamps[m // 2]) == first] for first in (True, False)]
    for path, part in zip(halves, half):
        path.write_text("\n".join(["ID,time,latitude,longitude", ",UTC,degrees_north,degrees_east", *part]) + "\n")
    region, period, notes = archive_extent(ragged, 0.5, 86400.0)
    reference = select_fixes(ragged, region, period)
    # several files are read a group of about chunk_fixes at a time: groups of 2 drifter files, or 1 half each
    for other, chunk in ((table, None), (grid, None), (tmp_path / "gdp", None), (files, 2 * m - 1),
                         (halves[0].parent, m)):
        chunked = {} if chunk is None else {"chunk_fixes": chunk}
        assert archive_extent(other, 0.5, 86400.0, **chunked) == (region, period, notes)
        fixes = select_fixes(other, region, period, **chunked)
        for name in ("traj", "time", "lon", "lat"):
            np.testing.assert_array_equal(getattr(fixes, name), getattr(reference, name))
    padded = tmp_path / "padded.nc"  # a (trajectory, obs) file padded past each track's end: the slots are no fixes
    pad = lambda values, fill: np.concatenate([values.reshape(n, m), np.full((n, 5), fill, values.dtype)], axis=1)
    xr.Dataset({"id": ("trajectory", ds.id.values, {"cf_role": "trajectory_id"}),
                "lon": (("trajectory", "obs"), pad(ds.lon.values, np.nan), {"units": "degrees_east"}),
                "lat": (("trajectory", "obs"), pad(ds.lat.values, np.nan), {"units": "degrees_north"}),
                "time": (("trajectory", "obs"), pad(ds.time.values, np.datetime64("NaT")))},
               attrs={"featureType": "trajectory"}).to_netcdf(padded)
    fixes = select_fixes(padded, region, period)
    np.testing.assert_array_equal(fixes.time, reference.time)
    assert f": {len(reference)} of {n * m} fixes in the region and period" in fixes.notes[-1]  # not of n (m + 5)
    one = select_fixes(files[0], region, period)  # one GDP file alone: it has a rowsize, its positions are 2-D
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(one, name), getattr(reference, name)[reference.traj == 0])
    from lagda.mapping.resume import archive_identity  # what a resume checks: the same files however they are given

    assert archive_identity(tmp_path / "gdp") == archive_identity(files[::-1]) != archive_identity(files[1:])
    model = tmp_path / "model.csv"
    model.write_text("id,time,x,y\n" + "".join(f"a,{0.01 * k},{0.1 + 0.01 * k},0.5\n" for k in range(5)))
    with pytest.raises(ValueError, match="lagda map maps longitude/latitude fixes") as info:
        archive_extent(model, 0.5, 86400.0)
    assert "\n" not in str(info.value)


def test_a_file_of_unsorted_fixes_is_mapped_sorted_and_says_so(tmp_path):
    """A CSV whose rows are shuffled: its fixes are grouped by drifter in the file's order, and the cleaning sorts
    each drifter's times and counts them in a note, as `lagda assimilate` says it (the map sorted them silently)."""
    from lagda.mapping.archive import archive_extent, clean, select_fixes

    ragged, shuffled = tmp_path / "gdp.nc", tmp_path / "shuffled.csv"
    write_archive(ragged, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(ragged) as ds:
        ds = ds.load()
    stamps = np.datetime_as_string(ds.time.values, unit="s")
    rows = [f"{i},{t}Z,{float(lon)!r},{float(lat)!r}" for i, t, lon, lat in
            zip(np.repeat(ds.id.values, ds.rowsize.values), stamps, ds.lon.values, ds.lat.values)]
    np.random.default_rng(0).shuffle(rows)
    shuffled.write_text("\n".join(["id,time,lon,lat", *rows]) + "\n")
    region, period, _ = archive_extent(ragged, 0.5, 86400.0)
    reference = clean(select_fixes(ragged, region, period))
    fixes = clean(select_fixes(shuffled, region, period))
    by_drifter = lambda f: np.lexsort((f.time, f.ids[f.traj].astype(str)))  # the CSV numbers drifters as they come
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(fixes, name)[by_drifter(fixes)],
                                      getattr(reference, name)[by_drifter(reference)])
    assert all(np.all(np.diff(fixes.time[fixes.traj == k]) > 0) for k in range(4))
    assert "clean: times sorted in 4 trajectories" in fixes.notes and fixes.clean["clean_trajectories_sorted"] == 4
    assert reference.clean["clean_trajectories_sorted"] == 0


def test_a_ragged_file_that_does_not_declare_its_layout_is_read_and_says_how(tmp_path):
    """A ragged file whose count has no CF sample_dimension (clouddrift's adapters, or a hand-made file): read from
    its dimensions, and a note says so; a declared one says nothing of it."""
    from lagda.mapping.archive import archive_extent, select_fixes

    bare, declared = tmp_path / "bare.nc", tmp_path / "declared.nc"
    write_archive(bare, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(bare) as ds:
        ds = ds.load()
    ds["rowsize"].attrs["sample_dimension"] = "obs"
    ds.to_netcdf(declared)
    region, period, _ = archive_extent(bare, 0.5, 86400.0)
    line = ("bare.nc: no CF sample_dimension attribute; assumed a contiguous ragged array (clouddrift layout): "
            "rowsize(traj) counts the observations along 'obs'")
    assert any(note.endswith(line) for note in select_fixes(bare, region, period).notes)
    assert not any("assumed" in note for note in select_fixes(declared, region, period).notes)


def test_plot_map_draws_the_busiest_day_or_the_one_asked_for(uniform, tmp_path):
    """The figure's day: the one with the most fixes by default, else the map time nearest the date given; a date
    outside the map's days is refused in one line and nothing is written."""
    from lagda.mapping.plot import map_figure, open_map, plot_map

    _, _, reference, _, _ = uniform
    with xr.open_dataset(reference) as ds:
        counts = ds.n_fixes.sum(("lat", "lon")).values
        days = [str(t)[:10] for t in ds.time.values]
    png, day = plot_map(reference, tmp_path / "busiest.png")
    assert day == days[int(np.argmax(counts))] and (tmp_path / "busiest.png").stat().st_size > 0
    assert plot_map(reference, tmp_path / "asked.png", days[3] + "T10:00")[1] == days[3]
    with pytest.raises(ValueError, match="outside the map's days") as info:
        plot_map(reference, tmp_path / "late.png", "2030-01-01")
    assert "\n" not in str(info.value) and not (tmp_path / "late.png").exists()
    with open_map(reference) as maps:
        titles = [ax.get_title() for ax in map_figure(maps, 3).axes[:3]]
    assert titles[0].startswith("speed") and titles[1].startswith("total predictive std")


@pytest.fixture
def http_folder(tmp_path):
    """(a folder, the URL it is served at) by a local HTTP server, as a Zarr store in the cloud is."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    folder = tmp_path / "served"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_map_reads_a_ragged_zarr_store_at_a_url_as_the_local_file(tmp_path, http_folder):
    """The GDP's hourly collection is served as a ragged Zarr store (clouddrift's gdp1h opens it by URL): read over
    HTTP in slices, it gives the local file's extent and fixes; a resume knows the store by URL, sizes and
    attributes; a URL that is no store is refused in one line."""
    from lagda.mapping.archive import archive_extent, select_fixes
    from lagda.mapping.resume import archive_identity

    folder, server = http_folder
    local = tmp_path / "gdp.nc"
    write_archive(local, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(local) as ds:
        ds.to_zarr(folder / "gdp.zarr", zarr_format=2, consolidated=True)
    url = f"{server}/gdp.zarr"
    region, period, notes = archive_extent(local, 0.5, 86400.0)
    assert archive_extent(url, 0.5, 86400.0, chunk_fixes=100)[:2] == (region, period)
    reference, fixes = select_fixes(local, region, period), select_fixes(url, region, period, chunk_fixes=100)
    for name in ("traj", "time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(fixes, name), getattr(reference, name))
    known = archive_identity(url)
    assert known["archive"] == url and known == archive_identity(url)
    with xr.open_zarr(folder / "gdp.zarr") as ds:  # a new version of the store
        ds.load().assign_attrs(date_modified="2026-01-01").to_zarr(folder / "new.zarr", zarr_format=2,
                                                                   consolidated=True)
    assert archive_identity(f"{server}/new.zarr")["archive_sha256"] != known["archive_sha256"]
    with pytest.raises(ValueError, match="cannot be opened as a Zarr store") as error:
        archive_extent(f"{server}/missing.zarr", 0.5, 86400.0)
    assert "\n" not in str(error.value)


def test_a_resume_compares_every_part_of_the_archives_identity():
    """Other files of the same total size in the same folder are another archive (their paths' digest differs)."""
    from lagda.mapping.resume import _differences

    stored = {"settings": {"resolution": 0.25}, "archive": "/data", "archive_files": 2, "archive_bytes": 10,
              "archive_paths_sha256": "0" * 64}
    assert _differences(stored, dict(stored)) == []
    assert _differences(stored, {**stored, "archive_paths_sha256": "1" * 64}) == ["archive_paths_sha256"]
    assert _differences(stored, {**stored, "settings": {"resolution": 0.5}}) == ["resolution"]
    # a partial made before the low-pass existed holds tiles of positions as they were: not resumed as low-passed
    assert _differences(stored, {**stored, "settings": {"resolution": 0.25, "low_pass": True}}) == ["low_pass"]
    assert _differences(stored, {**stored, "settings": {"resolution": 0.25, "low_pass": False}}) == []


def test_inertial_oscillations_stay_out_of_the_daily_map(small_map, tmp_path):
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
    _, s, scheduler, _ = small_map
    s = dataclasses.replace(s, method="basis")  # what the tile basis does
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


def test_the_bands_beside_a_jet_its_drifters_gathered_in_hold_the_ocean_at_rest(small_map, tmp_path):
    """Drifters gather in a narrow jet (1.2 m/s, 25 km wide), which the tile basis cannot resolve: its uniform
    current takes up their mean velocity and carries it to the cells beside the jet, where the ocean is at rest.
    Away from the drifters the std now holds their mean square velocity, not only their spread about their mean,
    and so it does in a tile whose local GP was rejected (its std was the error model's alone): the bands hold the
    resting ocean there, where they held it on 0.3% of those cells."""
    _, s, scheduler, _ = small_map
    s = dataclasses.replace(s, method="basis")  # what the tile basis does
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


@dataclasses.dataclass(frozen=True)
class _EveryFix:
    """A toy method's data: every tile gets all the map's fixes."""

    fixes: object

    def in_tile(self, tile):
        return self.fixes


class _ConstantField(TileMethod):
    """A toy tile method: every tile the same eastward current with the same std, whatever its drifters (a module
    class: Dask pickles it by reference)."""

    name = "constant"
    summary = "every cell the same eastward current"
    std_meaning = " (the toy's constant)"

    def prepare(self, fixes):
        return _EveryFix(fixes), (f"constant: {len(fixes)} fixes, none used",)

    def map_tile(self, data, tile, grid):
        days, rows, cols = grid.window(tile)
        shape = (days.stop - days.start, rows.stop - rows.start, cols.stop - cols.start)
        full = lambda value: np.full(shape, value, np.float32)
        return {"u": full(0.25), "v": full(0.0), "u_std": full(0.1), "v_std": full(0.1),
                "info": {"tile": tile.key, "fixes": len(data)}}

    def summarise(self, infos):
        return TileSummary([f"{len(infos)} tiles of the constant current"])


def test_a_tile_method_registered_by_name_makes_a_map(tmp_path, monkeypatch):
    """A new tile method is one class and one registry entry: registered, MapSettings, the command line and
    map_archive take it by name and the map is its field, its notes and its std's meaning; unregistered, it is
    refused."""
    from dask.distributed import LocalCluster

    from lagda.cli import build_parser
    from lagda.mapping.methods.registry import TILE_METHODS

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=3.0, days=8, n=4)
    make = lambda: MapSettings((-40.0, -37.0, 30.0, 33.0), (parse_time(START), parse_time(START) + 6 * 86400.0),
                               resolution=0.5, tile_deg=3.0, halo_deg=1.0, window_days=8.0, step_days=4.0,
                               method="constant")
    with pytest.raises(ValueError, match="method='constant': one of objective, basis$"):
        make()
    monkeypatch.setitem(TILE_METHODS, "constant", _ConstantField)
    s = make()
    assert build_parser().parse_args(["map", "--tracks", str(archive), "--out", "m.nc", "--tile-method",
                                      "constant"]).tile_method == "constant"
    with pytest.raises(ValueError, match="one of objective, basis, constant"):
        MapSettings(method="nope")
    out, said = tmp_path / "map.nc", []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        summary = map_archive(archive, out, s, scheduler=cluster.scheduler_address, progress=False, say=said.append)
    assert summary["inverted"] == summary["tiles"] == len(s.tiles()) and summary["skipped"] == 0
    assert f"note: {len(s.tiles())} tiles of the constant current" in said
    assert any(line.startswith("note: constant: ") and line.endswith(" fixes, none used") for line in said)
    with xr.open_dataset(out) as ds:
        np.testing.assert_array_equal(ds.u.values, 0.25)
        np.testing.assert_array_equal(ds.v.values, 0.0)
        np.testing.assert_allclose(ds.u_std.values, 0.1, rtol=1e-5)  # the std of a mixture of equal pieces
        assert ds.u_std.attrs["long_name"].endswith("standard deviation (the toy's constant)")
        assert json.loads(ds.attrs["settings"])["method"] == "constant" and ds.attrs["local_gp"] == "off"
        assert "constant: " in ds.attrs["notes"]
