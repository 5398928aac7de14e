"""Strict JAX numerics for every test: float64 available, no silent rank promotion."""
import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
# Start the backends now, with one CPU device: `lagda simulate` run in-process (cli.main) asks for
# one device per core when JAX has not started yet, which would change the whole session's devices.
jax.devices()
