"""Writes the summary table at the top of each results page (docs/results/*.md) from the tracked results/*.csv.

Each page's summary sits between two marker comments right below its title; everything else on the page is
left as it is. `--check` writes nothing and exits 1 naming the pages whose summary differs from the CSVs
(tests/test_results_pages.py runs the same comparison).

Usage, from the checkout's root:

    python -m experiments.common.results_pages            # rewrite the summaries
    python -m experiments.common.results_pages --check    # exit 1 if a page and its CSVs disagree
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from typing import Callable

import pandas as pd

from experiments.common.paths import ROOT

BEGIN = ("<!-- summary: begin (written by `python -m experiments.common.results_pages` from results/*.csv; "
         "do not edit) -->")
END = "<!-- summary: end -->"


def _number(value) -> str:
    """Three significant digits; an empty cell for a value not measured (nan)."""
    return "" if pd.isna(value) else f"{value:.3g}"


def _markdown(frame: pd.DataFrame) -> str:
    """Returns `frame` (index included) as a Markdown table, numbers to three significant digits."""
    frame = frame.reset_index()
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(v if isinstance(v, str) else _number(v) for v in row) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


@dataclasses.dataclass(frozen=True)
class Summary:
    """One table of a page: its caption, the CSV it reads, and how the table is made from the CSV's rows."""

    caption: str
    csv: str  # path relative to the checkout's root
    table: Callable[[pd.DataFrame], pd.DataFrame]

    def render(self, root: pathlib.Path = ROOT) -> str:
        return f"{self.caption} (`{self.csv}`):\n\n{_markdown(self.table(pd.read_csv(root / self.csv)))}"


def _assimilation(rows: pd.DataFrame, values: str = "velocity_rel_l2_median") -> pd.DataFrame:
    methods = list(dict.fromkeys(rows["method"]))
    table = rows.pivot(index="regime", columns="method", values=values)
    return table[methods].reindex(list(dict.fromkeys(rows["regime"])))


def _assimilation_seconds(rows: pd.DataFrame) -> pd.DataFrame:
    return _assimilation(rows, "seconds_per_track")


def _qg_defaults(rows: pd.DataFrame) -> pd.DataFrame:
    table = rows.groupby(["drifters", "method"], sort=False)["error"].mean().unstack("method")
    table["projection limit"] = rows.groupby("drifters", sort=False)["limit"].mean()
    return table


