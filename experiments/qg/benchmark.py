"""Benchmark: recovering QG flows (pyqg-jax, lagda's model was not built from them) from drifters.

Two regimes of `lagda simulate --flow qg`, each as two files generated here (cached in `--data`):
a climatology (other flows, seed 100) and held-out test flows (seed 200), 256 drifters released
uniformly, hourly positions over the 60-day window, gridded truth daily.

- **turbulence** (pyqg's default two-layer QGModel, 64^2, upper layer): the flow basis of
  lagda.assimilation.methods.basis, circular modes 0 < |k| <= k_max times Legendre degrees 0..P in time,
  its prior and its representation error (variance and Lagrangian time scale of the velocity the
  basis leaves out, along the climatology's drifters) from the climatology; `linear` with that
  error as an OU process along each track (config.representation "ou"), and for comparison the
  white-noise `linear` (empirical Bayes, the model the methods use without the basis).
- **rossby** (weak linear Rossby waves on a barotropic beta plane, 32^2): the paper's model is
  right there, so lagda's own model is used: the file's modes max(|k1|, |k2|) <= 3 with the
  dispersion-relation frequencies (steady amplitudes), prior the default spectrum scaled to the
  climatology's RMS coefficient; `linear` and, up to 16 drifters, `var` (4D-Var on the positions: 50 s
  a run with 4 drifters, longer than the benchmark can afford with more).

Each run takes the first L of the 256 drifters of a test flow (uniform random releases, so a random
subset), keeps every `interval`-th hourly position and adds Gaussian position noise (0 or 10 m,
GPS-like). Scores over the truth grid, the daily truth times and the window (relative L2 of the
velocity): `error` against the full gridded truth, `error_vs_projection` against the truth's
least-squares fit in the basis, and `limit`, that fit's own error against the truth (the
projection limit: no estimate in the basis beats it; for the rossby model, the least-squares fit
of each mode's amplitude c_k e^{i omega_k t} over the truth times).

    python -m experiments.qg.benchmark                       # every section, then the tables and figures
    python -m experiments.qg.benchmark --quick               # a smoke run on the tiny preset
    python -m experiments.qg.benchmark --sections rossby,kmax --out a.csv &   # two processes ...
    python -m experiments.qg.benchmark --sections sampling --out b.csv; wait
    python -m experiments.qg.benchmark --merge a.csv b.csv                    # ... then the tables and figures
Sections: `rossby`; `kmax` (turbulence, flow 0, hourly, GPS noise: k_max in 5, 8, 12, 16 at P = 3 against
L, P = 1 and 6 at k_max 12 with 64 drifters, and the white-noise linear at k_max 8); `oracle` (flow 0,
k_max 12 and 16: the truth's fit given exactly at the drifters, 6-hourly: the reference without
representation error, what the drifters' coverage allows); `sampling`
(turbulence, both flows, intervals 1, 6, 24 h, noise 0 and 10 m, at the k_max of `--k-for-drifters`).
`defaults` (turbulence, both flows, hourly, 10 m noise, L = 16 / 64 / 256): what a user gets from
`lagda assimilate --basis circular --method linear` (lagda.assimilation.assimilate_file, every setting
default: k_max 12, P 3, no noise level) on a file of the first L drifters without their release points, once
without a climatology and once with `--climatology`, and the oracle in the same basis (the truth's fit with the
current given exactly at the drifters, 6-hourly); scored against the full truth (background included) and
its fit in the basis with the current (the projection limit), and (`linear`) the coverage of its 95% bands of
the grid velocity against both, and against the truth of the bands widened by its representation error's std
(basis.qg_scores).
Writes results/qg_benchmark.csv and .md, docs/figures/qg_error_vs_drifters.png and qg_vorticity.png.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import os
import pathlib
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from experiments.common.paths import ROOT  # noqa: E402
from lagda.assimilation.methods.basis import basis_model  # noqa: E402
from lagda.assimilation.methods.config import LinearConfig, VarConfig  # noqa: E402
from lagda.assimilation.methods.linear import assimilate_linear  # noqa: E402
from lagda.assimilation.methods.variational import assimilate_var  # noqa: E402
from lagda.assimilation.model import flow_model  # noqa: E402
from lagda.io.formats import read_tracks  # noqa: E402

GPS_M = 10.0  # GPS-like position noise, m


def dataset(regime: str, role: str, data_dir: pathlib.Path, quick: bool) -> pathlib.Path:
    """Returns the path of the regime's climatology or test file, generating it if missing."""
    from simulate.qg import PRESETS, write_qg_dataset

    path = data_dir / f"{regime}_{role}{'_quick' if quick else ''}.nc"
    if not path.exists():
        seed, flows = (100, 1) if role == "climatology" else (200, 2)
        config = PRESETS["tiny" if quick else "qg"][regime](n_flows=flows, n_drifters=64 if quick else 256, seed=seed)
        start = time.perf_counter()
        write_qg_dataset(config, path)
        print(f"generated {path} in {time.perf_counter() - start:.0f} s", flush=True)
    return path


