"""Strict JAX numerics for every test: float64 available, no silent rank promotion; no persistent compilation
cache (the `lagda` command's, which tests/test_cli.py checks in a subprocess), so compilations stay countable.
Also a Dask scheduler a test file's maps share (map_scheduler)."""
import os

import jax
import pytest

os.environ["LAGDA_COMPILE_CACHE"] = "off"

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
# Start the backends now, with one CPU device: `lagda simulate` run in-process (cli.main) asks for
# one device per core when JAX has not started yet, which would change the whole session's devices.
jax.devices()


@pytest.fixture(scope="module")
def map_scheduler():
    """The address of a running Dask scheduler with one in-process worker thread, shared by a test file's maps
    (tests/test_map*.py) where the worker processes are not what is tested: `lagda map --scheduler ADDRESS`."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address