def _against_posterior_mean(methods: tuple[str, ...], seconds: bool = True) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A table maker: per regime, each of `methods` as "error (ratio to the posterior mean, 95% coverage[, seconds
    per track])", with the number of flows behind the regime's posterior mean."""

    def table(rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows[rows["method"].isin(methods)]
        cells = [f"{e:#.3g} ({r:.2f}x, {c:.2f}" + (f", {s:.2g} s)" if seconds else ")") for e, r, c, s in
                 zip(rows["velocity_rel_l2_median"], rows["vs_posterior_mean"], rows["velocity_calibration"],
                     rows["seconds_per_track"])]
        regimes = list(dict.fromkeys(rows["regime"]))
        table = rows.assign(cell=cells).pivot(index="regime", columns="method", values="cell")
        table = table[[m for m in methods if m in table.columns]].reindex(regimes)
        flows = rows[rows["method"] == "posterior-mean:var"].set_index("regime")["fields"]
        table.insert(0, "flows", flows.reindex(regimes).map(str))
        return table

    return table


def _coverage(methods: tuple[str, ...]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A table maker: per regime, each of `methods`' 95% band coverage as "mean +- standard error over the flows
    (flows)", marked "below 0.95" or "above 0.95" where 0.95 is more than 3 standard errors away."""

    def cell(mean: float, se: float, flows: int) -> str:
        if pd.isna(se):
            return f"{mean:.3f} ({flows} flow{'s' if flows != 1 else ''})"
        side = "" if abs(mean - 0.95) <= 3 * se else (" below 0.95" if mean < 0.95 else " above 0.95")
        return f"{mean:.3f} +- {se:.3f} ({flows} flows){side}"

    def table(rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows[rows["method"].isin(methods)]
        cells = [cell(m, s, f) for m, s, f in zip(rows["velocity_calibration"], rows["velocity_calibration_se"],
                                                   rows["fields"])]
        table = rows.assign(cell=cells).pivot(index="regime", columns="method", values="cell")
        return table[[m for m in methods if m in table.columns]].reindex(list(dict.fromkeys(rows["regime"])))

    return table


def _fig14(rows: pd.DataFrame) -> pd.DataFrame:
    last = rows[rows["epoch"] == rows["epoch"].max()]
    columns = {f"test/{d}/R@{k}": f"{d.replace('_to_', ' to ')} R@{k}" for d in ("traj_to_coef", "coef_to_traj")
               for k in (1, 5, 10)}
    return last.set_index("test_library")[list(columns)].rename(columns=columns).rename_axis("test library")


def _fig14_epochs(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows[rows["test_library"].astype(str) == "4096"]
    columns = {f"{s}/{d}/R@{k}": f"{s} {d.replace('_to_', ' to ')} R@{k}" for s in ("test", "train")
               for d in ("traj_to_coef", "coef_to_traj") for k in ((1, 5) if s == "test" else (5,))}
    return rows.set_index("epoch")[list(columns)].rename(columns=columns)


def _ceiling(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {f"{d}/R@{k}": f"{d.replace('_to_', ' to ')} R@{k}" for d in ("coef_to_traj", "traj_to_coef")
               for k in (1, 5, 10)}
    columns.update({"coef_to_traj/margin_min": "margin coef to traj", "traj_to_coef/margin_min": "margin traj to coef"})
    ranking = rows["method"].map({"likelihood": "likelihood", "posterior-mean:cpu-preset": "posterior mean, cosine "
                                  "(`cpu` preset's ridge)", "posterior-mean:estimated-noise": "posterior mean, cosine "
                                  "(noise estimated)"})
    rows = rows.assign(ranking=ranking).sort_values(["ranking", "stride"], kind="stable")
    return rows.set_index(["ranking", "stride"])[list(columns)].rename(columns=columns)


def _gaussian_theory(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.astype({"n_e": str}).assign(quantity=rows["quantity"].str.replace("|", "\\|", regex=False))
    return rows.set_index(["problem", "loss", "n_e", "quantity"])[["theory", "rel_err", "rel_gap"]]


def _learned_cpu(rows: pd.DataFrame) -> pd.DataFrame:
    run = [m if pd.isna(e) else f"{m} epoch {int(e)}" for m, e in zip(rows["method"], rows["epoch"])]
    columns = {"train_seconds": "training s", "wall_seconds": "wall s"}
    columns.update({f"{d}/R@{k}": f"{d.replace('_to_', ' to ')} R@{k}" for d in ("coef_to_traj", "traj_to_coef")
                    for k in (1, 5)})
    return rows.assign(run=run).set_index("run")[list(columns)].rename(columns=columns)


def _objectives(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {"traj_to_coef/R@1_mean": "traj to coef R@1", "traj_to_coef/R@5_mean": "traj to coef R@5",
               "embed/dense_mean": "embed dense", "hybrid/dense_mean": "hybrid dense",
               "embed/sparse_mean": "embed sparse", "hybrid/sparse_mean": "hybrid sparse"}
    return rows.set_index("objective")[list(columns)].rename(columns=columns)


def _dense(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {"cell_days": "cell-days", "error": "map error", "binned_error": "binned means error",
               "rms_error_m_s": "map RMS m/s", "binned_rms_error_m_s": "binned RMS m/s", "coverage": "coverage (95%)",
               "median_u_std_m_s": "median u_std m/s", "wall_s": "wall s", "local_gp": "local GP tiles"}
    rows = rows.astype({"cell_days": str, "wall_s": str}).fillna({"local_gp": ""})
    return (rows.set_index(["tile_method", "resolution_deg"])[list(columns)].rename(columns=columns)
            .rename_axis(["tile method", "resolution (deg)"]))


def _gdp_spikes(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {"planted": "planted", "cleaning_off_track_dropped": "dropped off their track",
               "velocity_outliers_dropped": "velocities left out", "cv_ratio": "CV ratio",
               "diff_to_clean": "difference to the clean answer", "error_vs_truth": "error against the truth"}
    rows = rows.assign(positions=rows["low_pass"].map({1: "low-passed (default)", 0: "as they are"}))
    rows = rows.astype({"planted": str, "cleaning_off_track_dropped": str, "velocity_outliers_dropped": str})
    return (rows.set_index(["positions", "fixes_displaced"])[list(columns)].rename(columns=columns)
            .rename_axis(["positions", "fixes displaced"]))


def _real_drifters(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows[~rows["band"].str.startswith("all, fold")]
    cell = rows.assign(cell=[f"{e:.2f} [{lo:.2f}, {hi:.2f}]" if pd.notna(e) else "" for e, lo, hi in
                             zip(rows["error"], rows["error_lo"], rows["error_hi"])])
    table = cell.pivot(index=["period", "band"], columns="method", values="cell")
    methods = [m for m in dict.fromkeys(rows["method"]) if m != "zero"]
    table = table[methods]
    own = rows[rows["method"] == "lagda map"].set_index(["period", "band"])
    table.insert(0, "share", own["share"].map(lambda x: f"{x:.0%}"))
    table["map 95% coverage"] = own["coverage_95"].map(lambda x: "" if pd.isna(x) else f"{x:.3f}")
    order = [(p, b) for p in dict.fromkeys(rows["period"]) for b in dict.fromkeys(rows["band"])]
    return table.reindex([o for o in order if o in table.index])


def _sparse_basin(rows: pd.DataFrame) -> pd.DataFrame:
    columns = ["share", "map", "coverage_95", "binned_1deg_11d", "daily_binned_own_cells", "map_on_those_cells"]
    columns += ["background_alone"] if "background_alone" in rows else []
    return rows.set_index(["drifters", "background", "band"])[columns]

def _labelled(rows: pd.DataFrame, column: str, labels: dict[str, str]) -> pd.DataFrame:
    """Returns the rows whose `column` contains a key of `labels`, in the keys' order, with `column` replaced by that
    key's label; rows holding no key are left out.

    Raises
    ------
    ValueError
        if a key is in no row's `column` (a row renamed or dropped from the CSV).
    """
    picked = []
    for text, label in labels.items():
        match = rows[rows[column].str.contains(text, regex=False)]
        if match.empty:
            raise ValueError(f"no row of the CSV has {text!r} in its {column}")
        picked.append(match.assign(**{column: label}))
    return pd.concat(picked)


_MAP_COLUMNS = {"error": "error at the fixes", "cells": "cell-days", "coverage": "coverage (95%)",
                "error_all": "every cell: error", "coverage_all": "every cell: coverage", "seam_ratio": "seam ratio",
                "wall_s": "wall s", "peak_rss_gb": "peak GB"}


def _basin_year_maps(rows: pd.DataFrame) -> pd.DataFrame:
    rows = _labelled(rows, "config", {"the objective map": "objective (the default)",
                                      "refined at a parabola's vertex": "`--tile-method basis`"}).astype({"cells": str})
    return rows.set_index("config")[list(_MAP_COLUMNS)].rename(columns=_MAP_COLUMNS).rename_axis("lagda map")


def _basin_year_baselines(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {"error": "error on its cells", "cells": "cell-days", "map_error_same_cells": "basis map, same cells",
               "coverage": "coverage (95%)", "wall_s": "wall s"}
    rows = rows[rows["method"] != "lagda map"].astype({"cells": str})
    return rows.set_index(["method", "config"])[list(columns)].rename(columns=columns)


def _fix_cadence(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows[rows["config"].str.contains("fixes (those at", regex=False)]
    rows = rows.assign(config=rows["config"].str.removeprefix("2 workers, ")).astype({"cells": str})
    return rows.set_index("config")[list(_MAP_COLUMNS)].rename(columns=_MAP_COLUMNS).rename_axis("fixes mapped")


def _band_widths(rows: pd.DataFrame) -> pd.DataFrame:
    rows = _labelled(rows, "store", {"basin year, lagda map defaults": "full year", "basin year quick": "`--quick`",
                                     "lattice of its own scales": "full year, trial 1",
                                     "plus half its noise variance": "full year, trial 2"})
    columns = {"coverage_95": "95% covers", "coverage_68": "68% covers", "median_abs_z": "median abs z",
               "rms_error_m_s": "RMS error m/s", "rms_std_m_s": "RMS std m/s"}
    return rows.set_index(["store", "cells"])[list(columns)].rename(columns=columns).rename_axis(["map", "cells"])


def _archive_decade(rows: pd.DataFrame) -> pd.DataFrame:
    columns = {"every_fix_s": "every fix read, s", "select_fixes_s": "as lagda map reads, s", "speedup": "ratio"}
    return rows.set_index("archive")[list(columns)].rename(columns=columns)


def _lone_eddy(rows: pd.DataFrame) -> pd.DataFrame:
    """Per command and band of distance from a fix: the error and the 95% band coverage, mean over the seeds."""
    cells = rows.groupby(["command", "band_km"], sort=False)[["error", "coverage"]].mean()
    text = [f"{e:.2f} ({c:.2f})" for e, c in zip(cells["error"], cells["coverage"])]
    table = cells.assign(cell=text)["cell"].unstack("band_km")
    return table.rename_axis(index="command", columns=None)


def _inertial(rows: pd.DataFrame) -> pd.DataFrame:
    """Per motion the drifters also feel and command: the error within 25 km of a fix, mean over the seeds, with the
    low-pass (the default) and without it."""
    near = rows[rows["band_km"] == rows["band_km"].iloc[0]]
    table = near.groupby(["case", "command", "low_pass"], sort=False)["error"].mean().unstack("low_pass")
    return table.rename(columns={True: "default (low-pass)", False: "--no-low-pass"}).rename_axis(columns=None)


PAGES = {
    "docs/results/away-from-drifters.md": [
        Summary("Relative L2 error of the velocity against the truth (0 perfect) and, in brackets, "
                "the coverage of the 95% bands, on each result's own cells by distance from the nearest fix within "
                "12 hours (km), mean over seeds 1-4, every default",
                "results/lone_eddy.csv", _lone_eddy),
    ],
    "docs/results/inertial-and-tides.md": [
        Summary("Relative error against the flow varying over days (the eddy and the current) within 25 km of a fix, "
                "mean over seeds 1-2, with the default low-pass and with `--no-low-pass`",
                "results/inertial.csv", _inertial),
    ],
    "docs/results/sparse-maps.md": [
        Summary("`lagda map` with every default on real GDP drifters (the Mediterranean loopers), five folds held out "
                "by drifter, scored at the held-out drifters' 12-hour velocities by distance to the nearest fix the "
                "map used within 12 hours: relative error (0 perfect, 1 a map of zero, which errs 1 in every band) "
                "with its 90% bootstrap interval over drifters, and the map's 95% band coverage",
                "results/real_drifters.csv", _real_drifters),
        Summary("`lagda map` with every default on the basin-year archive thinned to N of its 583 trajectory ids "
                "(583: the whole archive), every daily cell "
                "scored against the truth by its distance to the day's nearest fix the map used: relative error "
                "of the map, coverage of its 95% bands, a 1-degree 11-day binned mean (zero where empty), and "
                "on the cells the daily binned mean at the map's resolution fills, that mean's error and the map's",
                "results/sparse_basin.csv", _sparse_basin),
    ],
    "docs/results/assimilation.md": [
        Summary("Median relative velocity error over the held-out flows, per observation regime and method "
                "(K = 49; `truth-map` is 4D-Var started from the truth, which no method can use)",
                "results/assimilation_benchmark.csv", _assimilation),
    ],
    "docs/results/assimilation-sampler.md": [
        Summary("K = 9, 16 held-out flows per regime: 95% band coverage of the true grid velocities, mean +- "
                "standard error over the flows, of the sampler's posterior mean (`posterior-mean:var`, `sample`'s "
                "defaults) and of `hybrid` with the noise estimated",
                "results/assimilation_benchmark_posterior16_quick.csv",
                _coverage(("posterior-mean:var", "hybrid@estimated"))),
        Summary("K = 49, the flows whose posterior mean is measured: the same",
                "results/assimilation_benchmark_posterior_k49.csv",
                _coverage(("posterior-mean:var", "hybrid@estimated"))),
    ],
    "docs/results/assimilation-speed.md": [
        Summary("Seconds per track of each method in the benchmark of K = 49 flows (per drifter: a 4-drifter field "
                "counts 4 tracks) on one core of a lent GPU machine's 16, except "
                "the `sparse100` rows of `truth-map`, `var`, the searches and `hybrid`, on the 2-core CPU",
                "results/assimilation_benchmark.csv", _assimilation_seconds),
    ],
    "docs/results/assimilation-posterior.md": [
        Summary("K = 9, 16 held-out flows per regime: median relative velocity error (ratio to the posterior mean's, "
                "95% band coverage, seconds per track on the 2-core CPU) against the posterior mean given the true "
                "noise (`posterior-mean:var`); `hybrid@estimated` estimates the noise as `lagda assimilate` does",
                "results/assimilation_benchmark_posterior16_quick.csv",
                _against_posterior_mean(("truth-map", "posterior-mean:var", "linear", "var", "enkf",
                                         "hybrid@estimated"))),
        Summary("K = 49, the flows whose posterior mean is measured: median relative velocity error (ratio to the "
                "posterior mean's, mean 95% band coverage over the flows)",
                "results/assimilation_benchmark_posterior_k49.csv",
                _against_posterior_mean(("posterior-mean:var", "hybrid@estimated", "linear", "var", "embed",
                                         "truth-map"), seconds=False)),
    ],
    "docs/results/assimilation-noise.md": [
        Summary("K = 9, 16 held-out flows per regime: median relative velocity error (ratio to the posterior mean "
                "given the true noise, 95% band coverage, seconds per track) of the posterior mean given the true "
                "noise, of the posterior mean and of `hybrid` at the noise the evidence estimates",
                "results/assimilation_benchmark_posterior16_quick.csv",
                _against_posterior_mean(("posterior-mean:var", "posterior-mean:var@estimated",
                                         "hybrid@estimated"))),
    ],
    "docs/results/ocean.md": [
        Summary("Relative velocity error on QG turbulence with every default (`--basis circular`), mean over the "
                "flows, per number of drifters: without (`noclim`) and with (`clim`) a climatology, the oracle, "
                "and the error of the truth's projection on the basis",
                "results/qg_defaults.csv", _qg_defaults),
    ],
    "docs/results/dense-deployment.md": [
        Summary("`lagda map` on the GLAD-like deployment with every default (tile method objective) and with "
                "`--tile-method basis`, scored at the cells with a fix each day, against daily binned means of the "
                "finite-difference velocities on the same cells",
                "results/dense_cluster.csv", _dense),
    ],
    "docs/results/basin-year.md": [
        Summary("`lagda map` on the basin-year archive (583 trajectories, hourly fixes, 2 workers, `--no-land-mask`), "
                "scored against the truth on the daily cell-days holding a fix and on every cell: the default "
                "objective map and the tile basis",
                "results/basin_year.csv", _basin_year_maps),
        Summary("The standard answers on the same archive, each scored on the cell-days where it has a value, beside "
                "a tile-basis map (`--tile-method basis`) on those same cells; wall seconds on the 2-core machine",
                "results/basin_year.csv", _basin_year_baselines),
    ],
    "docs/results/fix-cadence.md": [
        Summary("`lagda map --tile-method basis` (2 workers) on the basin-year archive's fixes at 00, 06, 12 and 18 "
                "UTC, or at 00 UTC only, scored as the hourly maps are: at the cell-days holding one of those fixes "
                "and on every cell",
                "results/basin_year.csv", _fix_cadence),
    ],
    "docs/results/band-widths.md": [
        Summary("How wide the tile basis's bands are on the basin year, at the cells with a fix and on every cell: "
                "the coverage of the 95% and 68% bands, the median of |error| / std (0.674 for a calibrated "
                "Gaussian band), the RMS error and the RMS std, u and v together",
                "results/band_widths.csv", _band_widths),
    ],
    "docs/results/long-archive.md": [
        Summary("One year's fixes of the basin-year archive repeated over ten years (15,162,460 fixes), selected by "
                "reading every fix and as `lagda map` reads them, in seconds",
                "results/archive_decade.csv", _archive_decade),
    ],
    "docs/results/real-drifters.md": [
        Summary("`lagda assimilate --tracks FILE` on the GDP-like file with a fraction of its fixes displaced 3-8 km "
                "(under the spike rule's speed), with its positions low-passed (the default) and as they are "
                "(`--no-low-pass`): relative difference to the clean file's answer and error against the QG truth",
                "results/gdp_spikes.csv", _gdp_spikes),
    ],
    "docs/results/training.md": [
        Summary("Test retrieval of the paper preset after its last epoch (Figure 14), per test library: the "
                "per-epoch evaluation's 4,096 fields, the whole test set, and 252 libraries of 128 fields",
                "results/fig14_paper.csv", _fig14),
        Summary("The `learned` preset (misfit head, 2,048 coefficient negatives a step) on the same data after its "
                "last epoch (10, on the 2-core CPU), per test library as above",
                "results/fig14_learned_paper.csv", _fig14),
    ],
    "docs/results/training-paper.md": [
        Summary("The paper preset on the paper's data, one lent H200: retrieval against libraries of 4,096 test and "
                "4,096 training fields after each epoch",
                "results/fig14_paper.csv", _fig14_epochs),
    ],
    "docs/results/training-learned.md": [
        Summary("The `learned` preset on the 2-core CPU (`small` data, 16,384 training fields): test retrieval against "
                "the 4,096-field library after each epoch, with the cumulative training and wall seconds, and the "
                "least-squares fit of the same design without learning",
                "results/learned_cpu.csv", _learned_cpu),
    ],
    "docs/results/training-ceiling.md": [
        Summary("Retrieval with the flow model known, against the 4,096-field test library of the `small` data: the "
                "likelihood's ranking and the posterior mean's cosine, by the stride of the finite differences; "
                "margin: the smallest, over the queries, of the best wrong candidate's misfit over the true one's",
                "results/retrieval_ceiling.csv", _ceiling),
        Summary("The same against the whole 32,268-field test set of the paper's data, at stride 8",
                "results/retrieval_ceiling_paper.csv", _ceiling),
    ],
    "docs/results/training-objectives.md": [
        Summary("The training objectives compared: test retrieval and the downstream relative velocity error of "
                "`embed` and `hybrid` on dense and sparse tracks, mean over seeds",
                "results/objectives_summary.csv", _objectives),
    ],
    "docs/results/training-theory.md": [
        Summary("Linear encoders trained with lagda's losses on Gaussian data against the paper's section-5 "
                "minimisers: relative error of the learned quantity, and its relative distance to the competing "
                "theory's (rel_gap)",
                "results/gaussian_theory.csv", _gaussian_theory),
    ],
}


def summary_block(page: str, root: pathlib.Path = ROOT) -> str:
    """Returns the marked summary block of `page` (a key of PAGES) made from its CSV files."""
    return "\n".join([BEGIN, "", "\n\n".join(s.render(root) for s in PAGES[page]), "", END])


def with_summary(text: str, block: str) -> str:
    """Returns page `text` with its marked block replaced by `block`, or `block` inserted below the title."""
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        if END not in rest:
            raise ValueError(f"a summary begins ({BEGIN}) but does not end ({END})")
        return head + block + rest.split(END, 1)[1]
    title, _, body = text.partition("\n")
    if not title.startswith("# "):
        raise ValueError(f"the page does not start with a '# ' title: {title[:60]!r}")
    return f"{title}\n\n{block}\n{body}"


def stale_pages(root: pathlib.Path = ROOT) -> list[str]:
    """Returns the pages whose marked summary differs from what their CSV files give."""
    return [page for page in PAGES
            if (root / page).read_text() != with_summary((root / page).read_text(), summary_block(page, root))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages()
        for page in stale:
            print(f"error: {page}: its summary differs from its CSV files "
                  "(run python -m experiments.common.results_pages)", file=sys.stderr)
        return 1 if stale else 0
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()
        new = with_summary(text, summary_block(page))
        if new != text:
            path.write_text(new)
            print(f"wrote the summary of {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