def observe(sub, n_drifter: int, interval: int, noise_m: float, length_m: float, seed: int):
    """Returns (positions, times, release) of the first n_drifter drifters, every interval-th fix, noisy."""
    rng = np.random.default_rng(seed)
    pos = sub.positions[:n_drifter, interval - 1 :: interval]
    pos = pos + rng.normal(size=pos.shape) * noise_m / length_m
    release = None if sub.release is None else sub.release[:n_drifter]
    return pos, sub.times[:n_drifter, interval - 1 :: interval], release


def relative(u, v, u_ref, v_ref) -> float:
    """Returns the relative L2 error of (u, v) against (u_ref, v_ref) (simulate.qg.projection.projection_limit)."""
    from simulate.qg.projection import projection_limit

    return projection_limit(u_ref, v_ref, u, v)


class TurbulenceCase:
    """The basis model (k_max, P) of a test file, with its climatology, and the truth of each test flow."""

    def __init__(self, test, climatology, k_max: float, degree: int):
        import xarray as xr

        from simulate.qg.projection import truth_in_basis

        self.tracks = read_tracks(test)
        self.settings = basis_model(self.tracks, "circular", k_max, degree, read_tracks(climatology))
        s = self.settings
        self.spatial = (s.k1[:: degree + 1], s.k2[:: degree + 1])
        self.degree, self.k_max = degree, k_max
        with xr.open_dataset(test) as ds:
            self.truth = truth_in_basis(ds, *self.spatial, degree)
            self.n, self.length_m = int(ds.attrs["qg_nx"]), float(ds.attrs["qg_L"])

    def run(self, f: int, method: str, n_drifter: int, interval: int, noise_m: float) -> dict:
        s = self.settings
        sub = self.tracks.for_field(f)
        pos, times, release = observe(sub, n_drifter, interval, noise_m, self.length_m, seed=1000 * f + n_drifter)
        model = dataclasses.replace(s, dt=float(np.nanmin(np.diff(sub.times[0]))))
        ou = method == "linear:ou"
        config = LinearConfig(members=2, noise_std=noise_m / self.length_m if noise_m else None,
                              representation="ou" if ou else "white", fd_lag=1 if ou else None,
                              fd_order=2 if ou else None)  # ou: the climatology's variance and time scale (the model's)
        start = time.perf_counter()
        est = assimilate_linear(pos, times, release, model, config, jax.random.key(f))
        seconds = time.perf_counter() - start
        mean = est.samples.T @ est.weights
        u, v = self.fields(mean)
        t = self.truth
        return {"error": relative(u, v, t["u"][f], t["v"][f]),
                "error_vs_projection": relative(u, v, t["u_fit"][f], t["v_fit"][f]),
                "limit": float(t["limit"][f]), "seconds": seconds, "mean": mean}

    def oracle(self, f: int, n_drifter: int, interval: int) -> dict:
        """The reference without representation error: the truth's fit in the basis, its velocity given exactly at the
        drifters' lag-1 difference points (every interval-th fix), inverted with the same prior (noise 1e-4 of it)."""
        from lagda.assimilation.methods.track_data import finite_differences
        from simulate.flow import velocity_basis

        s, sub = self.settings, self.tracks.for_field(f)
        points, t, _, _ = finite_differences(sub.positions[:n_drifter, interval - 1 :: interval],
                                             sub.times[:n_drifter, interval - 1 :: interval], None, 1)
        start = time.perf_counter()
        g = velocity_basis(points, t, s.k1, s.k2, s.omega, s.time).reshape(-1, 2 * len(s.k1))
        fit = self.truth["coef"][f]
        y = g @ np.concatenate([fit.real, fit.imag])
        prior_var = s.prior_var
        noise = 1e-4 * float(np.mean(y**2))
        x = np.linalg.solve(g.T @ g / noise + np.diag(1 / prior_var), g.T @ y / noise)
        u, v = self.fields(x[: len(s.k1)] + 1j * x[len(s.k1) :])
        t_ = self.truth
        return {"error": relative(u, v, t_["u"][f], t_["v"][f]),
                "error_vs_projection": relative(u, v, t_["u_fit"][f], t_["v_fit"][f]),
                "limit": float(t_["limit"][f]), "seconds": time.perf_counter() - start}

    def fields(self, coef):
        from simulate.qg.projection import basis_fields

        s = self.settings
        _, u, v = basis_fields(coef, *self.spatial, self.degree, s.time.start, s.time.length, self.truth["times"],
                               self.n)
        return u, v


