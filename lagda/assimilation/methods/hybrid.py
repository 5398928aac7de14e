"""`hybrid`: the learned conditional as the prior of the linear-Gaussian inversion of the tracks.

The embed method gives the learned conditional nu_{u|v} (eq. 28 with the bank as the prior
sample) in moment-matched form N(m_L, C_L), C_L = diag(v_L). nu_{u|v} is the prior reweighted
by exp(s(u, v) / tau), so if the finite-difference velocities y = G x + e, e ~ N(0, s^2 I)
(lagda.assimilation.methods.linear) are conditionally independent of the embedding given x, the posterior
given both is the Gaussian product
    precision = C_L^-1 + G^T G / s^2,   mean = cov (C_L^-1 m_L + G^T y / s^2),
computed as the linear inversion of y - G m_L with prior N(0, C_L) (s^2 by empirical Bayes or
from noise_std, the lag chosen as in `linear`). C_L is capped at the prior variance D: a
conditional broader than the prior carries no information, so an uninformative encoder
(uniform bank weights, m_L ~ 0, v_L ~ D) gives back `linear`. The learned covariance is
widened (or replaced by the original prior) where the data's marginal likelihood says so
(`select_prior`).

The data, by regime (the lag and spacing as found by lagda.assimilation.methods.track_data.choose_lag):
- dense exact tracks: finite-difference velocities, with the learned prior as above;
- noisy tracks (lag above 1): the displacements (lagda.assimilation.methods.track_data.displacement_data),
  whose noise is the white position noise instead of the amplified difference noise; above
  learned_noise_limit (given or estimated position noise std) under the original prior:
  the shipped encoder was trained on noise-free (float32-rounded) tracks and its conditional
  for noisy ones is not trusted, nor is that of a set encoder trained on the noisy regime mixture
  (docs/results/assimilation.md measures both on noisy tracks);
- sparse tracks (spacing above sparse_steps RK4 steps): finite differences, then a
  Gauss-Newton refinement.

In a chosen basis (`--basis`, a time basis and the uniform current; `basis_hybrid_estimates`) the encoder must
have been trained on pairs in that same basis (lagda.assimilation.methods.basis.write_basis_pairs, a set encoder with
the inner or l2 similarity, whose conditional has the closed form of learned.closed_form), and the inversion is
`linear`'s with its OU representation error; the prior is the learned conditional widened by each of INFLATIONS,
or the climatology's own prior, whichever the whitened velocities' evidence favours (a climatology is needed:
it gives the prior the learned one is compared with, and the representation error). The encoder reads each
drifter's fixes thinned to the cadence of its training tracks (`at_cadence`); the inversion reads every fix.

Refinement (HybridConfig.refine): "gauss_newton" continues with a short 4D-Var on the
positions (lagda.assimilation.methods.search.multistart_map) under the original prior N(0, D),
lengthening the window as `var` does (HybridConfig.continuation: on sparse tracks one
full-window Gauss-Newton run from the product mean often stays in a wrong basin) with
`iterations` per stage. The learned conditional was computed from these same tracks, so it serves as the
start and is not multiplied into the position likelihood a second time. With `starts` > 1
the learned conditional's mean and draws from it are further starts (a learned global search),
and the end point of least 4D-Var cost is kept. "auto" (default) refines sparse tracks only,
where finite differences are biased; "none" never refines; "var" runs 4D-Var from the embed /
retrieve estimate, without the product. Measured in experiments/assimilation/benchmark.py
(results/assimilation_benchmark.md).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from lagda.assimilation.methods.config import HybridConfig
from lagda.assimilation.methods.learned import Scorer, learned_conditionals
from lagda.assimilation.methods.linear import (
    displacement_posterior,
    track_velocity_posterior,
)
from lagda.assimilation.methods.linear_gaussian import (
    gaussian_estimate,
    linear_posterior,
    log_evidence,
)
from lagda.assimilation.methods.search import gaussian_starts, multistart_map
from lagda.assimilation.methods.track_data import (
    data_kind,
    displacement_data,
    observation_regime,
    velocity_data,
)
from lagda.assimilation.methods.variational import assimilate_var
from lagda.assimilation.model import FlowModel, to_real
from lagda.assimilation.posterior import FieldEstimate


def gaussian_product(g, y, prior_mean, prior_var, noise_var=None, n_grid: int = 41):
    """Returns (mean `(p,)`, cov `(p, p)`, noise_var) of N(prior_mean, diag prior_var) times N(y; G x, s^2 I).

    Parameters
    ----------
    g
        `(n, p)`
    y
        `(n,)`
    prior_mean, prior_var
        `(p,)`
    noise_var
        s^2, or None for empirical Bayes (lagda.assimilation.methods.linear_gaussian.linear_posterior).
    """
    mean, cov, noise_var = linear_posterior(g, y - g @ prior_mean, prior_var, noise_var, n_grid)
    return prior_mean + mean, cov, noise_var


def learned_prior(mean, var, model: FlowModel) -> tuple[np.ndarray, np.ndarray]:
    """Returns the learned Gaussian prior (mean `(2K,)`, var `(2K,)`), var capped at the prior D and floored."""
    d = model.prior_var
    return np.asarray(mean, np.float64), np.clip(np.asarray(var, np.float64), 1e-8 * d, d)


INFLATIONS = (1.0, 4.0, 16.0, 64.0)  # candidate widenings of the learned covariance


def select_prior(g, y, learned, model: FlowModel, noise_var=None, n_grid: int = 41):
    """Returns (mean, var, inflation) of the prior the velocity data support best.

    Candidates: the learned N(m_L, C_L) with C_L widened by each of INFLATIONS (capped at the
    prior D), and the original prior N(0, D) (inflation inf: plain `linear`). The choice
    maximises the marginal likelihood of the finite-difference velocities (type-II maximum
    likelihood), so an encoder that is wrong for these tracks (e.g. noisy ones, unlike its
    training data) is overruled by the data instead of biasing the estimate.
    """
    learned_mean, learned_var = learned
    candidates = [(learned_mean, np.minimum(learned_var * a, model.prior_var), a) for a in INFLATIONS]
    candidates.append((np.zeros_like(learned_mean), model.prior_var, float("inf")))
    scores = [log_evidence(g, y - g @ mean, var, noise_var, n_grid) for mean, var, _ in candidates]
    return candidates[int(np.argmax(scores))]


def assimilate_hybrid(positions, times, release, model: FlowModel, config: HybridConfig, key,
                      learned_mean, learned_var) -> FieldEstimate:
    """Returns the posterior of one field: learned conditional x velocity likelihood, optionally refined.

    Parameters
    ----------
    positions
        `(drifter, obs, 2)`
    times
        `(drifter, obs)`
    release
        `(drifter, 2)` or None.
    learned_mean, learned_var
        `(2K,)` moments of the embed conditional over x = (Re c, Im c).

    Raises
    ------
    ValueError
        if no finite difference can be formed.
    """
    learned = learned_prior(learned_mean, learned_var, model)  # (mean, var), var capped at the prior
    info = observation_regime(positions, times, model, config)
    kind = data_kind(info, config)
    noise_std = config.noise_std if config.noise_std is not None else info.get("noise_std_est", 0.0)
    trusted = noise_std <= config.learned_noise_limit  # else unlike the encoder's training tracks
    if kind == "velocities":
        g, y, noise_var, info = velocity_data(positions, times, release, model, config, info)
    elif trusted:  # positions through the integral model (white, for the prior choice only)
        g, y = displacement_data(positions, times, release, model)
        noise_var = config.noise_std**2 if config.noise_std else None
    if not trusted:
        prior_mean, prior_var, inflation = np.zeros(2 * model.n_modes), model.prior_var, float("inf")
    else:
        prior_mean, prior_var, inflation = select_prior(g, y, learned, model,
                                                        noise_var, config.noise_grid)
    if kind == "displacements":  # with the errors-in-variables whitening of the noisy positions
        mean, cov, data_info = displacement_posterior(positions, times, release, model, config, prior_mean, prior_var)
        info = {**info, **data_info, "data_noise_std": data_info["position_noise_std"]}
    else:
        mean, cov, data_info = track_velocity_posterior(positions, times, release, model, config, info, prior_mean,
                                                        prior_var)
        info = {**info, **data_info, "data_noise_std": data_info["velocity_noise_std"]}
    info = {**info, "noise_source": "given" if config.noise_std else "empirical_bayes", "refined": False,
            "prior_inflation": inflation}
    sparse = info["sparse"]
    refine = config.refine == "gauss_newton" or (config.refine == "auto" and sparse)
    if not refine:
        return gaussian_estimate(key, mean, cov, config.members, info)
    key_search, key_starts = jax.random.split(key)
    starts = [mean]
    if config.starts > 1:  # the learned conditional's mean and draws (search.gaussian_starts)
        starts += list(gaussian_starts(*learned, config.starts - 1, key_starts))
    # the position noise: given, else the evidence of the refined fit (search.multistart_map)
    out = multistart_map(positions, times, release, model, config, key_search, np.stack(starts), config.iterations,
                         config.continuation)
    return dataclasses.replace(out, info={**info, **out.info, "refined": True,
                                          "starts": "product mean"
                                                    + (f" + learned conditional mean and {len(starts) - 2} draws"
                                                       if len(starts) > 1 else "")})


def hybrid_estimates(tracks, model: FlowModel, config: HybridConfig, scorer: Scorer, key, bank=None,
                     cache=None) -> tuple[list[FieldEstimate], list[float]]:
    """Returns (FieldEstimates, seconds per field) of hybrid on every field of `tracks`.

    The learned conditional of every field comes from one bank pass (learned.learned_conditionals); a
    field the encoder cannot read takes the prior N(0, D) as its learned conditional, and its info says
    why. Each field is then `assimilate_hybrid` (refine "var": 4D-Var from the learned
    estimate).
    """
    if model.time is not None:
        return basis_hybrid_estimates(tracks, model, config, scorer, key)
    old_hybrid = config.refine == "var"
    first = "retrieve" if old_hybrid and config.start == "retrieve" else "embed"
    learned, problems, shared = learned_conditionals(first, tracks, model, config, scorer, key, bank, cache)
    out, seconds = [], []
    for f in range(tracks.n_field):
        start = time.perf_counter()
        est = learned[f] if learned[f] is not None else _prior_estimate(model)
        sub, fkey = tracks.for_field(f), jax.random.fold_in(key, 10_000 + f)
        if not old_hybrid:  # the learned conditional as the prior of the velocity inversion
            field = assimilate_hybrid(sub.positions, sub.times, sub.release, model, config, fkey, est.info["mean"],
                                      est.info["var"])
        else:
            x0 = to_real(est.samples.T @ est.weights)
            field = assimilate_var(sub.positions, sub.times, sub.release, model, config, fkey, x_init=x0, stages=(1.0,),
                                   iterations=config.iterations)
        used = {"learned_conditional": problems[f] is None}
        if problems[f]:
            used["learned_fallback"] = f"prior instead: {problems[f]}"
        out.append(dataclasses.replace(field, candidates=est.candidates, candidate_weights=est.candidate_weights,
                                       info={**field.info, **used}))
        seconds.append(shared / tracks.n_field + time.perf_counter() - start)
    return out, seconds


def basis_problem(model: FlowModel, scorer: Scorer) -> str | None:
    """Returns why the encoder cannot serve as the prior in the chosen basis of `model`, or None."""
    spec = (scorer.modes or {}).get("time_basis")
    if not spec:
        return "the encoder was trained on lagda's own flows, not on pairs in a chosen basis (write_basis_pairs)"
    same = (np.array_equal(np.asarray(scorer.modes["k1"]), model.k1)
            and np.array_equal(np.asarray(scorer.modes["k2"]), model.k2)
            and np.array_equal(np.asarray(spec["degree"]), model.time.degree))
    if not same:
        return (f"the encoder's basis ({len(scorer.modes['k1'])} modes) is not the one chosen for these tracks "
                f"({model.n_modes} modes): give the --basis, --k-max and --degree it was trained with")
    if not np.isclose(spec["length"], model.time.length, rtol=1e-3) or not np.isclose(spec["start"], model.time.start):
        return (f"the encoder's time basis spans [{spec['start']:.6g}, {spec['start'] + spec['length']:.6g}] model "
                f"time, these tracks' [{model.time.start:.6g}, {model.time.start + model.time.length:.6g}]")
    if scorer.kind not in ("inner", "l2"):
        return f"the encoder's similarity {scorer.kind!r} has no closed-form conditional: train with inner or l2"
    if model.unresolved is None:
        return ("hybrid in a chosen basis needs --climatology (the prior the learned one is weighed against, and "
                "the representation error)")
    return None


def training_spacing(scorer: Scorer) -> float:
    """Returns the spacing of the fixes the encoder was trained on (model time; 0 when unknown)."""
    times = np.asarray((scorer.modes or {}).get("time") or [], np.float64)
    return float(np.median(np.diff(times))) if times.size > 1 else 0.0


def at_cadence(tracks, spacing: float):
    """Returns the tracks (lagda.io.tracks.Tracks) with each drifter's fixes thinned to at least `spacing` apart (the
    rest NaN), as the encoder read them in training: its regime features (token duration and count, roughness) are
    those of its training cadence. Tracks already as coarse are returned as they are."""
    from lagda.assimilation.methods.representation import thin_pairs

    valid = np.isfinite(tracks.times) & np.all(np.isfinite(tracks.positions), axis=-1)
    rows, cols = np.nonzero(valid)
    keep = np.zeros_like(valid)
    kept = thin_pairs(tracks.times[rows, cols], rows, spacing)
    keep[rows[kept], cols[kept]] = True
    if keep.sum() == valid.sum():
        return tracks
    return dataclasses.replace(tracks, positions=np.where(keep[..., None], tracks.positions, np.nan),
                               times=np.where(keep, tracks.times, np.nan))


def basis_hybrid_estimates(tracks, model: FlowModel, config: HybridConfig, scorer: Scorer,
                           key) -> tuple[list[FieldEstimate], list[float]]:
    """Returns (FieldEstimates, seconds per field) of hybrid in a chosen basis (module docstring).

    Raises
    ------
    ValueError
        (one line) when the encoder cannot serve in this basis (`basis_problem`).
    """
    from lagda.assimilation.methods.learned import closed_form, field_queries
    from lagda.assimilation.methods.linear import representation_posterior

    problem = basis_problem(model, scorer)
    if problem:
        raise ValueError(f"hybrid: {problem}")
    start = time.perf_counter()
    spacing = training_spacing(scorer)
    queries, problems = field_queries(at_cadence(tracks, spacing), scorer)
    shared = (time.perf_counter() - start) / tracks.n_field
    out, seconds = [], []
    for f in range(tracks.n_field):
        start = time.perf_counter()
        sub = tracks.for_field(f)
        if queries[f] is None:
            raise ValueError(f"hybrid: field {f}: {problems[f]}")
        mean, var = learned_prior(*closed_form(queries[f], model, scorer), model)
        candidates = [(mean, np.minimum(var * a, model.prior_var)) for a in INFLATIONS]
        candidates.append((np.zeros_like(mean), model.prior_var))
        regime = observation_regime(sub.positions, sub.times, model, config)
        post_mean, cov, info = representation_posterior(sub.positions, sub.times, sub.release, model, config, regime,
                                                        *candidates[0], alternatives=candidates[1:])
        choice = info["prior_choice"]
        inflation = INFLATIONS[choice] if choice < len(INFLATIONS) else float("inf")
        info = {**info, "learned_conditional": True, "prior_inflation": inflation, "encoder_fix_spacing": spacing,
                "prior_candidates": [f"learned x {a:g}" for a in INFLATIONS] + ["climatology"],
                "noise_source": "given" if config.noise_std else "estimated from the tracks"}
        out.append(gaussian_estimate(jax.random.fold_in(key, f), post_mean, cov, config.members, info))
        seconds.append(shared + time.perf_counter() - start)
    return out, seconds


def _prior_estimate(model: FlowModel) -> FieldEstimate:
    """Returns the prior N(0, D) in the form of a learned conditional (hybrid's fallback)."""
    info = {"mean": np.zeros(2 * model.n_modes), "var": model.prior_var}
    return FieldEstimate(np.zeros((1, model.n_modes), complex), np.ones(1), info=info)
