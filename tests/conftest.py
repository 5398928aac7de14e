"""Strict JAX numerics for every test: float64 available, no silent rank promotion; no persistent compilation
cache (the `lagda` command's, which tests/test_cli.py checks in a subprocess), so compilations stay countable.
Also a Dask scheduler a test file's maps share (map_scheduler), and the longest files collected first."""
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


# The test files that take longest on 2 cores (the CI log's slowest tests, --durations), longest first. With
# `--dist loadfile --no-loadscope-reorder` (pyproject.toml) the workers take files in collection order, so these
# start first and the short files fill in around them; xdist's default order (by number of tests) left a long file
# of few tests running alone at the end.
LONG_FILES = ("test_train_distributed.py", "test_docs.py", "test_qg_files.py", "test_sample_starts.py",
              "test_map_resume.py", "test_plain_notes.py", "test_demo.py", "test_sample_field.py",
              "test_examples.py", "test_cli.py", "test_sample_basis.py", "test_physical.py")


def pytest_collection_modifyitems(items):
    """Collects LONG_FILES first (in that order), every other file after them in its own order."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))