class RossbyCase:
    """lagda's own model of the Rossby file: its modes and dispersion-relation frequencies."""

    def __init__(self, test, climatology):
        import xarray as xr

        from simulate.prior import spectrum
        from simulate.qg.dataset import project

        self.tracks = read_tracks(test)
        with xr.open_dataset(test) as ds, xr.open_dataset(climatology) as clim:
            self.k1, self.k2, self.omega = ds.k1.values, ds.k2.values, ds.omega.values
            self.n, self.length_m = int(ds.attrs["qg_nx"]), float(ds.attrs["qg_L"])
            scale_s = float(ds.attrs["lagda_mapping_time_scale_s"])
            self.times = (ds.truth_time.values - ds.truth_time.values[0]) / np.timedelta64(1, "s") / scale_s
            self.u, self.v = ds.u.values * scale_s / self.length_m, ds.v.values * scale_s / self.length_m
            psi = ds.psi.values * scale_s / self.length_m**2
            power = np.mean(np.abs(clim.true_coef_re.values + 1j * clim.true_coef_im.values) ** 2)
        shape = spectrum(self.k1, self.k2, 3.0, 1.0)
        self.scale = shape * np.sqrt(power / np.mean(shape**2))  # the climatology's RMS coefficient
        series = project(psi, self.k1, self.k2)  # (flow, time, mode)
        self.fit = np.mean(series * np.exp(-1j * self.omega * self.times[:, None])[None], axis=1)  # least squares
        self.u_fit, self.v_fit = self.fields(self.fit)

    def fields(self, coef):
        from simulate.flow import grid_fields

        shift = np.exp(1j * np.pi * (self.k1 + self.k2) / self.n)  # grid_fields' grid i / n -> cell centres
        with jax.enable_x64(True):
            _, u, v = grid_fields(np.atleast_2d(coef) * shift, self.k1, self.k2, self.omega, self.times, self.n)
        return (np.asarray(u).reshape(np.shape(coef)[:-1] + u.shape[1:]),
                np.asarray(v).reshape(np.shape(coef)[:-1] + v.shape[1:]))

    def run(self, f: int, method: str, n_drifter: int, interval: int, noise_m: float) -> dict:
        sub = self.tracks.for_field(f)
        pos, times, release = observe(sub, n_drifter, interval, noise_m, self.length_m, seed=1000 * f + n_drifter)
        model = flow_model(self.k1, self.k2, self.omega, self.scale, float(np.nanmin(np.diff(sub.times[0]))))
        config = (VarConfig if method == "var" else LinearConfig)(members=2,
                                                                 noise_std=noise_m / self.length_m if noise_m else None)
        fn = assimilate_var if method == "var" else assimilate_linear
        start = time.perf_counter()
        est = fn(pos, times, release, model, config, jax.random.key(f))
        seconds = time.perf_counter() - start
        u, v = self.fields(est.samples.T @ est.weights)
        return {"error": relative(u, v, self.u[f], self.v[f]),
                "error_vs_projection": relative(u, v, self.u_fit[f], self.v_fit[f]),
                "limit": relative(self.u_fit[f], self.v_fit[f], self.u[f], self.v[f]), "seconds": seconds}


