"""enkf: ES-MDA reduces the error and the spread of its prior ensemble."""

import jax
import numpy as np

from lagda.assimilation.methods import AssimConfig, assimilate_enkf
from tests.assim_twin import make_twin


def test_enkf_reduces_the_error_of_its_prior_ensemble():
    twin = make_twin(n_field=1, n_drifter=4, n_obs=100)
    config = AssimConfig(enkf_members=32, enkf_iterations=2, continuation=(0.3, 1.0))
    est = assimilate_enkf(twin.positions[0], twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    posterior_error = twin.field_error(est.samples.T @ est.weights, 0)
    prior_error = twin.field_error(np.zeros(9), 0)  # the prior ensemble's mean is the prior mean 0
    assert posterior_error < 0.3 * prior_error
    assert est.info["spread_per_stage"][-1] < 0.5 * np.sqrt(np.mean(twin.model.prior_var))
