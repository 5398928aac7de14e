"""Does a learned conditional density amortise the posterior? A normalising flow on the encoder's embedding.

The learned half's job, measured: a conditional density q(x | g(tracks)) over the coefficients x = (Re c, Im c),
a masked autoregressive flow of rational-quadratic splines (flowjax), conditioned on the trained set encoder's
embedding g (frozen) and fitted by maximum likelihood to pairs drawn from the prior and simulated in one
observation regime (neural posterior estimation). On the benchmark's held-out flows of that regime (seed 1, the
`--quick` window), two rows in the benchmark's per-field format:

- `flow`: q's own draws (512, equal weights) as the posterior: no likelihood, no fit, the embedding and the draws;
- `flow+is`: q as the proposal of an importance sampler for the posterior given the true noise (the yardstick's
  target): draws x ~ q, weights p0(x) L(x) / q(x), no tempering; `importance_runs` is 1 where the weights pass
  sample's own rule, `sample.importance_served` (ESS >= target_ess x particles of SampleConfig's defaults,
  Pareto k < sample.PARETO_K_MAX).

flowjax is needed for this script only (`python3 -m pip install -e ".[flows]"`); lagda does not import it.

    python -m experiments.assimilation.flow_proposal --run runs/q9/run --regimes sparse10-noisy,sparse100 \
        --out runs/flow/f.csv
    python -m experiments.assimilation.benchmark --merge runs/flow/f.csv \
        results/assimilation_benchmark_posterior16_quick.fields.csv --yardstick posterior-mean:var --out runs/flow/m.csv

Seconds per track of `flow`: the embedding and the 512 draws (jitted; the first field's compilation included); of
`flow+is`: the embedding, the draws and their likelihoods (likewise). The flow's fit (once per regime) is printed
and in `fit_seconds`.
"""

from __future__ import annotations

import argparse
import functools
import math
import pathlib
import time

from experiments.assimilation import benchmark as bench  # first: sets the thread settings and x64 before jax loads

# isort: split
import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.methods.config import SampleConfig
from lagda.assimilation.methods.learned import scorer_from_run
from lagda.assimilation.methods.observations import arrange
from lagda.assimilation.methods.sample import (
    importance_served,
    importance_weights,
    log_gaussian,
    pareto_k,
    problem_likelihood,
)
from lagda.assimilation.methods.variational import observation_problem
from lagda.assimilation.model import model_settings, to_complex, to_real
from lagda.assimilation.posterior import Posterior
from lagda.assimilation.scores import score_posterior

MEMBERS = 512  # q's own draws kept for the "flow" row
SPLINE_INTERVAL = 5.0  # in prior stds: the splines' range
TRAIN_SEED = 2  # make_tracks seed of the training pairs; the benchmark's held-out flows are seed 1


def embeddings(tracks, scorer, batch: int = 256) -> np.ndarray:
    """Returns the encoder's embedding `(field, n_e)` of every field of `tracks` (each field's drifters one set)."""
    n_field = tracks.n_field
    per = tracks.positions.shape[0] // n_field
    pos = tracks.positions.reshape(n_field, per, *tracks.positions.shape[1:])
    times = tracks.times.reshape(n_field, per, -1)
    valid = np.ones(times.shape, bool)
    return np.concatenate([np.asarray(scorer.embed_fn(pos[i:i + batch], times[i:i + batch], valid[i:i + batch]))
                           for i in range(0, n_field, batch)])


def fit_flow(x, y, key, layers: int, width: int, epochs: int):
    """Returns the fitted conditional flow q(x | y) and its training losses; x `(n, d)`, y `(n, n_e)` standardised."""
    from flowjax.bijections import RationalQuadraticSpline
    from flowjax.distributions import Normal
    from flowjax.flows import masked_autoregressive_flow
    from flowjax.train import fit_to_data

    init_key, fit_key = jax.random.split(key)
    # spline transformers (a neural spline flow), identity beyond +-SPLINE_INTERVAL prior stds: affine ones drew
    # coefficients of 1e20 on 4-drifter tracks, whose posterior is narrow
    flow = masked_autoregressive_flow(init_key, base_dist=Normal(jnp.zeros(x.shape[1])), cond_dim=y.shape[1],
                                      transformer=RationalQuadraticSpline(knots=8, interval=SPLINE_INTERVAL),
                                      flow_layers=layers, nn_width=width)
    flow, losses = fit_to_data(fit_key, flow, (jnp.asarray(x), jnp.asarray(y)), max_epochs=epochs, max_patience=10,
                               batch_size=256, learning_rate=1e-3, show_progress=False)
    return flow, losses


@functools.lru_cache(maxsize=None)
def _drawer(n: int):
    """Returns the jitted (flow, key, y) -> (n draws of q(. | y), their log q); one compilation per n and flow."""
    import equinox as eqx

    @eqx.filter_jit
    def run(flow, key, y):
        z = flow.sample(key, (n,), condition=y)
        return z, flow.log_prob(z, condition=y)

    return run


def draw(flow, key, y, n: int):
    """Returns n draws of q(. | y) `(n, d)` (standardised coefficients) and their log q `(n,)`."""
    return _drawer(n)(flow, key, jnp.asarray(y))