DEFAULT_K_MAX, DEFAULT_DEGREE = 12, 3  # `lagda assimilate --basis circular`'s defaults


def defaults_resolved(test) -> bool:
    """Returns whether the test file's truth grid resolves the defaults' basis (k_max 12 needs more than 24^2)."""
    import xarray as xr

    from lagda.assimilation.methods.basis import spatial_modes
    from simulate.qg.projection import grid_holds

    with xr.open_dataset(test) as ds:
        return grid_holds(*spatial_modes("circular", DEFAULT_K_MAX), int(ds.attrs["qg_nx"]))


@functools.lru_cache(maxsize=None)
def defaults_truth(test, f: int) -> dict:
    """Returns flow f's truth_in_basis (the current included) in the defaults' basis, with "n" (grid) and the
    spatial modes "k1s", "k2s": computed once per flow for every run and the oracle."""
    import xarray as xr

    from lagda.assimilation.methods.basis import spatial_modes
    from simulate.qg.projection import truth_in_basis

    k1, k2 = spatial_modes("circular", DEFAULT_K_MAX)
    with xr.open_dataset(test) as ds:
        truth = truth_in_basis(ds, k1, k2, DEFAULT_DEGREE, flows=[f], current=True)
        return {**truth, "n": int(ds.attrs["qg_nx"]), "k1s": np.asarray(k1), "k2s": np.asarray(k2)}


def defaults_scores(coef, truth: dict, seconds: float) -> dict:
    """Returns {"error", "error_vs_projection", "limit", "seconds"} of coefficients `(mode,)` in the defaults' basis."""
    from simulate.qg.projection import basis_fields, projection_limit

    _, u, v = basis_fields(coef[None], truth["k1s"], truth["k2s"], DEFAULT_DEGREE, 0.0, float(truth["times"][-1]),
                           truth["times"], truth["n"], True)
    return {"error": projection_limit(truth["u"], truth["v"], u, v),
            "error_vs_projection": projection_limit(truth["u_fit"], truth["v_fit"], u, v),
            "limit": float(truth["limit"][0]), "seconds": seconds}


def default_run(test, climatology, data_dir: pathlib.Path, f: int, n_drifter: int, method: str = "linear",
                run_dir=None) -> dict:
    """Returns `defaults_scores` of `assimilate_file` with its defaults (linear, circular k_max 12, P 3) on the first
    n_drifter drifters of flow f (10 m noise, no release points), with `climatology` (a QG file) or without (None);
    another `method` with its trained `run_dir` (hybrid in the basis) likewise."""
    import xarray as xr

    from lagda.assimilation import AssimilateSettings, assimilate_file

    tracks = data_dir / f"defaults_flow{f}_L{n_drifter}.nc"
    if not tracks.exists():
        with xr.open_dataset(test) as ds:
            keep = np.flatnonzero(ds["field"].values == f)[:n_drifter]
            sub = ds.isel(trajectory=keep, flow=[f]).drop_vars(["x0", "y0"]).load()
        rng = np.random.default_rng(1000 * f + n_drifter)
        for name in ("x", "y"):
            sub[name].values[...] += rng.normal(size=sub[name].shape) * GPS_M
        sub["field"].values[...] = 0
        sub.attrs["qg_n_drifters"], sub.attrs["qg_n_flows"] = n_drifter, 1
        sub.to_netcdf(tracks)
    out = data_dir / f"defaults_flow{f}_L{n_drifter}_{'clim' if climatology else 'noclim'}_{method}_result.nc"
    summary = assimilate_file(tracks, out, AssimilateSettings(method, run_dir=run_dir, basis="circular",
                                                              climatology=climatology, n_grid=16), overwrite=True)
    with xr.open_dataset(out) as res:
        assert int(res["degree"].max()) == DEFAULT_DEGREE and res["k1"].max() == DEFAULT_K_MAX  # the defaults' basis
    # the scores `lagda assimilate` prints on a QG truth file (basis.qg_scores), as defaults_scores defines them
    # (no projection scores where the truth's grid is coarser than the basis: the tiny preset's 16^2, "projection_note")
    scores = summary.scores
    return {"error": scores["velocity_error_vs_truth"],
            "error_vs_projection": scores.get("velocity_error_vs_projection", float("nan")),
            "limit": scores.get("projection_limit", float("nan")), "seconds": summary.seconds,
            "coverage": scores["velocity_coverage_vs_truth"],
            "coverage_vs_projection": scores.get("velocity_coverage_vs_projection", float("nan")),
            "coverage_widened": scores.get("velocity_coverage_vs_truth_with_unresolved", float("nan"))}


