"""Shared pieces of the sample tests (tests/test_sample*.py): the Monte Carlo error bound every closed-form check
uses, and the noisy one-drifter field the field-level tests and the starts' tests sample.

Tolerances come from the sampler's own Monte Carlo error: each of RUNS independent runs (own key) gives an
estimate; their spread gives the standard error of the pooled one, so (pooled - exact) / se follows Student's
t with RUNS - 1 degrees of freedom, and the bound is its 1 - ALPHA / (2 n_tests) quantile (Bonferroni).
"""

import functools

import jax
import numpy as np
from scipy import stats

from lagda.assimilation.methods.config import SampleConfig
from lagda.assimilation.methods.sample import assimilate_sample
from lagda.testing import make_twin

RUNS, PARTICLES, ALPHA = 8, 256, 1e-3
NOISE = 1e-2
FIELD = dict(particles=48, runs=2, mcmc_steps=2, noise_std=NOISE)  # the field's settings: its compiled stage


def per_run(samples, weights, runs):
    """Returns each run's weighted mean `(run, d)` and covariance `(run, d, d)` (runs are row blocks)."""
    x, w = samples.reshape(runs, -1, samples.shape[1]), weights.reshape(runs, -1) * runs
    mean = np.einsum("rn,rnd->rd", w, x)
    centred = x - mean[:, None, :]
    return mean, np.einsum("rn,rnd,rne->rde", w, centred, centred)


def assert_within_mc_error(per_run, exact, alpha=ALPHA):
    """Asserts |mean over runs - exact| < t quantile x se for every entry (se from the runs' spread)."""
    per_run, exact = np.asarray(per_run), np.asarray(exact)
    se = per_run.std(axis=0, ddof=1) / np.sqrt(per_run.shape[0])
    bound = stats.t.ppf(1.0 - alpha / (2 * exact.size), per_run.shape[0] - 1)
    t = np.abs(per_run.mean(axis=0) - exact) / se
    assert np.all(t < bound), f"max |t| {t.max():.2f} >= {bound:.2f}"


@functools.cache
def noisy_field():
    """Returns (twin, noisy positions, estimate) for one drifter over 60 RK4 steps, K = 9, noise NOISE; the estimate
    from the prior with FIELD's settings, key 0. Computed once per process (the field and starts tests share it)."""
    twin = make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2)
    positions = twin.positions[0] + NOISE * np.random.default_rng(0).normal(size=twin.positions[0].shape)
    config = SampleConfig(**FIELD)
    estimate = assimilate_sample(positions, twin.times, twin.release[0], twin.model, config, jax.random.key(0))
    return twin, positions, estimate