def importance(flow, y, std, log_likelihood, data, prior_var, key, draws: int):
    """Returns (x `(draws, d)`, normalised weights, ESS, Pareto k) of q(. | y) as the proposal of p0 L."""
    z, log_q = draw(flow, key, y, draws)
    log_q = log_q - jnp.sum(jnp.log(std))
    x = z * std
    prior = (jnp.zeros(x.shape[1]), jnp.diag(jnp.sqrt(prior_var)))
    lw = np.asarray(jax.vmap(lambda v: log_gaussian(v, *prior) + log_likelihood(v, data))(x) - log_q)
    lw = np.where(np.isnan(lw), -np.inf, lw)  # a draw whose log likelihood is NaN: weight 0
    w, ess = importance_weights(lw)
    return np.asarray(x), w, ess, pareto_k(lw)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="trained run whose encoder conditions the flow")
    parser.add_argument("--regimes", default="sparse10-noisy")
    parser.add_argument("--train", type=int, default=50000, help="training pairs per regime")
    parser.add_argument("--fields", type=int, default=16, help="the benchmark's held-out flows (seed 1)")
    parser.add_argument("--draws", type=int, default=8192, help="importance draws per field")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--out", default="runs/flow/fp.csv")
    args = parser.parse_args(argv)

    model, (scorer, _) = model_settings(None, args.run), scorer_from_run(args.run)
    dt, n_steps = model.dt, int(round(0.02 / model.dt))  # the benchmark's --quick window
    modes = (model.k1, model.k2, model.omega)
    config = SampleConfig()
    std = np.sqrt(model.prior_var)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for name in args.regimes.split(","):
        regime = bench.REGIMES[name]
        stride = regime.stride_within(n_steps)
        start = time.perf_counter()
        train = bench.make_tracks(modes, model.scale, dt, n_steps // stride, stride, args.train, regime.drifters,
                                  regime.noise, seed=TRAIN_SEED, release=regime.release)
        y = embeddings(train, scorer)
        simulate_s = time.perf_counter() - start
        y_mean, y_std = y.mean(0), y.std(0) + 1e-12
        x = to_real(train.true_coef) / std
        start = time.perf_counter()
        flow, losses = fit_flow(x, (y - y_mean) / y_std, jax.random.key(0), args.layers, args.width, args.epochs)
        fit_s = time.perf_counter() - start
        print(f"{name}: {args.train} pairs simulated and embedded in {simulate_s:.0f} s, flow fitted in {fit_s:.0f} s "
              f"({len(losses['train'])} epochs, validation loss {min(losses['val']):.3f})", flush=True)

        tracks = bench.regime_tracks(model, regime, n_steps, args.fields, range(args.fields))
        start = time.perf_counter()
        y_held = (embeddings(tracks, scorer) - y_mean) / y_std
        embed_s = (time.perf_counter() - start) / args.fields
        sigma = regime.noise if regime.noise > 0 else config.sigma_floor  # the yardstick's: the true noise
        drawn, weighted, seconds, draw_seconds, checks = [], [], [], [], []
        with jax.enable_x64(True):
            for f in range(args.fields):
                start = time.perf_counter()
                sub = tracks.for_field(f)
                obs = arrange(sub.positions, sub.times, sub.release, dt)
                problem = observation_problem(obs, model, sigma)
                n_data = 2.0 * float(np.sum(obs.mask))
                log_l, data = problem_likelihood(problem, -0.5 * n_data * math.log(2.0 * math.pi * sigma**2))
                xs, w, ess, k = importance(flow, y_held[f], std, log_l, data, model.prior_var,
                                           jax.random.key(100 + f), args.draws)
                served = importance_served(ess, k, config)
                weighted.append((to_complex(xs), w))
                seconds.append(time.perf_counter() - start)
                start = time.perf_counter()  # q's own draws: the flow's estimate without the likelihood
                z = np.asarray(draw(flow, jax.random.key(200 + f), y_held[f], MEMBERS)[0])
                drawn.append(to_complex(z * std))
                draw_seconds.append(time.perf_counter() - start)
                checks.append({"ess": ess, "pareto_k": k, "served": served})
        base = {"regime": name, "drifters": regime.drifters, "obs": n_steps // stride, "sampler_settings": ""}
        rows = [
            ("flow", Posterior(np.stack(drawn), np.full((args.fields, MEMBERS), 1.0 / MEMBERS), "flow",
                               seconds=np.array(draw_seconds) + embed_s)),
            ("flow+is", Posterior(np.stack([c for c, _ in weighted]), np.stack([w for _, w in weighted]), "flow+is",
                                  seconds=np.array(seconds) + embed_s))]
        nan = dict.fromkeys(("ess", "pareto_k"), float("nan"))
        extra = {"flow": [nan] * args.fields,
                 "flow+is": [{"importance_runs": float(c["served"]), "ess": c["ess"], "pareto_k": c["pareto_k"]}
                             for c in checks]}
        for method, post in rows:
            s = score_posterior(post, tracks, *modes, dt)
            new = bench.field_records(post, s, range(args.fields), base | {"method": method}, regime.drifters,
                                      float(np.sum(post.seconds)))
            records += [r | e | {"fit_seconds": fit_s, "simulate_seconds": simulate_s}
                        for r, e in zip(new, extra[method])]
        for f, check in enumerate(checks):
            print(f"{name} field {f}: flow err {records[-2 * args.fields + f]['velocity_rel_l2']:.4f}, "
                  f"flow+is err {records[-args.fields + f]['velocity_rel_l2']:.4f}, ESS {check['ess']:.1f} of "
                  f"{args.draws}, Pareto k {check['pareto_k']:.2f}, served {check['served']}", flush=True)
        bench.write_csv(records, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