@functools.lru_cache(maxsize=None)
def oracle_model(test, climatology, f: int):
    """Returns (flow f's tracks, the defaults' basis model with the climatology's prior): read once per flow."""
    sub = read_tracks(test).for_field(f)
    return sub, basis_model(sub, "circular", DEFAULT_K_MAX, DEFAULT_DEGREE, read_tracks(climatology))


def default_oracle(test, climatology, f: int, n_drifter: int, interval: int = 6) -> dict:
    """Returns `defaults_scores` of the reference without representation error in the defaults' basis (the current
    included): the truth's fit given exactly as velocities at the first n_drifter drifters' lag-1 difference points
    (every interval-th fix), inverted with the climatology's prior (noise 1e-4 of the data's mean square)."""
    from lagda.assimilation.methods.track_data import finite_differences
    from simulate.flow import velocity_basis

    sub, model = oracle_model(test, climatology, f)
    truth = defaults_truth(test, f)
    start = time.perf_counter()
    points, t, _, _ = finite_differences(sub.positions[:n_drifter, interval - 1 :: interval],
                                         sub.times[:n_drifter, interval - 1 :: interval], None, 1)
    g = velocity_basis(points, t, *model.modes).reshape(-1, 2 * model.n_modes)
    fit = truth["coef"][0]
    y = g @ np.concatenate([fit.real, fit.imag])
    noise = 1e-4 * float(np.mean(y**2))
    x = np.linalg.solve(g.T @ g / noise + np.diag(1 / model.prior_var), g.T @ y / noise)
    seconds = time.perf_counter() - start
    return defaults_scores(x[: model.n_modes] + 1j * x[model.n_modes :], truth, seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny preset (16^2, 4 days, 64 drifters)")
    parser.add_argument("--data", type=pathlib.Path, default=ROOT / "runs" / "qg_benchmark", help="generated QG files")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "results" / "qg_benchmark.csv")
    parser.add_argument("--figures", type=pathlib.Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--sections", default="rossby,kmax,oracle,sampling",
                        help="rossby, kmax (k_max and P against L), oracle, sampling, defaults")
    parser.add_argument("--k-for-drifters", default="4:5,16:8,64:12,256:16", help="sampling: k_max per L, L:k,...")
    parser.add_argument("--merge", type=pathlib.Path, nargs="+",
                        help="only summarise these CSVs into --out's .md and the figures")
    args = parser.parse_args(argv)
    if args.merge:
        ints = ("flow", "drifters", "interval_h")
        with_types = lambda r: {k: (v if k in ("regime", "basis", "method") else int(v) if k in ints
                                    else float(v))  # noqa: E731
                                for k, v in r.items()}
        rows = [with_types(r) for path in args.merge for r in csv.DictReader(open(path))]
        summary(rows, args.out.with_suffix(".md"))
        error_figure(rows, args.figures / "qg_error_vs_drifters.png")
        defaults_figure(rows, args.figures / "qg_defaults_vs_drifters.png")
        return 0
    args.data.mkdir(parents=True, exist_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    quick, sections = args.quick, args.sections.split(",")
    drifters = (4, 16, 64) if quick else (4, 16, 64, 256)
    rows = []

    def record(regime, case_name, f, method, n_drifter, interval, noise_m, out):
        row = {"regime": regime, "basis": case_name, "flow": f, "method": method, "drifters": n_drifter,
               "interval_h": interval * (3 if quick else 1), "noise_m": noise_m,
               **{k: round(v, 5) for k, v in out.items() if k != "mean"},
               "ratio": round(out["error"] / out["limit"], 4)}
        rows.append(row)
        print(", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in rows for k in r)),
                                    restval="nan")  # a point estimate (the oracle) has no bands
            writer.writeheader()
            writer.writerows(rows)

    if "rossby" in sections:
        case = RossbyCase(dataset("rossby", "test", args.data, quick),
                          dataset("rossby", "climatology", args.data, quick))
        for f in range(2):
            for n_drifter in drifters:
                for method in ("linear", "var") if n_drifter <= 16 else ("linear",):  # var: minutes per run beyond
                    for noise_m in (0.0, GPS_M):
                        record("rossby", "frequencies", f, method, n_drifter, 1, noise_m,
                               case.run(f, method, n_drifter, 1, noise_m))
    test, clim = dataset("turbulence", "test", args.data, quick), dataset("turbulence", "climatology", args.data, quick)
    cases = {}
    k_list = (3, 5) if quick else (5, 8, 12, 16)
    if "kmax" in sections:
        for k_max in k_list:
            cases[(k_max, 3)] = TurbulenceCase(test, clim, k_max, 3)
            for n_drifter in drifters:
                for method in ("linear:ou",) + (("linear",) if k_max == k_list[1] and n_drifter == 64 else ()):
                    out = cases[(k_max, 3)].run(0, method, n_drifter, 1, GPS_M)
                    record("turbulence", f"k{k_max}P3", 0, method, n_drifter, 1, GPS_M, out)
        for degree in (1, 6):
            case = TurbulenceCase(test, clim, k_list[-2], degree)
            out = case.run(0, "linear:ou", 64 if not quick else 16, 1, GPS_M)
            record("turbulence", f"k{k_list[-2]}P{degree}", 0, "linear:ou", 64 if not quick else 16, 1, GPS_M, out)
    if "oracle" in sections:  # no representation error: what the drifters' coverage allows
        for k_max in k_list[-2:]:
            case = cases.get((k_max, 3)) or cases.setdefault((k_max, 3), TurbulenceCase(test, clim, k_max, 3))
            for n_drifter in drifters:
                record("turbulence", f"k{k_max}P3", 0, "oracle", n_drifter, 6, 0.0,
                       case.oracle(0, n_drifter, 2 if quick else 6))
    if "defaults" in sections:
        resolved = defaults_resolved(test)
        for n_drifter in (16, 64, 256) if not quick else (16, 64):
            for f in range(2):
                for climatology in (None, clim) if resolved else (None,):
                    out = default_run(test, climatology, args.data, f, n_drifter)
                    record("turbulence", "defaults k12P3", f, "linear:clim" if climatology else "linear:noclim",
                           n_drifter, 1, GPS_M, out)
                if resolved:
                    record("turbulence", "defaults k12P3", f, "oracle", n_drifter, 6, 0.0,
                           default_oracle(test, clim, f, n_drifter))
        if not resolved:
            print(f"defaults: no climatology, oracle or projection limit rows: k_max {DEFAULT_K_MAX:g} is finer than "
                  "the truth's grid resolves (the tiny preset's 16^2)", flush=True)
    if "sampling" in sections:
        best = {int(a): float(b) for a, b in (pair.split(":") for pair in args.k_for_drifters.split(","))}
        if quick:
            best = {n: k_list[-1] for n in drifters}
        for n_drifter in drifters:
            key = (best[n_drifter], 3)
            case = cases.get(key) or cases.setdefault(key, TurbulenceCase(test, clim, *key))
            for interval in ((1, 2, 8) if quick else (1, 6, 24)):
                for noise_m in (0.0, GPS_M):
                    for f in range(2):
                        if f == 0 and interval == 1 and noise_m == GPS_M and "kmax" in sections:
                            continue  # measured above
                        out = case.run(f, "linear:ou", n_drifter, interval, noise_m)
                        record("turbulence", f"k{key[0]:g}P3", f, "linear:ou", n_drifter, interval, noise_m, out)
                        if n_drifter == 64 and interval == 1 and noise_m == GPS_M:
                            vorticity_figure(case, f, out["mean"],
                                             args.figures / f"qg_vorticity{'_quick' if quick else ''}.png")
    summary(rows, args.out.with_suffix(".md"))
    if [r for r in rows if r["basis"] != "defaults k12P3"]:
        error_figure(rows, args.figures / f"qg_error_vs_drifters{'_quick' if quick else ''}.png")
    defaults_figure(rows, args.figures / f"qg_defaults_vs_drifters{'_quick' if quick else ''}.png")
    return 0


def summary(rows, path) -> None:
    """Writes the markdown tables: mean over flows per (regime, basis, method, L, interval, noise)."""
    unique = {(r["regime"], r["basis"], r["method"], r["drifters"], r["interval_h"], r["noise_m"], r["flow"]): r
              for r in rows}
    groups = {}
    for r in unique.values():
        groups.setdefault((r["regime"], r["basis"], r["method"], r["drifters"], r["interval_h"], r["noise_m"]),
                          []).append(r)
    lines = ["| regime | basis | method | drifters | interval (h) | noise (m) | flows | error vs truth | vs projection "
             "| projection limit | ratio | 95% cover (truth / fit / truth, widened by r) | s/run |", "|" + "---|" * 13]
    for key, rs in groups.items():
        mean = lambda name: float(np.mean([float(r.get(name, "nan")) for r in rs]))  # noqa: E731
        cover = "-" if np.isnan(mean("coverage")) else (f"{mean('coverage'):.3f} / {mean('coverage_vs_projection'):.3f}"
                                                        f" / {mean('coverage_widened'):.3f}")
        lines.append("| " + " | ".join(str(k) for k in key)
                     + f" | {len(rs)} | {mean('error'):.3f} | {mean('error_vs_projection'):.3f} | "
                     f"{mean('limit'):.4f} | {mean('error') / mean('limit'):.2f} | {cover} | {mean('seconds'):.1f} |")
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def defaults_figure(rows, path) -> None:
    """The CLI defaults' error against L, without and with a climatology, per flow, with the projection limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["basis"] == "defaults k12P3"]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(8.5, 4))
    for method, label, style in (("linear:noclim", "no climatology (the default)", "o-"),
                                 ("linear:clim", "--climatology", "s--"),
                                 ("oracle", "oracle (resolved velocity given)", "x:"),
                                 ("window:noclim", "a 1000 km window of a 2000 km flow, no climatology, L per "
                                                   "1000 km box", "d-.")):
        window = method.startswith("window")  # its own flow (experiments.qg.window)
        for f in sorted({r["flow"] for r in rows}):
            rs = sorted((r for r in rows if r["method"] == method and r["flow"] == f), key=lambda r: r["drifters"])
            if not rs:
                continue
            ax.plot([r["drifters"] for r in rs], [r["error"] for r in rs], style, color="C2" if window else f"C{f}",
                    label=label if window else f"flow {f}: {label}")
    limits = [r["limit"] for r in rows if np.isfinite(r["limit"])]  # the window rows have none, nor a tiny grid
    if limits:
        limit = float(np.mean(limits))
        ax.axhline(limit, color="k", ls=":", label=f"projection limit k_max 12, P 3 ({limit:.2f})")
    ax.axhline(1.0, color="grey", lw=0.8, label="the prior mean (zero)")
    ax.set(xscale="log", xlabel="drifters L", ylabel="relative velocity error vs full truth", ylim=(0, 1.05),
           title="QG turbulence: lagda assimilate --basis circular (defaults)")
    drifters = sorted({r["drifters"] for r in rows})
    ax.set_xticks(drifters, [str(d) for d in drifters], minor=False)
    ax.minorticks_off()
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def error_figure(rows, path) -> None:
    """Error against the truth and the projection limit vs the number of drifters, per k_max
    (turbulence, hourly, GPS noise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turb = [r for r in rows if r["regime"] == "turbulence" and r["method"] == "linear:ou" and r["interval_h"] in (1, 3)
            and r["noise_m"] > 0 and r["flow"] == 0 and r["basis"].endswith("P3")]
    if not turb:  # e.g. --merge of the defaults section alone: keep the existing figure
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for i, basis in enumerate(sorted({r["basis"] for r in turb}, key=lambda b: float(b[1:-2]))):
        rs = sorted((r for r in turb if r["basis"] == basis), key=lambda r: r["drifters"])
        color = f"C{i}"
        axes[0].plot([r["drifters"] for r in rs], [r["error"] for r in rs], "o-", color=color, label=f"{basis}: error")
        axes[0].axhline(rs[0]["limit"], color=color, ls=":", label=f"{basis}: projection limit")
        oracle = sorted((r for r in rows if r["method"] == "oracle" and r["basis"] == basis),
                        key=lambda r: r["drifters"])
        if oracle:
            axes[0].plot([r["drifters"] for r in oracle], [r["error"] for r in oracle], "x--", color=color, alpha=0.6,
                         label=f"{basis}: oracle (resolved velocity given)")
    axes[0].axhline(0.6, color="k", lw=0.8, ls="--", label="0.60")
    axes[0].set(xscale="log", xlabel="drifters L", ylabel="relative velocity error vs full truth",
                title="QG turbulence (hourly, 10 m noise, flow 0)")
    axes[0].legend(fontsize=7)
    ross = [r for r in rows if r["regime"] == "rossby" and r["flow"] == 0]
    for method, noise, style in (("linear", 0.0, "o-"), ("linear", GPS_M, "s--"), ("var", 0.0, "^-"),
                                 ("var", GPS_M, "v--")):
        rs = sorted((r for r in ross if r["method"] == method and r["noise_m"] == noise), key=lambda r: r["drifters"])
        if rs:
            axes[1].plot([r["drifters"] for r in rs], [r["ratio"] for r in rs], style,
                         label=f"{method}, noise {noise:g} m")
    axes[1].axhline(1.1, color="k", lw=0.8, ls="--", label="1.1x")
    axes[1].set(xscale="log", yscale="log", xlabel="drifters L", ylabel="error / projection limit",
                title="Rossby waves (lagda's model, flow 0)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def vorticity_figure(case: TurbulenceCase, f: int, mean, path) -> None:
    """True, projected and recovered relative vorticity at mid-window (model units)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simulate.qg.projection import basis_fields

    s = case.settings
    k2_abs = (2 * np.pi) ** 2 * (case.spatial[0].astype(float) ** 2 + case.spatial[1].astype(float) ** 2)
    lap = -np.repeat(k2_abs, case.degree + 1)
    middle = len(case.truth["times"]) // 2
    times = case.truth["times"][[middle]]
    zeta = lambda c: basis_fields(c * lap, *case.spatial, case.degree, s.time.start, s.time.length, times,
                                  case.n)[0][0]  # noqa: E731
    true = spectral_vorticity(case.truth["u"][f, middle], case.truth["v"][f, middle])
    panels = [("truth", true), (f"truth's fit (k_max {case.k_max:g}, P {case.degree})", zeta(case.truth["coef"][f])),
              ("recovered, 64 drifters", zeta(mean))]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    lim = float(np.max(np.abs(true)))
    for ax, (title, field) in zip(axes, panels):
        ax.imshow(field, origin="lower", cmap="RdBu_r", vmin=-lim, vmax=lim, extent=(0, 1, 0, 1))
        ax.set_title(title, fontsize=9)
    sub = case.tracks.for_field(f)
    axes[2].plot(np.mod(sub.positions[:64, :, 0], 1).T, np.mod(sub.positions[:64, :, 1], 1).T, ",", color="k",
                 alpha=0.3)
    fig.suptitle(f"QG turbulence, flow {f}: upper-layer relative vorticity at mid-window")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def spectral_vorticity(u, v):
    """Returns dv/dx - du/dy `(ny, nx)` of gridded velocities on the unit square, spectrally."""
    n = u.shape[-1]
    k = 2j * np.pi * np.fft.fftfreq(n, 1.0 / n)
    return np.real(np.fft.ifft2(k[None, :] * np.fft.fft2(v) - k[:, None] * np.fft.fft2(u)))


if __name__ == "__main__":
    raise SystemExit(main())
