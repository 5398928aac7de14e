"""Files of long jobs that survive a kill at any instant: temporary names, renames, stale-temporary cleanup.

Every file or folder a job writes is first made under a temporary name beside its final one,
`.NAME.tmp-PID` (`temporary_name`), and renamed into place when complete, so the final name
only ever holds complete content. A SIGKILL can leave such temporaries behind; the next run on the
same output removes those whose process is gone (`remove_stale`) and reports each one.

A folder is removed by renaming it to a temporary name first (`remove_tree`), so a folder cut
short while being deleted is a stale temporary, never a half-empty folder under its real name.

While a job writes an output it holds `OutputLock` on it, so that a second run on the same output (the
command started twice, a scheduler's requeue while the first still runs) refuses at once, naming the
first, instead of racing it for the same files.

`write_netcdf` writes a netCDF file this way and stays interruptible: xarray's default netCDF4
lock is a combination of two non-reentrant locks, and a Ctrl-C that lands while it releases them
leaves one held, so the `close()` in xarray's own cleanup then waits on it forever. Writing
through a store with a private reentrant lock lets the cleanup close the file and the
KeyboardInterrupt propagate.

`fault_point(name)` is the test hook of the fault-injection tests: with the environment variable
`LAGDA_FAULT=NAME[@K][:ACTION]` the process stops the K-th time (default 1) it passes the named
state transition, by SIGKILL (ACTION `kill`, the default) or by a KeyboardInterrupt (`interrupt`).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Callable

FAULT_ENV = "LAGDA_FAULT"
_TMP = ".tmp-"
_passed: dict[str, int] = {}


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt whose message says what is on disk at that moment and what a rerun does."""


def fault_point(name: str) -> None:
    """Stops the process here if `LAGDA_FAULT` names this point and this pass (see the module docstring).

    Raises
    ------
    KeyboardInterrupt
        with ACTION `interrupt`. ACTION `kill` sends SIGKILL to this process.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    point, _, action = spec.rpartition(":")
    if action not in ("kill", "interrupt"):
        point, action = spec, "kill"
    point, _, nth = point.partition("@")
    if point != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] != int(nth or 1):
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise KeyboardInterrupt


def reset_fault_counts() -> None:
    """Forgets how often each fault point was passed (for tests that inject several faults in one process)."""
    _passed.clear()


def check_folder(path) -> None:
    """Raises ValueError unless the folder that `path` is to be written in exists and is writable."""
    parent = Path(path).parent
    if not parent.is_dir():
        what = f"{parent} is a file, not a directory" if parent.exists() else f"directory {parent} does not exist"
        raise ValueError(f"cannot write {path}: {what}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {path}: directory {parent} is not writable")


class Busy(ValueError):
    """Another process holds the output's `OutputLock`."""


class OutputLock:
    """An exclusive lock on `path` while a job writes it (a context manager, or `release()`): the kernel's lock
    (flock) on the hidden file `.NAME.lock` beside it, which names its holder. A killed job holds no lock, whatever
    it left; the file is removed on release.

    Raises
    ------
    Busy
        another process holds it (its pid, host and start in the message).
    ValueError
        the folder of `path` is missing or not writable (`check_folder`).

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "map.nc"
    >>> with OutputLock(out, "lagda map"):
    ...     try:
    ...         OutputLock(out, "lagda map")
    ...     except Busy as busy:
    ...         print(str(busy).split(" (pid")[0].replace(str(out), "OUT"))
    another lagda map is writing OUT
    """

    def __init__(self, path, job: str):
        import fcntl
        import socket
        import time

        path = Path(path)
        check_folder(path)
        self.path = path.with_name(f".{path.name}.lock")
        while True:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(self._fd, 200).decode(errors="replace").strip() or "another process"
                os.close(self._fd)
                raise Busy(f"another {job} is writing {path} ({holder}): wait for it to end, or stop it and rerun "
                           "with --resume") from None
            try:  # the file locked is still the one named (its holder may have removed it on release meanwhile)
                if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(self._fd)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"pid {os.getpid()} on {socket.gethostname()}, since "
                           f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}".encode())

    def release(self) -> None:
        """Removes the lock file and releases the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)  # before the unlock, so that no one locks a file about to vanish
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def temporary_name(path) -> Path:
    """Returns the temporary name of `path` for this process: `.NAME.tmp-PID` in the same folder."""
    path = Path(path)
    return path.with_name(f".{path.name}{_TMP}{os.getpid()}")


def _running(pid: int) -> bool:
    if pid == os.getpid():  # this process writes its temporaries after the cleanup, never during it
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _stale(entry: Path) -> bool:
    """Whether `entry` is a temporary `.NAME.tmp-PID` whose process is not running."""
    head, _, pid = entry.name.rpartition(_TMP)
    return entry.name.startswith(".") and bool(head[1:]) and pid.isdigit() and not _running(int(pid))


def stale_temporaries(path) -> list[Path]:
    """Returns the temporaries of `path` (files or folders `.NAME.tmp-PID`) whose process is not running."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    return sorted(p for p in path.parent.glob(f".{glob.escape(path.name)}{_TMP}*") if _stale(p))


