"""sample's starts on the tiny noisy track (tests/sample_problems.py): from the learned conditional of an encoder
(start "learned") and from hybrid's posterior (start "hybrid"), each against the prior start's posterior mean within
Monte Carlo error, their records, and the refusals of an encoder they cannot use."""

import json

import jax
import numpy as np
import pytest
from scipy import stats

from lagda.assimilation.methods.learned import Scorer
from lagda.assimilation.methods.registry import Sample, make_method
from lagda.assimilation.methods.sample import learned_proposal
from lagda.assimilation.model import to_real
from lagda.io.tracks import Tracks
from lagda.testing import make_pairs, make_twin
from tests.sample_problems import ALPHA, FIELD, NOISE, noisy_field, per_run


@pytest.fixture(scope="module")
def field():
    """Returns (twin, noisy positions, estimate from the prior with FIELD's settings): sample_problems.noisy_field."""
    return noisy_field()


FIELD_RUNS = 8  # runs of each start compared within Monte Carlo error


def _tracks(twin, positions) -> Tracks:
    """Returns the twin's one field with these (noisy) positions as Tracks."""
    n = len(positions)
    return Tracks(positions, twin.times, np.zeros(n, int), np.arange(n), release=twin.release[0])


def _oracle(x, model, tau=1.0) -> Scorer:
    """Returns an l2 encoder of any tracks whose closed-form conditional (learned.closed_form) has mean x: its
    embedding is e = x tau / v, v = 1 / (1 / D + 1 / tau) the conditional's variance."""
    e = x * tau * (1.0 / model.prior_var + 1.0 / tau)
    return Scorer(lambda positions, times, valid: e[None], "l2", tau, any_regime=True,
                  modes={"k1": model.k1.tolist(), "k2": model.k2.tolist()})


def _assert_same_posterior_mean(one, other):
    """Asserts two estimates of FIELD_RUNS runs each have the same posterior mean within Monte Carlo error (Welch t
    over the runs' means, Bonferroni over the coordinates)."""
    a, b = (per_run(to_real(e.samples), e.weights, FIELD_RUNS)[0] for e in (one, other))
    se = np.sqrt(a.var(axis=0, ddof=1) / FIELD_RUNS + b.var(axis=0, ddof=1) / FIELD_RUNS)
    t = np.abs(a.mean(axis=0) - b.mean(axis=0)) / se
    assert np.all(t < stats.t.ppf(1.0 - ALPHA / (2 * a.shape[1]), FIELD_RUNS - 1)), f"max |t| {t.max():.2f}"


@pytest.fixture(scope="module")
def starts(field):
    """Returns (prior start, learned start) estimates of the field, FIELD_RUNS runs each; the learned conditional is
    centred at the truth, variance D / (1 + D) (an encoder that knows the field, but not the posterior)."""
    twin, positions, _ = field
    tracks, config = _tracks(twin, positions), FIELD | {"runs": FIELD_RUNS}
    prior = Sample(**config).estimate(tracks, twin.model, jax.random.key(5))
    learned = Sample(start="learned", encoder=_oracle(to_real(twin.coef[0]), twin.model), run="oracle",
                     **config).estimate(tracks, twin.model, jax.random.key(6))
    return prior, learned


def test_learned_start_reaches_the_prior_starts_posterior_mean(starts):
    """Both starts sample one posterior: their runs' means agree within Monte Carlo error (Welch t, Bonferroni)."""
    prior, learned = starts
    assert prior.samples.shape == learned.samples.shape == (FIELD_RUNS * 48, 9)  # every particle kept, runs in blocks
    _assert_same_posterior_mean(prior, learned)
    assert prior.info["tempering_complete"] and learned.info["tempering_complete"]


