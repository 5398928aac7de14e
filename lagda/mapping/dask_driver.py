"""The Dask driver of `lagda map`: a local cluster or a running scheduler, the tiles sent to its workers a bounded
number at a time (each with its own fixes, scattered), each piece saved as it comes (lagda.mapping.resume), a tile
whose worker is lost sent again.
"""

from __future__ import annotations

import contextlib
import os

from lagda.arguments import given
from lagda.mapping.methods.interface import TileMethod
from lagda.mapping.resume import save_piece
from lagda.mapping.tiles import Grid, Tile
from simulate.provenance import code_digest

TILE_SENDS = 3  # a tile whose Dask worker is lost is sent again, at most this many times in all


class TileFailed(RuntimeError):
    """A tile whose Dask worker was lost each of the TILE_SENDS times it was sent (a tile that ends its worker), or
    that a worker running other lagda code made (its `code_digest` differs)."""


def _run_tile(data, tile: Tile, grid: Grid, method: TileMethod) -> dict:
    """Returns the tile's piece (`method.map_tile` of the tile's `data`), its info with the worker's
    `code_digest`; a tile whose data the method cannot map (ValueError) is a skipped piece."""
    try:
        piece = method.map_tile(data, tile, grid)
    except ValueError as error:
        piece = {"info": {"tile": tile.key, "fixes": int(len(data)), "skipped": str(error)}}
    piece["info"]["code"] = code_digest()
    return piece


def run_tiles(pending, data, grid, method: TileMethod, partial, n_done, n_tiles, workers, scheduler, progress,
              say) -> None:
    """Runs the pending tiles on Dask and saves each piece as it finishes: each tile's own data
    (`data.in_tile(tile)`, `data` as `method.prepare` gave it) mapped by `method` (readied). A tile whose worker is
    lost (a machine gone, a process killed) is sent again, said in a note: its data were scattered to that worker,
    which Dask cannot rebuild.

    Raises
    ------
    TileFailed
        a tile's worker was lost each of the TILE_SENDS times it was sent.
    ConnectionError
        the scheduler was lost.
    """
    if not pending:
        return
    import logging

    from dask.distributed import Client

    client_log = logging.getLogger("distributed.client")
    level = client_log.level
    with _workers_without_main_script():  # the cluster's life: a lost worker is started again within it
        cluster = local_cluster(workers) if scheduler is None else None
        try:
            with Client(scheduler or cluster) as client:
                _send_tiles(client, pending, data, grid, method, partial, n_done, n_tiles, progress, say)
        finally:
            client_log.setLevel(level)
            if cluster is not None:
                cluster.close()


@contextlib.contextmanager
def _workers_without_main_script():
    """While it lasts, a worker process this process starts does not run the user's `__main__` script again.

    Python's spawn start (Dask's) runs the parent's main script or module again in each new process, as
    `__mp_main__`, so that the functions it defines can be found there. The tiles need only lagda's own functions;
    and a script that maps without an `if __name__ == "__main__":` guard would, in each worker, start the same map
    again, find its output locked and stop the worker ("Nanny failed to start"). The spawn start reads which
    script from `__main__.__file__` and `__main__.__spec__`: both are hidden while the cluster lives, and put back.
    """
    import sys

    main = sys.modules.get("__main__")
    hidden = {name: main.__dict__.pop(name) for name in ("__file__", "__spec__") if main is not None
              and name in main.__dict__}
    if "__spec__" in hidden:
        main.__spec__ = None  # a module's __spec__ is always there: None is "run as a script", and no file
    try:
        yield
    finally:
        main.__dict__.update(hidden)


def _send_tiles(client, pending, data, grid, method: TileMethod, partial, n_done, n_tiles, progress, say) -> None:
    """`run_tiles`'s work on its client: a bounded number of tiles in flight, each piece saved as it comes."""
    import logging
    from concurrent.futures import CancelledError

    from dask.distributed import KilledWorker, as_completed
    from tqdm import tqdm

    # a bounded number of tiles in flight: the client holds the data of those tiles only
    limit = 2 * max(1, len(client.scheduler_info().get("workers", {})))
    queue = iter(pending)

    inputs = {}  # each running tile and its data, scattered, by its future's key
    sends = {}  # the times each tile was sent

    def submit(tile):
        # sent to a worker as data, not inside the task graph (which Dask warns of beyond 10 MB: a dense tile)
        scattered = client.scatter(data.in_tile(tile), hash=False)
        sends[tile.key] = sends.get(tile.key, 0) + 1
        future = client.submit(_run_tile, scattered, tile, grid, method, key=f"tile-{tile.key}-{sends[tile.key]}",
                               pure=False)
        inputs[future.key] = (tile, scattered)
        return future

    running = as_completed([submit(t) for _, t in zip(range(limit), queue)])  # range first: no tile lost
    with tqdm(total=n_tiles, initial=n_done, unit="tile", disable=not progress, desc="lagda map") as bar:
        for future in running:
            tile, scattered = inputs.pop(future.key)
            try:
                piece = future.result()
            except (CancelledError, KilledWorker) as error:  # its worker was lost, and the fixes scattered there
                if getattr(error, "reason", "") in ("scheduler-connection-lost", "scheduler-restart"):
                    # the client's reconnection, cancelled as it closes, would log a traceback over the error line
                    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
                    raise ConnectionError(f"lost the Dask scheduler ({error.reason})") from None
                scattered.release()
                if sends[tile.key] >= TILE_SENDS:
                    raise TileFailed(f"tile {tile.key}: its Dask worker was lost each of the {TILE_SENDS} times "
                                     "it was sent (a tile that ends its worker: out of memory? fewer workers "
                                     f"leave each more, e.g. {given('workers', 1)})") from None
                with tqdm.external_write_mode():  # the note on its own line, the bar drawn again below it
                    say(f"note: tile {tile.key}: its Dask worker was lost; sent again")
                running.add(submit(tile))
                continue
            made_by = piece["info"].pop("code")  # the manifest's when it is this code's: not kept per tile
            if made_by != code_digest():  # a worker with another install: its tiles would blend in
                raise TileFailed(f"tile {tile.key} was made by a Dask worker running other lagda code (source digest "
                                 f"{made_by}; this run's is {code_digest()}): install the same lagda on every worker")
            save_piece(partial, piece)
            future.release()
            scattered.release()
            bar.update(1)
            following = next(queue, None)
            if following is not None:
                running.add(submit(following))


def local_cluster(workers: int | None):
    """Returns a dask.distributed.LocalCluster of `workers` single-threaded worker processes (default: the CPUs).

    Dask starts its workers with MALLOC_TRIM_THRESHOLD_=65536, which turns glibc's adaptive mmap threshold off:
    every matrix a tile allocates is then mapped and unmapped afresh, and the page faults make a tile about 1.6x
    slower. These workers start without it.
    """
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        # the scheduler's HTTP server on a free port: on Dask's 8787, a second map on the machine printed a warning;
        # each worker runs this module's dask_setup as it starts
        return LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                            dashboard_address=":0", silence_logs=40, preload=[__name__])


def dask_setup(worker) -> None:
    """Run by each local worker process as it starts (Dask's preload hook): it ignores SIGINT.

    Ctrl-C in a terminal reaches every process of the command; the workers' share of it printed a traceback each
    over the line that says what the interrupted run left. `lagda map` itself stops on it and closes its cluster,
    which ends the workers.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
