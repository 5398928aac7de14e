"""Strict JAX numerics for every test: float64 available, no silent rank promotion; no persistent compilation
cache (the `lagda` command's, which tests/test_cli.py checks in a subprocess), so compilations stay countable."""
import os

import jax

os.environ["LAGDA_COMPILE_CACHE"] = "off"

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
# Start the backends now, with one CPU device: `lagda simulate` run in-process (cli.main) asks for
# one device per core when JAX has not started yet, which would change the whole session's devices.
jax.devices()