def test_learned_start_records_its_run_and_how_far_its_start_was(field, starts):
    """The info says the start, the run and the conditional used, and q's mean offset from the posterior mean in
    posterior stds (here the truth's offset, computed from the returned particles)."""
    twin = field[0]
    prior, learned = starts
    info = learned.info
    assert info["start"] == "learned" and info["learned_run"] == "oracle" and info["learned_conditional"] is True
    assert "learned_fallback" not in info and prior.info["start"] == "prior" and "learned_run" not in prior.info
    json.dumps(info)
    x, w = to_real(learned.samples), learned.weights
    mean = w @ x
    offset = (to_real(twin.coef[0]) - mean) / np.sqrt(w @ (x - mean) ** 2)
    assert info["start_offset_rms"] == pytest.approx(np.sqrt(np.mean(offset**2)), rel=1e-9)
    assert info["start_offset_max"] == pytest.approx(np.max(np.abs(offset)), rel=1e-9)
    spread = np.sqrt(1.0 / (1.0 / twin.model.prior_var + 1.0))  # the oracle's conditional std (tau 1)
    assert info["start_spread_median"] == pytest.approx(np.median(spread / np.sqrt(w @ (x - mean) ** 2)), rel=1e-9)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A one-epoch set encoder of the inner similarity on the twin's modes (make_pairs: same modes, frequencies and
    prior); at tau 1e4 its conditional N(D e / tau, D) is the prior shifted by ~1% of its std: a cheap start."""
    from lagda.learning.config import learned
    from lagda.learning.train import train

    run_dir = tmp_path_factory.mktemp("runs") / "inner"
    train(learned(set_head="ridge", epochs=1, batch_size=4, similarity="inner", tau=1e4, eval_library=0),
          make_pairs(8, seed=3), None, run_dir, progress=False)
    return run_dir


def test_learned_start_from_a_trained_run_records_the_run(field, run):
    """make_method (lagda assimilate --method sample --start learned --model RUN) restores the run's encoder; each
    field's info names the run (its portable identity, as a result file's model_run)."""
    from lagda.learning.model import run_identity

    twin, positions, _ = field
    method = make_method("sample", FIELD | {"start": "learned"}, run_dir=run)
    assert isinstance(method, Sample) and method.run == run_identity(run) and method.encoder.kind == "inner"
    estimate = method.estimate(_tracks(twin, positions), twin.model, jax.random.key(0))
    info = estimate.info
    assert info["start"] == "learned" and info["learned_run"] == run_identity(run) and info["learned_conditional"]
    assert info["tempering_complete"] and np.isfinite(info["start_offset_rms"]) and info["start_spread_median"] > 0.5


def test_tracks_the_encoder_cannot_read_start_from_the_prior_and_say_why(field):
    """hybrid's rule: a field the encoder cannot read (a transformer encoder trained at other times) takes the prior;
    here that is the prior start itself, the same draws as from start "prior" with the same key, and the info says
    why."""
    twin, positions, from_prior = field
    other_times = Scorer(lambda tracks: np.zeros((1, 18)), "l2", 1.0, times=2 * twin.times[0])
    sampler = Sample(start="learned", encoder=other_times, run="elsewhere", **FIELD)
    estimate = sampler.estimate(_tracks(twin, positions), twin.model, jax.random.key(0))
    info = estimate.info
    assert info["start"] == "learned" and info["learned_conditional"] is False and info["learned_run"] == "elsewhere"
    assert info["learned_fallback"].startswith("prior instead: drifter 0 is observed at 10 times")
    np.testing.assert_array_equal(estimate.samples, from_prior.samples)


def test_learned_start_without_a_usable_encoder_is_one_line(field, tmp_path, capsys):
    """No encoder (Python, or the command line without --model), an encoder for another start, a similarity with no
    closed-form conditional, other modes, a chosen basis: each one ValueError line, before any sampling."""
    import dataclasses

    from lagda.cli import main
    from lagda.testing import write_twin_tracks

    twin, positions, _ = field
    tracks = _tracks(twin, positions)
    for build in (lambda: Sample(start="learned"), lambda: make_method("sample", {"start": "learned"})):
        with pytest.raises(ValueError, match="start 'learned' needs a trained encoder") as error:
            build()
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="an encoder serves starts learned and hybrid only, not 'var'"):
        Sample(start="var", encoder=_oracle(np.zeros(18), twin.model))
    cosine = Scorer(lambda positions, times, valid: np.ones((1, 18)), "cosine", 0.05, any_regime=True)
    with pytest.raises(ValueError, match="similarity 'cosine' has no closed-form conditional: use a run trained with"):
        Sample(start="learned", encoder=cosine, **FIELD).estimate(tracks, twin.model, jax.random.key(0))
    oracle = _oracle(np.zeros(18), twin.model)
    shifted = dataclasses.replace(oracle, modes={"k1": (twin.model.k1 + 1).tolist(), "k2": twin.model.k2.tolist()})
    for encoder, model, message in ((shifted, twin.model, "trained on other modes than these tracks' model"),
                                    (oracle, dataclasses.replace(twin.model, time=object()), "not in a chosen basis")):
        with pytest.raises(ValueError, match=message):
            learned_proposal(tracks, model, encoder)
    write_twin_tracks(make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2), tmp_path / "tracks.nc")
    code = main(["assimilate", "--tracks", str(tmp_path / "tracks.nc"), "--method", "sample", "--start", "learned",
                 "--out", str(tmp_path / "r.nc")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "start 'learned' needs a trained encoder" in err[0]
    assert not (tmp_path / "r.nc").exists()



# ---------------------------------------------------------------- start "hybrid": hybrid's posterior as q


@pytest.fixture(scope="module")
def hybrid_start(field, run):
    """Returns the field's estimate started from hybrid's posterior (the one-epoch inner run's encoder, restored by
    make_method as `lagda assimilate --method sample --start hybrid --model RUN` does), FIELD_RUNS runs."""
    twin, positions, _ = field
    method = make_method("sample", FIELD | {"start": "hybrid", "runs": FIELD_RUNS}, run_dir=run)
    return method, method.estimate(_tracks(twin, positions), twin.model, jax.random.key(7))


def test_hybrid_start_reaches_the_prior_starts_posterior_mean(starts, hybrid_start):
    """From hybrid's posterior the sampler reaches the posterior the prior start reaches: the runs' means agree within
    Monte Carlo error (Welch t, Bonferroni), in no more stages than from the prior."""
    prior, hybrid = starts[0], hybrid_start[1]
    _assert_same_posterior_mean(prior, hybrid)
    assert hybrid.info["tempering_complete"] and hybrid.info["stages_max"] <= prior.info["stages_max"]


def test_hybrid_start_records_hybrids_decisions_and_the_run(field, run, hybrid_start):
    """The info says the start, the run, what hybrid decided (its learned conditional used, the noise it was given)
    and hybrid's seconds; hybrid drew HYBRID_MEMBERS_PER_DIM members per coordinate for q."""
    from lagda.assimilation.methods.sample import HYBRID_MEMBERS_PER_DIM
    from lagda.learning.model import run_identity

    method, estimate = hybrid_start
    info = estimate.info
    assert isinstance(method, Sample) and method.run == run_identity(run)
    assert info["start"] == "hybrid" and info["learned_run"] == run_identity(run) and info["hybrid_seconds"] > 0
    assert info["hybrid"]["learned_conditional"] is True and info["hybrid"]["noise_source"] == "given"
    assert method.hybrid.config.members == HYBRID_MEMBERS_PER_DIM * 18 and method.hybrid.config.noise_std == NOISE
    assert np.isfinite(info["start_offset_rms"]) and info["start_spread_median"] > 0
    json.dumps(info)


def test_command_line_starts_hybrid_from_the_shipped_encoder_by_default(tmp_path, monkeypatch):
    """`lagda assimilate --method sample --start hybrid` without --model reads the shipped encoder, as the learned
    methods do; start "learned" does not default (its closed form needs another similarity)."""
    from lagda.assimilation import assimilate as module
    from lagda.cli import main
    from lagda.examples import DEFAULT_MODEL, shipped
    from lagda.testing import write_twin_tracks

    write_twin_tracks(make_twin(n_field=1, n_drifter=1, n_obs=10, stride=6, seed=2), tmp_path / "tracks.nc")
    calls = []

    def make_method(method, config, run_dir):  # the run the method would read, then stop before it runs
        calls.append(run_dir)
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(module, "make_method", make_method)
    for start in ("hybrid", "var"):
        assert main(["assimilate", "--tracks", str(tmp_path / "tracks.nc"), "--method", "sample", "--start", start,
                     "--out", str(tmp_path / "r.nc")]) != 0
    assert not (tmp_path / "r.nc").exists()
    assert calls == [str(shipped(DEFAULT_MODEL)), None]
