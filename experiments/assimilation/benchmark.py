"""Benchmark of the assimilation methods on held-out twin tracks with known truth, against the truth-map oracle.

Regimes (REGIMES; `--regimes` picks them): float64 RK4 tracks of `--fields` held-out flows each
(default 16, K = 49, T = 0.1, dt = 1e-4), observed every `stride` RK4 steps with Gaussian
position noise `noise` (passed as noise_std), `drifters` per flow released at (0.75, 0.75)
(jittered by up to 0.2 with several drifters) or uniformly on the torus ("uniform").

Methods (`--methods`): every name the `assimilate` dispatcher knows (`hybrid:REFINE` sets
the hybrid setting `refine`; a learned name is skipped without `--run`; a name ending in `@estimated`,
e.g. `hybrid@estimated`, is given no noise level and estimates it, as a user's run does), plus rows computed
here:
- `truth-map`: the oracle, Gauss-Newton 4D-Var started from the TRUE coefficients with the
  exact prior and the true noise (lagda.assimilation.methods.search.truth_map); no method can
  use it, it bounds what a method that finds the truth's basin reaches in as many iterations
  (`--truth-iterations`, default `--search-iterations`: on exact sparse tracks the MAP lies along
  a narrow curved valley, and more iterations move it further from the truth, not closer);
- `search:prior`: multi-start search (search.multistart_map) from the `linear` estimate and
  `--search-starts` - 1 prior draws;
- `search:linear`: the same search from one start, the `linear` estimate;
- `hybrid+search`: hybrid with the learned global search (hybrid's `starts` =
  `--search-starts`: the product mean, the learned conditional's mean and draws from it);
- `posterior-mean`: the yardstick where the data do not determine the field: the mean of the
  posterior from the `sample` method (tempered SMC from the prior, `--sample-particles` per run,
  `--sample-runs` independent runs), the estimate of least expected error; its rows carry the
  sampler's convergence evidence (`rhat_max`, `runs_agree`: the fraction of coordinates whose runs
  agree within their Monte Carlo error at p 0.99, `tempering_complete`, `divergent_max`: the largest
  fraction of divergent HMC moves in a stage, which runs agreeing cannot reveal), given the true noise (on exact
  tracks the misfit's floor, `sigma_floor`: the evidence cannot tell noise from signal there, and a method's
  estimate of it is the method's own); `posterior-mean:var` starts
  the same sampler from var's Laplace Gaussian (the speed-up a proposal buys, at equal accuracy), and
  `posterior-mean:learned` (with `--run`, an encoder of the inner or l2 similarity) from the learned
  conditional of the tracks, hybrid's prior (the posterior amortised by the encoder); a regime whose tracks
  the encoder cannot read skips that row rather than start it from the prior; `posterior-mean:hybrid` (with
  `--run`, any encoder hybrid reads) from hybrid's posterior of the tracks (the learned conditional after the
  data); a `+is` after the start (`posterior-mean:hybrid+is`) first importance-samples the start (up to
  IMPORTANCE_DRAWS x the particles per run; `importance_runs`: the runs whose weights passed, the others
  tempered). Their `seconds_per_track`
  over posterior-mean's is the speed-up (the first sampler row of a run also pays the stage's compilation:
  compare fields after the first in the `.fields.csv`, or run each row alone).
Every method is also the ratio of its median error to posterior-mean's (`vs_posterior_mean`).
The three searches and hybrid's refinement run the same continuation (the configs' `continuation`)
with `--search-iterations` Gauss-Newton iterations per stage and start, so `hybrid+search`
against `search:prior` (as many starts, from the prior) and `search:linear` (one start) is the
ablation of the learned starts at equal compute.
Every method is also reported as the ratio of its median velocity-field error to truth-map's
(`vs_truth_map`). Scores (lagda.assimilation.scores.score_posterior, mean over flows): relative
L2 velocity-field error over the window (and its median), along-track velocity error,
re-simulated track error, forecast error to 1.5 T, 95% velocity calibration (the fraction of true grid
velocities inside mean +- 1.96 std, and inside the central 95% interval of the members: `_quantile_`, 0.95 for
the exact posterior over flows drawn from the prior whatever its marginals' shape), seconds per track;
for the search rows and truth-map also `basin_fraction` (mean fraction of the starts that ended
in the chosen basin) and `map_cost` (median 4D-Var cost J at the end point: a search below
truth-map's found a mode of higher posterior density than the truth's basin).
Writes results/assimilation_benchmark.csv and .md (every score and the per-regime verdict), and
the per-field scores beside them (`.fields.csv`). `--shard I/N` assimilates only the fields
f = I mod N and writes only the per-field file; `--merge` summarises shards' per-field files
(the same tables as one run over every field: means, medians and costs are per field).

    python -m experiments.assimilation.benchmark --quick            # K = 9, T = 0.02, 2 fields
    python -m experiments.assimilation.benchmark --run RUN_DIR      # + retrieve / embed / hybrid
    for i in 0 1 2 3; do python -m experiments.assimilation.benchmark --shard $i/4 --out s$i.csv & done; wait
    python -m experiments.assimilation.benchmark --merge s0.fields.csv s1.fields.csv s2.fields.csv s3.fields.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import pathlib
import re
import sys
import time
import typing

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the SVD of `linear` oversubscribes a shared 2-core box

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from lagda.assimilation.methods.config import HybridConfig, SampleConfig, configure  # noqa: E402
from lagda.assimilation.methods.learned import scorer_from_run  # noqa: E402
from lagda.assimilation.methods.linear import assimilate_linear  # noqa: E402
from lagda.assimilation.methods.registry import METHODS  # noqa: E402
from lagda.assimilation.methods.search import multistart_map, prior_starts, truth_map  # noqa: E402
from lagda.assimilation.model import FlowModel, flow_model, model_settings, to_real  # noqa: E402
from lagda.assimilation.posterior import Posterior  # noqa: E402
from lagda.assimilation.scores import score_posterior  # noqa: E402
from lagda.cli import add_config_options  # noqa: E402
from lagda.io.tracks import Tracks  # noqa: E402
from simulate import (  # noqa: E402
    draw_coefficients,
    draw_frequencies,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)
from simulate.atomic import write_atomic  # noqa: E402

SCORES = ("velocity_rel_l2", "velocity_rel_l2_median", "vs_truth_map", "track_velocity_rel_l2", "resim_rms_true",
          "forecast_rms", "velocity_calibration", "velocity_quantile_calibration", "seconds_per_track",
          "vs_posterior_mean")


@dataclasses.dataclass(frozen=True)
class Regime:
    stride: int  # RK4 steps between observed positions
    noise: float  # Gaussian position noise std (domain lengths), 0: exact
    drifters: int  # drifters per flow
    # "cluster": (0.75, 0.75) + U(0, 0.2)^2 per drifter (exactly (0.75, 0.75) alone); "uniform": U(0, 1)^2
    release: str = "cluster"

    def stride_within(self, n_steps: int) -> int:
        """The stride over n_steps RK4 steps: at least 4 observations (--quick's short window)."""
        return min(self.stride, n_steps // 4)


REGIMES = {
    "dense": Regime(1, 0.0, 1),
    "dense-noisy": Regime(1, 1e-3, 1),
    "dense-noisy-4": Regime(1, 1e-3, 4),
    "sparse10-noisy": Regime(10, 1e-3, 1),
    "sparse100-noisy-4": Regime(100, 1e-4, 4, "uniform"),
    "sparse100": Regime(100, 0.0, 1),
}
CLASSICAL = ("linear", "var", "enkf")
LEARNED = tuple(name for name, cls in METHODS.items() if cls.learned)
DIRECT = ("truth-map", "search:prior", "search:linear")  # computed here, not by the dispatcher
SAMPLER_ROW = "posterior-mean"  # the sample method's posterior mean, with every particle kept
IMPORTANCE_DRAWS = 16  # a +is sampler row draws up to this many times its particles per run before tempering


def family(method: str) -> str:
    """Returns the method's family: 'hybrid' for hybrid:none, hybrid+search or hybrid@estimated, 'search' for
    search:prior."""
    return re.split(r"[:+@]", method)[0]


def make_tracks(modes, scale, dt, n_obs, stride, n_field, n_drifter, noise, seed, release="cluster") -> Tracks:
    """Returns held-out float64 tracks of n_field prior draws with their truth (see Regime.release)."""
    k1, k2, omega = modes
    key = jax.random.key(10_000 + seed)
    coef = np.asarray(draw_coefficients(key, scale, n_field, np.complex128))
    rng = np.random.default_rng(seed)
    if release == "uniform":
        start = rng.random((n_field, n_drifter, 2))
    else:
        start = 0.75 + (0.2 * rng.random((n_field, n_drifter, 2)) if n_drifter > 1 else np.zeros((n_field, 1, 2)))
    pos = np.asarray(simulate_tracks(coef, start, k1, k2, omega, dt, n_obs, stride), np.float64)
    pos = pos + noise * rng.normal(size=pos.shape)
    times = np.tile(np.arange(1, n_obs + 1) * stride * dt, (n_field * n_drifter, 1))
    return Tracks(positions=pos.reshape(-1, n_obs, 2), times=times, field=np.repeat(np.arange(n_field), n_drifter),
                  trajectory_id=np.arange(n_field * n_drifter), true_coef=coef, k1=k1, k2=k2, omega=omega,
                  release=start.reshape(-1, 2))


def direct_posterior(method: str, tracks: Tracks, model: FlowModel, config: HybridConfig, key, noise: float,
                     settings: argparse.Namespace) -> Posterior:
    """Returns the Posterior of a DIRECT method (truth-map, search:prior, search:linear) over every field."""
    estimates, seconds = [], []
    for f in range(tracks.n_field):
        sub = tracks.for_field(f)
        args = (sub.positions, sub.times, sub.release, model, config, jax.random.fold_in(key, f))
        start = time.perf_counter()
        if method == "truth-map":
            est = truth_map(*args, to_real(tracks.true_coef[f]), noise,
                            settings.truth_iterations or settings.search_iterations)
        else:
            lin = assimilate_linear(*args)
            starts = to_real(lin.samples.T @ lin.weights)[None, :]
            if method == "search:prior":
                draws = prior_starts(model, settings.search_starts - 1, jax.random.fold_in(jax.random.key(1), f), False)
                starts = np.concatenate([starts, draws])
            est = multistart_map(*args, starts, config.iterations, config.continuation)
        estimates.append(est)
        seconds.append(time.perf_counter() - start)
    info = tuple(e.info for e in estimates)
    return Posterior(samples=np.stack([e.samples for e in estimates]).astype(np.complex128),
                     weights=np.stack([e.weights for e in estimates]), method=method,
                     seconds=np.asarray(seconds), info=info)


def sample_settings(pairs, option: str = "--sample-set") -> dict:
    """NAME=VALUE strings (given as `option`) -> settings of `sample`, typed and checked as `lagda assimilate --NAME
    VALUE` reads them.

    Raises
    ------
    ValueError
        one line for a pair without "=", a setting `sample` does not have, or a bad value.
    """
    parser = argparse.ArgumentParser(prog=option, add_help=False, allow_abbrev=False, exit_on_error=False)
    add_config_options(parser, {name: (kind, "") for name, kind in typing.get_type_hints(SampleConfig).items()})
    argv = []
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise ValueError(f"{option} expects NAME=VALUE, got {pair!r}")
        argv += ["--" + name.replace("_", "-"), value]
    try:
        values, unknown = parser.parse_known_args(argv)
    except argparse.ArgumentError as error:
        raise ValueError(f"{option}: {error}") from None
    if unknown:
        raise ValueError(f"{option}: sample has no setting {unknown[0][2:].replace('-', '_')}; valid: "
                         f"{', '.join(f.name for f in dataclasses.fields(SampleConfig))}")
    values = {name: value for name, value in vars(values).items() if value is not None}
    try:
        configure("sample", SampleConfig, values)
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None
    return values


def is_sampler_row(method: str) -> bool:
    """Whether `method` is a sampler row (posterior-mean, posterior-mean:var, posterior-mean@estimated, ...)."""
    return method.partition("@")[0].partition(":")[0] == SAMPLER_ROW


def run_method(method, tracks, model: FlowModel, regime: Regime, settings):
    """Returns (Posterior, wall seconds) of one method on one regime's tracks.

    Every method gets 64 members and the regime's noise (None when exact; none either for a name ending in
    `@estimated`: the method estimates it, as `lagda assimilate` does by default); var its `--var-iterations`,
    hybrid and the searches `--search-iterations` per stage and start.
    """
    method, _, noise = method.partition("@")  # hybrid@estimated: no noise level given, as the command's default
    if noise not in ("", "estimated"):
        raise ValueError(f"unknown noise setting @{noise} (only @estimated)")
    common = {"members": 64, "noise_std": regime.noise if regime.noise > 0 and not noise else None}
    start = time.perf_counter()
    if is_sampler_row(method):  # posterior-mean, or from var's, the learned or hybrid's Gaussian
        particles, runs, begin = settings.sample_particles, settings.sample_runs, method.partition(":")[2] or "prior"
        begin, _, how = begin.partition("+")  # posterior-mean:hybrid+is: importance sampling from the start first
        if how not in ("", "is"):
            raise ValueError(f"unknown sampler setting +{how} (only +is)")
        if regime.noise == 0 and not noise:  # the posterior given the true noise: on exact tracks the misfit's floor
            common["noise_std"] = SampleConfig().sigma_floor
        # the run's encoder (restored once) for the learned conditional, or for hybrid's posterior of each field
        learned = {"encoder": settings.scorer, "run": settings.run} if begin in ("learned", "hybrid") else {}
        if begin == "learned":  # every field's conditional, or the row is skipped (hybrid has its own fallback)
            from lagda.assimilation.methods.learned import field_queries

            problems = [p for p in field_queries(tracks, settings.scorer)[1] if p]
            if problems:
                raise ValueError(f"{method}: the encoder cannot read these tracks ({problems[0]})")
        sampler = METHODS["sample"](**common | {"members": particles * runs, "particles": particles, "runs": runs,
                                                "particle_batch": settings.sample_batch, "start": begin,
                                                "importance_draws": IMPORTANCE_DRAWS * particles if how else 0}
                                    | sample_settings(settings.sample_set), **learned)
        sampler.progress = True  # a row can take an hour a field: its log shows each stage's l
        post = sampler(tracks, model, jax.random.key(0))
    elif method in DIRECT:
        config = HybridConfig(**common, iterations=settings.search_iterations)
        post = direct_posterior(method, tracks, model, config, jax.random.key(0), regime.noise, settings)
    else:
        name, _, refine = method.partition(":")  # e.g. hybrid:none, hybrid:gauss_newton, hybrid+search
        options = dict(common, **({"refine": refine} if refine else {}))
        if name == "hybrid+search":
            name, options["starts"] = "hybrid", settings.search_starts
        options.update({"var": {"iterations": settings.var_iterations},
                        "hybrid": {"iterations": settings.search_iterations}}.get(name, {}))
        if name not in METHODS:
            raise ValueError(f"unknown method {name!r}")
        cls = METHODS[name]
        post = (cls(settings.scorer, **options) if cls.learned else cls(**options))(tracks, model, jax.random.key(0))
    return post, time.perf_counter() - start


PER_FIELD = ("velocity_rel_l2", "track_velocity_rel_l2", "resim_rms_true", "forecast_rms", "velocity_calibration",
             "velocity_quantile_calibration")


def default_model(quick: bool, dt: float = 1e-4) -> FlowModel:
    """Returns the benchmark's model without --run: K = 49 modes (--quick: K = 9), frequencies from key 0."""
    k1, k2 = rectangular_modes((-1, 1), (-1, 1)) if quick else rectangular_modes()
    return flow_model(k1, k2, draw_frequencies(jax.random.key(0), len(k1), 20 * np.pi), spectrum(k1, k2, 1.5, 10.0), dt)


def regime_tracks(model: FlowModel, regime: Regime, n_steps: int, n_fields: int, fields) -> Tracks:
    """Returns the tracks of a regime's held-out flows `fields` (of n_fields drawn with seed 1), n_steps RK4 steps
    long, observed every regime.stride_within(n_steps) steps."""
    stride = regime.stride_within(n_steps)
    return subset(make_tracks((model.k1, model.k2, model.omega), model.scale, model.dt, n_steps // stride, stride,
                              n_fields, regime.drifters, regime.noise, seed=1, release=regime.release), fields)


def subset(tracks: Tracks, fields) -> Tracks:
    """Returns the tracks of `fields` (in that order), renumbered 0..len(fields)-1."""
    fields = list(fields)
    rows = np.concatenate([np.flatnonzero(tracks.field == f) for f in fields])
    new_index = {f: i for i, f in enumerate(fields)}
    return dataclasses.replace(tracks, positions=tracks.positions[rows], times=tracks.times[rows],
                               field=np.array([new_index[f] for f in tracks.field[rows]]),
                               trajectory_id=tracks.trajectory_id[rows], true_coef=tracks.true_coef[fields],
                               release=None if tracks.release is None else tracks.release[rows])


def field_records(post: Posterior, scores: dict, fields, base: dict, drifters: int, wall: float) -> list[dict]:
    """Returns one record per field: its scores, seconds per track, and for searches its end cost and basin fraction.

    map_cost: the 4D-Var cost J at a search's or truth-map's end point (below truth-map's, the
    search found a point of higher posterior density than the truth's basin offers);
    basin_fraction: the fraction of a search's starts that ended in the chosen basin.
    """
    out = []
    for i, f in enumerate(fields):
        info = post.info[i] if post.info else {}
        info = info if isinstance(info, dict) else {}
        sampler = {"rhat_max": float(info.get("rhat_max", float("nan"))),
                   "runs_agree": 1.0 - float(info.get("agreement_fraction_beyond_p99", float("nan"))),
                   "tempering_complete": float(info.get("tempering_complete", float("nan"))),
                   "importance_runs": float(info.get("importance_runs", float("nan"))),
                   "divergent_max": float(info.get("divergent_max", float("nan")))}
        out.append({**base, "field": f, **{n: float(scores["per_field"][n][i]) for n in PER_FIELD}, **sampler,
                    "seconds_per_track": float(post.seconds[i]) / drifters if post.seconds is not None
                    else float("nan"),
                    "map_cost": float(info.get("cost_best", float("nan"))),
                    "basin_fraction": (info["n_in_best_basin"] / info["n_starts"]
                                       if "n_in_best_basin" in info and post.method != "truth-map" else float("nan")),
                    "wall_s": wall / len(fields)})
    return out


def standard_error(values) -> float:
    """Returns the standard error of the mean of `values` `(n,)` (nan below 2 values)."""
    values = np.asarray(values, np.float64)
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def calibration(row) -> str:
    """Returns "mean +- se" of a row's 95% coverage over its flows, with "below 0.95" or "above 0.95" where 0.95 is
    more than 3 se away.

    Bands of mean +- 1.96 std of the exact posterior cover the truth with probability 0.95 on average over flows
    drawn from the prior where the posterior's marginals are Gaussian (tests/test_scores.py); a posterior whose
    marginals are far from Gaussian can cover otherwise (a 90/10 mixture of two narrow modes: 0.90), so a sampler
    row below 0.95 has missed some of the posterior's mass or has marginals far from Gaussian; its central 95%
    interval's coverage (`velocity_quantile_calibration`, 0.95 for the exact posterior whatever its marginals)
    tells the two apart.
    """
    mean, se = float(row.get("velocity_calibration", "nan")), float(row.get("velocity_calibration_se", "nan"))
    if not math.isfinite(mean):
        return "-"
    if not math.isfinite(se):
        return f"{mean:.3f}"
    verdict = " below 0.95" if mean + 3 * se < 0.95 else " above 0.95" if mean - 3 * se > 0.95 else ""
    return f"{mean:.3f} +- {se:.3f}{verdict}"


def finite_max(values) -> float:
    """Returns the largest finite value, nan when none is (a score no per-field file measured)."""
    finite = values[np.isfinite(values)]
    return float(np.max(finite)) if finite.size else float("nan")


def summarise(records, yardstick: str = SAMPLER_ROW) -> list[dict]:
    """Returns one row per (regime, method) from per-field records: means over fields (with the standard error of
    the 95% coverage's), the median field error, the median search cost, and the summed wall time (ratios to
    truth-map and `yardstick` added)."""
    groups = {}
    for r in records:
        groups.setdefault((r["regime"], r["method"]), []).append(r)
    rows = []
    for (regime, method), group in groups.items():
        # a score missing from a record (a per-field file written before it existed) is nan: not measured
        value = lambda name: np.array([float(r.get(name, "nan")) for r in group])  # noqa: E731
        costs = value("map_cost")
        rows.append({"regime": regime, "drifters": group[0]["drifters"], "obs": group[0]["obs"], "method": method,
                     "fields": len(group), **{n: float(np.mean(value(n))) for n in PER_FIELD},
                     "velocity_rel_l2_median": float(np.median(value("velocity_rel_l2"))),
                     "velocity_calibration_se": standard_error(value("velocity_calibration")),
                     "velocity_quantile_calibration_se": standard_error(value("velocity_quantile_calibration")),
                     "seconds_per_track": float(np.mean(value("seconds_per_track"))),
                     "basin_fraction": float(np.mean(value("basin_fraction"))),
                     "map_cost": float(np.median(costs)) if np.any(np.isfinite(costs)) else float("nan"),
                     "rhat_max": float(np.max(value("rhat_max"))) if "rhat_max" in group[0] else float("nan"),
                     "runs_agree": float(np.mean(value("runs_agree"))) if "runs_agree" in group[0] else float("nan"),
                     "tempering_complete": (float(np.mean(value("tempering_complete")))
                                            if "tempering_complete" in group[0] else float("nan")),
                     "importance_runs": (float(np.mean(value("importance_runs")))
                                         if "importance_runs" in group[0] else float("nan")),
                     "divergent_max": finite_max(value("divergent_max")),
                     "wall_s": float(np.sum(value("wall_s"))),
                     "sampler_settings": "; ".join(sorted({r.get("sampler_settings") or "" for r in group} - {""}))})
    add_truth_ratios(rows, yardstick)
    return rows


def write_csv(rows, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def on_yardstick_flows(records, yardstick: str) -> list[dict]:
    """Returns the per-field records of the (regime, field) pairs that the `yardstick` row has."""
    flows = {(r["regime"], r["field"]) for r in records if r["method"] == yardstick}
    return [r for r in records if (r["regime"], r["field"]) in flows]


def add_truth_ratios(rows, yardstick: str = SAMPLER_ROW) -> None:
    """Sets every row's vs_truth_map and vs_posterior_mean: its median field error over truth-map's and the
    posterior mean's (the `yardstick` row: posterior-mean, or a sampler row of another start) in the same regime
    (nan without one)."""
    for reference, column in (("truth-map", "vs_truth_map"), (yardstick, "vs_posterior_mean")):
        ref_error = {r["regime"]: float(r["velocity_rel_l2_median"]) for r in rows if r["method"] == reference}
        for r in rows:
            ref = ref_error.get(r["regime"], float("nan"))
            r[column] = float(r["velocity_rel_l2_median"]) / ref if ref > 0 else float("nan")


def _err(r) -> float:
    """Returns a row's median velocity-field error (the mean for rows of older CSVs without it)."""
    return float(r.get("velocity_rel_l2_median") or r["velocity_rel_l2"])


def _best(group, families):
    """Returns the row of least median error among the rows of `families`, or None."""
    rows = [r for r in group if family(r["method"]) in families]
    return min(rows, key=_err) if rows else None


def summary(rows, yardstick: str = SAMPLER_ROW) -> str:
    """Returns the markdown verdict per regime: truth-map's and posterior-mean's median field error, the best
    classical, search and learned method with their error and ratio to truth-map, hybrid's ratio to
    posterior-mean, the posterior mean's 95% coverage over the flows (`calibration`), and var vs hybrid time."""
    lines = ["| regime | truth-map err | posterior-mean err | best classical | err | / truth-map | best search | err | "
             "/ truth-map | best lagda | err | / truth-map | hybrid / posterior-mean | posterior-mean cover | "
             "var s/track | hybrid s/track | var / hybrid time |", "|" + "---|" * 17]
    groups = {}
    for r in rows:
        groups.setdefault(r["regime"], []).append(r)
    for regime, group in groups.items():
        by_method = {r["method"]: r for r in group}
        oracle = _err(by_method["truth-map"]) if "truth-map" in by_method else float("nan")
        mean_error = _err(by_method[yardstick]) if yardstick in by_method else float("nan")
        cells = [regime, f"{oracle:.3g}", f"{mean_error:.3g}"]
        for families in (CLASSICAL, ("search",), LEARNED):
            best = _best(group, families)
            cells += [best["method"], f"{_err(best):.3g}", f"{_err(best) / oracle:.3g}"] if best else ["-", "-", "-"]
        var, hybrid = by_method.get("var"), by_method.get("hybrid")
        cells.append(f"{_err(hybrid) / mean_error:.3g}" if hybrid else "-")
        cells.append(calibration(by_method[yardstick]) if yardstick in by_method else "-")
        times = ["-", "-", "-"]
        if var and hybrid:
            v, h = float(var["seconds_per_track"]), float(hybrid["seconds_per_track"])
            times = [f"{v:.3g}", f"{h:.3g}", f"{v / h:.1f}"]
        lines.append("| " + " | ".join(cells + times) + " |")
    return "\n".join(lines)


def write_tables(rows, out: pathlib.Path, header: str, yardstick: str = SAMPLER_ROW) -> str:
    """Writes out (CSV) and out.md (the full table and the summary); returns the markdown."""
    write_csv(rows, out)
    names = [n for n in (*SCORES, "velocity_calibration_se", "velocity_quantile_calibration_se", "basin_fraction",
                         "map_cost", "rhat_max", "runs_agree", "tempering_complete", "importance_runs",
                         "divergent_max", "wall_s")
             if n in rows[0]]
    lines = ["| regime | drifters | obs | method | " + " | ".join(names) + " |", "|" + "---|" * (4 + len(names))]
    for r in rows:
        lines.append(f"| {r['regime']} | {r['drifters']} | {r['obs']} | {r['method']} | "
                     + " | ".join(f"{float(r[n]):.3g}" for n in names) + " |")
    text = f"{header}\n\n" + "\n".join(lines) + "\n\n" + summary(rows, yardstick) + "\n"
    out.with_suffix(".md").write_text(text)
    return text


def plot(rows, path) -> None:
    """Draws the median velocity-field error, its ratio to truth-map and seconds per track per regime (log scales)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["regime"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    value = {(r["regime"], r["method"]): r for r in rows}
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 1.6 * len(cases) + 3), 11))
    width = 0.8 / len(methods)
    for ax, score, label in ((axes[0], "velocity_rel_l2_median", "median velocity-field rel. L2 error"),
                             (axes[1], "vs_truth_map", "median error / truth-map's"),
                             (axes[2], "seconds_per_track", "seconds per track")):
        for i, method in enumerate(methods):
            heights = [float(value[(c, method)].get(score) or "nan") if (c, method) in value else np.nan for c in cases]
            ax.bar(np.arange(len(cases)) + (i - (len(methods) - 1) / 2) * width, heights, width, label=method)
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(cases)), cases)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(ncol=4, fontsize=8)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="K = 9, T = 0.02, 2 fields (unless --fields), strides capped at T / 4: a smoke test")
    p.add_argument("--run", help="trained run directory (enables retrieve, embed, hybrid and posterior-mean:learned; "
                                 "modes from the run)")
    p.add_argument("--fields", type=int, default=None, help="held-out flows per regime (default 16; 2 with --quick)")
    p.add_argument("--var-iterations", type=int, default=10, help="var: Gauss-Newton iterations per continuation stage")
    p.add_argument("--truth-iterations", type=int, default=None,
                   help="truth-map: Gauss-Newton iterations (default: as many as a search start gets)")
    p.add_argument("--search-starts", type=int, default=8,
                   help="search:prior and hybrid+search: starts (the linear estimate or product mean and 7 others)")
    p.add_argument("--search-iterations", type=int, default=HybridConfig.iterations,
                   help="searches and hybrid's refinement: Gauss-Newton iterations per start and stage")
    p.add_argument("--methods", default="truth-map,linear,var,enkf,search:prior,search:linear,embed,hybrid:none,hybrid,"
                                        "hybrid+search",
                   help="comma list: registered methods (hybrid:REFINE sets hybrid's refine), truth-map, search:prior, "
                        "search:linear, hybrid+search")
    p.add_argument("--regimes", default=",".join(REGIMES), help=f"comma list of {', '.join(REGIMES)}")
    p.add_argument("--sample-particles", type=int, default=1024, help="posterior-mean: SMC particles per run")
    p.add_argument("--sample-runs", type=int, default=2, help="posterior-mean: independent SMC runs")
    p.add_argument("--sample-set", action="append", default=[], metavar="NAME=VALUE",
                   help="posterior-mean: a setting of `lagda assimilate --method sample` (repeatable), e.g. "
                        "final_moves=1 target_acceptance=0.65 max_leapfrog_steps=16 (the kernel before the current "
                        "defaults); recorded in each row")
    p.add_argument("--sample-batch", type=int, default=0,
                   help="posterior-mean: particles moved at once (0: all; bounds GPU memory)")
    p.add_argument("--yardstick", default=SAMPLER_ROW,
                   help="the sampler row that vs_posterior_mean and the summary's posterior-mean column divide by "
                        "(e.g. posterior-mean:var on many fields, checked against posterior-mean on some)")
    p.add_argument("--out", default="results/assimilation_benchmark.csv")
    p.add_argument("--figure", default=None, help="also draw the errors, ratios and times (PNG)")
    p.add_argument("--from-csv", default=None, help="only redraw --out's markdown and --figure from this CSV")
    p.add_argument("--shard", default="0/1", metavar="I/N", help="assimilate only the fields f = I mod N; "
                   "writes only the per-field file (OUT with suffix .fields.csv)")
    p.add_argument("--merge", nargs="+", metavar="FIELDS_CSV", help="summarise shards' per-field files into --out")
    p.add_argument("--yardstick-flows", action="store_true",
                   help="with --merge: summarise every method on the flows the yardstick row has in each regime only "
                        "(a sampler run on some of the flows, compared flow for flow)")
    args = p.parse_args(argv)
    try:
        args.shard_index, args.shard_count = (int(v) for v in args.shard.split("/"))
        if not 0 <= args.shard_index < args.shard_count:
            raise ValueError
    except ValueError:
        p.error(f"--shard must be I/N with 0 <= I < N, got {args.shard!r}")
    if args.fields is not None and args.fields < 1:
        p.error(f"--fields must be >= 1, got {args.fields}")
    unknown = sorted(set(args.regimes.split(",")) - set(REGIMES))
    if unknown:
        p.error(f"unknown regime(s) {', '.join(unknown)}; valid: {', '.join(REGIMES)}")
    if args.yardstick_flows and not args.merge:
        p.error("--yardstick-flows needs --merge")
    try:
        sample_settings(args.sample_set)
    except ValueError as error:
        p.error(str(error))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_csv or args.merge:
        records = [r for f in args.merge or () for r in read_csv(f)]
        if args.yardstick_flows:
            records = on_yardstick_flows(records, args.yardstick)
        rows = read_csv(args.from_csv) if args.from_csv else summarise(records, args.yardstick)
        source = args.from_csv or ", ".join(args.merge)
        print(write_tables(rows, pathlib.Path(args.out), f"(redrawn from {source}; posterior mean: {args.yardstick})",
                           args.yardstick))
        if args.figure:
            plot(rows, args.figure)
        return 0
    dt, t_final = 1e-4, (0.02 if args.quick else 0.1)
    if args.run:
        model = model_settings(None, args.run)
        args.scorer = scorer_from_run(args.run)[0]  # the trained model, restored once for every regime and method
    else:
        model = default_model(args.quick, dt)
        args.scorer = None
    k1, k2, omega, dt = model.k1, model.k2, model.omega, model.dt
    n_fields = args.fields or (2 if args.quick else 16)
    n_steps = int(round(t_final / dt))
    encoder_rows = (SAMPLER_ROW + ":learned", SAMPLER_ROW + ":hybrid")  # sampler rows that need --run, +is or not
    methods = [m for m in args.methods.split(",")
               if args.run or (family(m) not in LEARNED and m.partition("+")[0] not in encoder_rows)]
    fields = [f for f in range(n_fields) if f % args.shard_count == args.shard_index]
    out = pathlib.Path(args.out)
    records = []
    for name in args.regimes.split(","):
        regime = REGIMES[name]
        tracks = regime_tracks(model, regime, n_steps, n_fields, fields)
        for method in methods:
            try:
                post, wall = run_method(method, tracks, model, regime, args)
            except ValueError as error:  # an unknown method, or an encoder trained on other observation times
                print(f"regime={name} method={method}: skipped ({error})", flush=True)
                continue
            s = score_posterior(post, tracks, k1, k2, omega, dt)
            base = {"regime": name, "drifters": regime.drifters, "obs": n_steps // regime.stride_within(n_steps),
                    "method": method, "sampler_settings": " ".join(args.sample_set) if is_sampler_row(method) else ""}
            records += field_records(post, s, fields, base, regime.drifters, wall)
            write_csv(records, out.with_suffix(".fields.csv"))  # after every method: an interrupted run keeps its rows
            row = summarise(records[-len(fields):], args.yardstick)[0]
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if not records:  # every method was skipped: no table to write, and none is overwritten
        print("error: no method ran (each was skipped, as said above)", file=sys.stderr)
        return 2
    if args.shard_count > 1:
        print(f"shard {args.shard}: per-field scores in {out.with_suffix('.fields.csv')}; summarise with --merge")
        return 0
    rows = summarise(records, args.yardstick)
    command = "python -m experiments.assimilation.benchmark " + " ".join(argv if argv is not None else sys.argv[1:])
    header = f"`{command}` ({n_fields} fields per regime, model run: {args.run or 'none'})"
    print("\n" + write_tables(rows, out, header, args.yardstick))
    if args.figure:
        plot(rows, args.figure)
    if not args.run:
        print("\nretrieve / embed / hybrid: pending (no trained model given, --run RUN_DIR)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