def _remove(entries: list[Path], report: Callable[[str], None] | None) -> list[Path]:
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)
        if report is not None:
            report(f"removed {entry}, left by an interrupted run")
    return entries


def remove_stale(path, report: Callable[[str], None] | None = None) -> list[Path]:
    """Removes the stale temporaries of `path` (`stale_temporaries`), reporting one line each; returns them."""
    return _remove(stale_temporaries(path), report)


def remove_stale_inside(folder, report: Callable[[str], None] | None = None) -> list[Path]:
    """Removes the stale temporaries of every name in `folder` (`.*.tmp-PID`), reporting each; returns them."""
    return _remove(sorted(p for p in Path(folder).glob(f".*{_TMP}*") if _stale(p)), report)


def write_atomic(path, write: Callable[[Path], None], fault: str = "file") -> Path:
    """Returns `path` after `write(tmp_path)` filled a temporary file beside it, renamed into place.

    The temporary file (`temporary_name`) lives in the same folder, so the rename is atomic, and
    is removed if `write` fails or is interrupted. Fault points: `FAULT:written` (the temporary is
    complete, not renamed) and `FAULT:renamed`.
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        write(tmp)
        fault_point(f"{fault}:written")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fault_point(f"{fault}:renamed")
    return path


def make_folder_atomic(path, fill: Callable[[Path], None], fault: str = "folder") -> Path:
    """Returns `path`, a new folder that `fill(tmp_folder)` filled under a temporary name before it was renamed.

    Fault points: `FAULT:created` (the empty temporary folder exists) and `FAULT:renamed`.

    Raises
    ------
    OSError
        if `path` exists or cannot be made; the temporary folder is then removed.
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        tmp.mkdir()
        fault_point(f"{fault}:created")
        fill(tmp)
        os.rename(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    fault_point(f"{fault}:renamed")
    return path


def remove_tree(path, fault: str = "folder-removal") -> None:
    """Removes the folder `path`: renamed to its temporary name first, so a removal cut short leaves only a
    stale temporary. Fault point: `FAULT:renamed` (renamed, not yet deleted)."""
    tmp = temporary_name(path)
    os.rename(path, tmp)
    try:
        fault_point(f"{fault}:renamed")
    finally:
        shutil.rmtree(tmp)


def write_netcdf(ds, path, encoding: dict | None = None, fault: str = "netcdf", finish=None) -> Path:
    """Returns `path` after writing the xarray Dataset `ds` there as NETCDF4 through a temporary file (atomic).

    Equivalent to `ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding)` (variables held
    in memory or dask arrays, computed chunk by chunk), but a KeyboardInterrupt during the write closes and
    removes the temporary file and propagates instead of hanging (the module docstring says why). Other
    threads of the process must not use netCDF meanwhile. `finish(tmp)`, when given, is called on the written and
    closed temporary file before its rename (to add what is computed from the data written, such as attributes).
    Fault points: `FAULT:open` (the temporary file is open and partly written), then those of `write_atomic`.

    Raises
    ------
    OSError
        the netCDF library failed to write (its RuntimeError, "NetCDF: HDF error" on a full disk): the
        message says the free space left in the folder and whether the data would fit in it.
    """
    import xarray as xr

    def write(tmp: Path) -> None:
        from xarray.backends.common import ArrayWriter

        store = xr.backends.NetCDF4DataStore.open(tmp, mode="w", format="NETCDF4", lock=threading.RLock())
        try:
            fault_point(f"{fault}:open")
            writer = ArrayWriter()  # a dask-backed variable is queued here, then computed chunk by chunk
            ds.dump_to_store(store, encoding=encoding or {}, writer=writer)
            writer.sync()
        finally:
            store.close()
        if finish is not None:
            finish(tmp)

    try:
        return write_atomic(path, write, fault)
    except RuntimeError as error:  # the library's own error for a failed write, a full disk's included
        release_unlinked(temporary_name(path))
        free = shutil.disk_usage(Path(path).parent).free
        room = (f"less than the data's {_size(ds.nbytes)}: the disk is full" if free < ds.nbytes else
                f"the data's {_size(ds.nbytes)} would fit")
        raise OSError(f"cannot write {path}: {error} ({_size(free)} free in {Path(path).parent}, {room})") from error


def release_unlinked(path) -> int:
    """Truncates the file descriptors this process still holds on `path` after it was unlinked; returns how many.

    A netCDF file whose close fails (a full disk fails its last flush) stays open inside the HDF5 library after
    its temporary is removed, so its space would return only when the process ends (a notebook would keep the disk
    full); truncated, it returns now. Reads /proc/self/fd: elsewhere nothing is done.
    """
    target, count = f"{os.path.abspath(path)} (deleted)", 0
    try:
        entries = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for name in entries:
        try:
            if os.readlink(f"/proc/self/fd/{name}") == target:
                os.ftruncate(int(name), 0)
                count += 1
        except OSError:  # closed meanwhile, or not a file
            pass
    return count


def _size(n: float) -> str:
    """Returns a byte count as people read it: "126 kB", "46.3 GB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"
