"""lagda map's resume: after a kill, an interrupt at each transition, a failed write, a lost Dask worker; the lock, and
tiles of other lagda code never blended."""

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

from lagda.mapping.dask_driver import _run_tile
from lagda.mapping.run import map_archive
from tests.map_archives import small_settings, write_archive

FAULTS = ["map-partial:created", "map-partial:renamed", "map-tile:written@2", "map-tile:renamed@2", "map-final:open",
          "map-final:written", "map-final:renamed", "map-partial-removal:renamed"]


@pytest.fixture(scope="module")
def small_map(map_scheduler, tmp_path_factory):
    """(archive, settings of an 8-tile map (tiles of 1.5 degrees: a kill after the first lands before the last), a
    running in-process scheduler, its uninterrupted map)."""
    folder = tmp_path_factory.mktemp("map")
    archive = folder / "gdp.nc"
    write_archive(archive, -40.0, 30.0, spikes=3)
    s = small_settings(tile_deg=1.5)
    map_archive(archive, folder / "map.nc", s, scheduler=map_scheduler, progress=False, say=lambda _: None)
    return archive, s, map_scheduler, folder / "map.nc"


def test_a_killed_map_resumes_to_the_same_store(small_map, tmp_path, capsys):
    archive, s, _, reference = small_map
    out = tmp_path / "map.nc"
    cmd = [sys.executable, "-m", "lagda", "map", "--tracks", str(archive), "--region", *map(str, s.region),
           "--period", "2025-01-01", "2025-01-09", "--resolution", "0.5", "--tile-size", "1.5", "--halo", "1",
           "--window-days", "8", "--window-step", "4", "--k-max", "3", "--degree", "1", "--workers", "1",
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
    from lagda.cli import main  # once more, in this process: nothing to compute

    assert main([*cmd[3:], "--resume", "--plot", str(tmp_path / "day.png")]) == 0
    again = capsys.readouterr()
    assert "already complete" in again.err
    assert "(the day with the most fixes)" in again.out and (tmp_path / "day.png").stat().st_size > 0


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
