"""`lagda simulate` stopped at each state transition (SIGKILL in a child process, or Ctrl-C), then resumed.

The fault points are those of `simulate.atomic.fault_point` (LAGDA_FAULT=NAME[@K][:ACTION]). After any stop,
the same command with --resume ends with the uninterrupted file (or, if the output was complete, leaves it
untouched and says "already complete"), and no temporary file or partial folder is left.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from lagda import cli
from simulate import atomic, schema

# 10 fields in chunks of 3 (4 chunks), 9 modes, 200 steps: the statics of tests/test_cli_simulate.py
FLAGS = ["--preset", "small", "--n-samples", "10", "--k1-range", "-1", "1", "--k2-range", "-1", "1",
         "--t-final", "0.02", "--chunk-size", "3", "--seed", "5"]
DATA = ("coef_re", "coef_im", "x0", "y0", "x", "y", "omega", "k1", "k2", "prior_scale")


def simulate(capsys, *argv):
    """Returns (exit code, stderr) of `lagda simulate FLAGS ...` in this process."""
    atomic.reset_fault_counts()
    code = cli.main(["simulate", *FLAGS, *argv])
    return code, capsys.readouterr().err


def assert_same_data(path, reference):
    with schema.open_dataset(path) as a, schema.open_dataset(reference) as b:
        for name in DATA:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def listing(folder):
    """Returns every path under `folder`, relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted file, made in this process."""
    out = tmp_path_factory.mktemp("whole") / "r.nc"
    assert cli.main(["simulate", *FLAGS, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("jax-cache"))


def killed_at(point, out, compile_cache):
    """Runs `lagda simulate` in a child process that SIGKILLs itself at `point`; returns its pid."""
    env = {**os.environ, atomic.FAULT_ENV: f"{point}:kill", "LAGDA_COMPILE_CACHE": compile_cache}
    child = subprocess.run([sys.executable, "-m", "lagda", "simulate", *FLAGS, "--out", str(out)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == -9, child.stderr  # it reached the point
    return child


P = "r.nc.partial"
CHUNKS = [f"{P}/chunk_00000{i}.npz" for i in range(4)]
# point -> what SIGKILL there leaves ({pid}: the killed process), whether the output is then complete: one point
# per state a resume meets (each point costs a child that imports JAX). Left out as the same states again:
# manifest:written and manifest:renamed (a stale temporary folder, as partial:created), chunk:written@1 and
# chunk:renamed@2 (a stale chunk temporary and saved chunks, both in chunk:written@4), final:written (a stale
# output temporary, as final:open); the Ctrl-C test below stops at several of them.
# A run killed while it writes leaves its lock file too (the lock itself dies with it: the resume takes it).
LOCK = ".r.nc.lock"
KILLS = {
    "partial:created": ([LOCK, ".r.nc.partial.tmp-{pid}"], False),
    "partial:renamed": ([LOCK, P, f"{P}/manifest.json"], False),
    "chunk:written@4": ([LOCK, P, f"{P}/.chunk_000003.npz.tmp-{{pid}}", *CHUNKS[:3], f"{P}/manifest.json"], False),
    "final:open": ([LOCK, ".r.nc.tmp-{pid}", P, *CHUNKS, f"{P}/manifest.json"], False),
    "final:renamed": ([LOCK, "r.nc", P, *CHUNKS, f"{P}/manifest.json"], True),
    "partial-removal:renamed": ([LOCK] + [name.replace(P, ".r.nc.partial.tmp-{pid}")
                                          for name in (P, *CHUNKS, f"{P}/manifest.json")] + ["r.nc"], True),
    "summary": (["r.nc"], True),
}


@pytest.mark.parametrize("point", list(KILLS))
def test_sigkill_at_each_transition_then_resume(point, whole, compile_cache, capsys, tmp_path):
    out = tmp_path / "r.nc"
    killed_at(point, out, compile_cache)
    left, complete = KILLS[point]
    pids = {name.split(".tmp-")[1].split("/")[0] for name in listing(tmp_path) if ".tmp-" in name}
    pid = pids.pop() if pids else ""
    assert listing(tmp_path) == sorted(name.format(pid=pid) for name in left)
    before = out.read_bytes() if complete else None
    code, err = simulate(capsys, "--out", str(out), "--resume")
    assert code == 0, err
    if complete:
        assert "already complete" in err and out.read_bytes() == before
    assert_same_data(out, whole)
    assert listing(tmp_path) == ["r.nc"]
    for name in left:
        if ".tmp-" in name and "/" not in name:
            assert f"removed {tmp_path / name.format(pid=pid)}, left by an interrupted run" in err


INTERRUPTS = {  # point -> the message's claim
    "partial:created": "nothing was saved", "manifest:renamed": "nothing was saved",
    "partial:renamed": "0 of 10 fields are saved", "chunk:written@2": "3 of 10 fields are saved",
    "chunk:renamed@2": "6 of 10 fields are saved", "final:open": "all fields are saved",
    "final:written": "all fields are saved", "final:renamed": "r.nc is complete",
    "partial-removal:renamed": "r.nc is complete", "summary": "r.nc is complete",
}


@pytest.mark.parametrize("point", list(INTERRUPTS))
def test_ctrl_c_at_each_transition_says_what_is_saved_and_resume_completes(point, whole, capsys, monkeypatch,
                                                                           tmp_path):
    out = tmp_path / "r.nc"
    monkeypatch.setenv(atomic.FAULT_ENV, f"{point}:interrupt")
    code, err = simulate(capsys, "--out", str(out))
    assert code == 130 and INTERRUPTS[point] in err
    assert ("--resume to continue" in err) == (INTERRUPTS[point].endswith("saved") and "nothing" not in err)
    assert not [name for name in listing(tmp_path) if ".tmp-" in name]  # Ctrl-C cleans up its temporaries
    monkeypatch.delenv(atomic.FAULT_ENV)
    code, err = simulate(capsys, "--out", str(out), "--resume")
    assert code == 0, err
    assert ("already complete" in err) == INTERRUPTS[point].endswith("complete")
    assert_same_data(out, whole)
    assert listing(tmp_path) == ["r.nc"]


def test_resume_with_another_shard_is_refused_naming_it(capsys, monkeypatch, tmp_path):
    out = tmp_path / "r.nc"
    monkeypatch.setenv(atomic.FAULT_ENV, "chunk:renamed@1:interrupt")
    assert simulate(capsys, "--out", str(out), "--shard", "0/2")[0] == 130
    before = {name: (tmp_path / name).read_bytes() for name in listing(tmp_path) if (tmp_path / name).is_file()}
    monkeypatch.delenv(atomic.FAULT_ENV)
    code, err = simulate(capsys, "--out", str(out), "--shard", "1/2", "--resume")
    assert code == 2 and "different settings (shard)" in err
    assert {name: (tmp_path / name).read_bytes() for name in listing(tmp_path) if (tmp_path / name).is_file()} \
        == before


def test_resume_of_a_run_made_by_other_code_is_refused(whole, capsys, monkeypatch, tmp_path):
    """An unfinished run records the code's digest: after an upgrade its chunks would join this code's in one file,
    so the resume is refused in one line, nothing touched; with this code's digest it ends with the uninterrupted
    file."""
    import json

    from simulate.provenance import code_digest

    out, partial = tmp_path / "r.nc", tmp_path / "r.nc.partial"
    monkeypatch.setenv(atomic.FAULT_ENV, "chunk:renamed@1:interrupt")
    assert simulate(capsys, "--out", str(out))[0] == 130
    monkeypatch.delenv(atomic.FAULT_ENV)
    manifest = json.loads((partial / "manifest.json").read_text())
    assert manifest["code"] == code_digest()
    (partial / "manifest.json").write_text(json.dumps({**manifest, "code": "0" * 16}))
    before = {name: (tmp_path / name).read_bytes() for name in listing(tmp_path) if (tmp_path / name).is_file()}
    code, err = simulate(capsys, "--out", str(out), "--resume")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"was made by other lagda code (source digest {'0' * 16}; this is {code_digest()}); pass --overwrite" in err
    assert {name: (tmp_path / name).read_bytes() for name in listing(tmp_path) if (tmp_path / name).is_file()} \
        == before
    (partial / "manifest.json").write_text(json.dumps(manifest))
    assert simulate(capsys, "--out", str(out), "--resume")[0] == 0
    assert_same_data(out, whole)


def test_complete_output_of_other_settings_is_refused_naming_them(whole, capsys, tmp_path):
    out = tmp_path / "r.nc"
    out.write_bytes(whole.read_bytes())
    code, err = simulate(capsys, "--out", str(out), "--seed", "6", "--resume")
    assert code == 2 and "already exists with different settings (seed)" in err
    assert out.read_bytes() == whole.read_bytes() and listing(tmp_path) == ["r.nc"]


def test_resume_with_nothing_to_resume_starts_afresh_and_says_so(whole, capsys, tmp_path):
    code, err = simulate(capsys, "--out", str(tmp_path / "r.nc"), "--resume")
    assert code == 0 and "nothing to resume" in err and "starting afresh" in err
    assert_same_data(tmp_path / "r.nc", whole)


def test_resume_overwrite_starts_again_even_from_an_unreadable_partial(whole, capsys, tmp_path):
    (tmp_path / "r.nc.partial").mkdir()
    (tmp_path / "r.nc.partial" / "manifest.json").write_text("{not json")
    code, err = simulate(capsys, "--out", str(tmp_path / "r.nc"), "--resume")
    assert code == 2 and "has no readable manifest" in err
    code, err = simulate(capsys, "--out", str(tmp_path / "r.nc"), "--resume", "--overwrite")
    assert code == 0 and "starting again" in err
    assert_same_data(tmp_path / "r.nc", whole)
    assert listing(tmp_path) == ["r.nc"]


def test_a_running_process_keeps_its_temporaries(tmp_path):
    mine = atomic.temporary_name(tmp_path / "r.nc")
    running = tmp_path / f".r.nc.tmp-{os.getppid()}"  # a process that is alive: another run's file
    mine.write_bytes(b""), running.write_bytes(b"")
    assert atomic.remove_stale(tmp_path / "r.nc") == [mine]
    assert running.exists()


def test_a_second_run_on_the_same_output_is_refused_naming_the_first_until_it_is_killed(whole, capsys, tmp_path):
    """A run holding the output (another process: the lock is the kernel's) makes the same command exit 2 naming
    it, nothing written; once that process is killed (its lock file left behind), the same command completes."""
    out = tmp_path / "r.nc"
    hold = (f"import time; from simulate.atomic import OutputLock; lock = OutputLock({str(out)!r}, 'lagda simulate'); "
            "print('held', flush=True); time.sleep(300)")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, err = simulate(capsys, "--out", str(out))
        assert code == 2 and f"error: another lagda simulate is writing {out} (pid {holder.pid} on " in err
        assert listing(tmp_path) == [".r.nc.lock"]
    finally:
        holder.kill()
        holder.wait()
    code, err = simulate(capsys, "--out", str(out))
    assert code == 0, err
    assert listing(tmp_path) == ["r.nc"]
    assert_same_data(out, whole)


def test_a_failed_netcdf_write_is_one_os_error_saying_the_free_space_and_leaves_no_file(tmp_path, monkeypatch):
    """netCDF4 reports a full disk as RuntimeError("NetCDF: HDF error"): write_netcdf says it as an OSError (one
    error line from any command) with the room left, and leaves neither the file nor its temporary."""
    import xarray as xr

    def full_disk(self, store, **kwargs):
        raise RuntimeError("NetCDF: HDF error")

    monkeypatch.setattr(xr.Dataset, "dump_to_store", full_disk)
    ds = xr.Dataset({"a": ("x", np.zeros(1000))})
    with pytest.raises(OSError, match=rf"cannot write {tmp_path / 'd.nc'}: NetCDF: HDF error \(.* free in "
                                      rf"{tmp_path}, the data's 8 kB would fit\)"):
        atomic.write_netcdf(ds, tmp_path / "d.nc")
    assert listing(tmp_path) == []


def test_a_full_disk_says_what_is_saved_and_resume_completes(whole, capsys, monkeypatch, tmp_path):
    import errno

    from simulate import generate

    out, write = tmp_path / "r.nc", generate.write_atomic
    calls = []

    def full_at_the_second_chunk(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 3:  # the manifest, the first chunk, then no room
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(path, *args, **kwargs)

    monkeypatch.setattr(generate, "write_atomic", full_at_the_second_chunk)
    code, err = simulate(capsys, "--out", str(out))
    assert code == 2 and ("error: [Errno 28] No space left on device; 3 of 10 fields are saved in "
                          f"{out}.partial: rerun the same command with --resume to continue") in err
    monkeypatch.setattr(generate, "write_atomic", write)
    code, err = simulate(capsys, "--out", str(out), "--resume")
    assert code == 0, err
    assert_same_data(out, whole)
    assert listing(tmp_path) == ["r.nc"]


def test_a_file_held_open_after_its_unlink_gives_its_space_back(tmp_path):
    """What a failed netCDF close leaves (HDF5 keeps the removed temporary open): release_unlinked truncates it."""
    path = tmp_path / ".d.nc.tmp-1"
    handle = open(path, "wb")
    handle.write(b"x" * 1_000_000)
    handle.flush()
    os.unlink(path)
    try:
        assert os.fstat(handle.fileno()).st_size == 1_000_000
        assert atomic.release_unlinked(path) == 1
        assert os.fstat(handle.fileno()).st_size == 0
    finally:
        handle.close()
