"""`lagda demo`: a drifter file mapped and checked as an oceanographer would, and the twin experiment behind it.

The default (`run_demo`) maps the shipped drifter example (`lagda.examples.path("gdp_like")`: 8 drifters with
hourly longitude/latitude fixes over March 2025 near 40 W, 34 N) as `lagda map --withhold 0.25` does
(lagda.mapping.run.map_archive with every default setting): daily maps of the velocity and its std in m/s on
0.25-degree cells, a quarter of the drifters left out whole. The map is then judged the way a user can judge a
map of real drifters: against the daily velocities of the drifters it was not made from (lagda.mapping.check),
by distance to the nearest drifter it was made from, beside a map of zero and a binned mean of the mapped drifters
on the same velocities. The file's drifters move in a two-layer quasi-geostrophic ocean spun up over five model
years; that turbulent flow is not regenerated here to score against: rounding that differs between machines would
give another ocean than the one these drifters saw, and the spin-up alone would cost more than the whole demo.

`run_twin` (`lagda demo --twin`) is the model-unit twin experiment: the shipped example tracks (one drifter in
each of 8 flows of lagda's own model, whose truth is known) assimilated with several methods, each scored against
the truth. `full=True` (`--full`) simulates, trains and evaluates from scratch first.
"""

from __future__ import annotations

import json
import pathlib
import time

DEFAULT_METHODS = ("linear", "embed", "hybrid")
DEMO_WITHHOLD = 0.25  # the share of the drifters the demo's map leaves out to check it (2 of the example's 8)
TWIN_COLUMNS = (("velocity_rel_l2", "velocity error on the grid (lower is better)"),
                ("track_velocity_rel_l2", "velocity error along the tracks"),
                ("forecast_rms", "forecast position error (model units)"),
                ("velocity_calibration", "95% band holds (0.95 when right)"),
                ("seconds_per_track", "seconds per track"))


# ---------------------------------------------------------------- the map of the drifter example


def run_demo(out_dir="lagda-demo", *, tracks=None, withhold: float = DEMO_WITHHOLD, workers: int | None = None,
             progress: bool = True, log=print) -> dict:
    """Returns what the demo made after mapping a drifter file, checking the map against its withheld drifters,
    drawing it and printing the scores.

    Writes `<out_dir>/map.nc` (the `lagda map` store: u, v, u_std, v_std in m/s on time, lat, lon) and
    `<out_dir>/map.png` (the middle day of the map: speed and arrows, the std beside it, the mapped and withheld
    drifters' tracks, the land); prints the map's notes (but those of its check) and the check's table
    (`score_table`).

    Parameters
    ----------
    out_dir
        the output folder (made if missing; the demo's files in it are replaced).
    tracks
        a longitude/latitude drifter file or archive (anything `lagda map` reads); default the shipped
        example `lagda.examples.path("gdp_like")`.
    withhold
        the share of the drifters left out of the map and checked against it (whole drifters, chosen by
        their ids: lagda.mapping.check.withheld); in (0, 1).
    workers
        Dask worker processes of the map (default: the CPUs).
    progress
        show the map's progress bars (stderr).
    log
        called with each line the demo prints.

    Returns
    -------
    dict
        {"map": the store's path, "figure": the PNG's path, "day": the day drawn ("YYYY-MM-DD"), "check": the
        check's scores (lagda.mapping.check.check_map's, keys without the store attributes' "check_" prefix),
        "withheld": the withheld drifters' ids, "seconds": the wall time}.

    Raises
    ------
    ValueError
        `withhold` outside (0, 1), or a file the map cannot use (as `lagda map` says).
    FileNotFoundError
        no such `tracks`.
    """
    from lagda import examples
    from lagda.mapping import MapSettings, map_archive

    if not 0.0 < withhold < 1.0:
        raise ValueError(f"withhold {withhold:g}: the demo checks its map against withheld drifters, in (0, 1)")
    start = time.perf_counter()
    out_dir = pathlib.Path(out_dir)
    archive = pathlib.Path(tracks) if tracks is not None else examples.path("gdp_like")
    out_dir.mkdir(parents=True, exist_ok=True)
    store, figure = out_dir / "map.nc", out_dir / "map.png"
    log(f"lagda demo: mapping {archive.name} with every default of lagda map, {withhold:.0%} of its drifters "
        "withheld to check the map")
    said = []  # the map's notes, said once it is made: the check's own lines are left to the table below
    summary = map_archive(archive, store, MapSettings(withhold=withhold), workers=workers, overwrite=True,
                          progress=progress, say=said.append)
    checked = {f"note: {line}" for line in str(summary["check"]["check"]).split("\n")}
    for line in said:
        if line not in checked:
            log(f"  {line}")
    day = draw_demo_map(archive, store, figure)
    check = {key.removeprefix("check_"): value for key, value in summary["check"].items() if key.startswith("check_")}
    held = json.loads(check.pop("withheld_ids"))
    log(f"wrote {store} (daily maps of the velocity and its std, m/s) and {figure} (the map of {day})")
    log(score_table(check, len(held)))
    seconds = time.perf_counter() - start
    log(f"lagda demo: {seconds:.0f} s. The twin experiment in model units, scored against a known truth: "
        "lagda demo --twin")
    return {"map": store, "figure": figure, "day": day, "check": check, "withheld": held, "seconds": seconds}


def draw_demo_map(archive, store, figure) -> str:
    """Returns the day drawn ("YYYY-MM-DD") after drawing the middle day of a map store, with its mapped and
    withheld drifters' tracks (lagda.mapping.plot.drifters_of), to `figure` (lagda.mapping.plot.plot_map)."""
    from lagda.mapping.plot import drifters_of, plot_map
    from lagda.mapping.store import open_map

    with open_map(store) as maps:
        middle = str(maps["time"].values[maps.sizes["time"] // 2])[:10]
    return plot_map(store, figure, middle, drifters_of(archive, store))[1]


def score_table(check: dict, withheld: int) -> str:
    """Returns the demo's words and table of a map's check against its withheld drifters.

    Parameters
    ----------
    check
        lagda.mapping.check.check_map's scores with the distance bands ("error", "coverage_95",
        "{band}_error", ...).
    withheld
        how many drifters were withheld.

    Examples
    --------
    >>> bands = {f"{b}_{k}": v for b in ("near", "middle", "far")
    ...          for k, v in (("velocities", 2), ("share", 1 / 3), ("error", 0.5), ("binned_error", 0.8),
    ...                       ("coverage_95", 1.0))}
    >>> print(score_table({"drifters": 1, "velocities": 6, "speed_rms_m_s": 0.1, "error": 0.5,
    ...                    "rms_m_s": 0.05, "coverage_95": 1.0, "z_rms": 0.9, **bands}, 1).splitlines()[5])
    | 30-100 km | 2 (33%) | 50% | 80% | 100% | 100% |
    """
    from lagda.mapping.check import BAND_LABELS, BAND_NAMES, BINNED_DAYS, BINNED_DEG
    from lagda.report import counted, format_table

    if not check.get("velocities"):
        return f"none of the {counted(withheld, 'withheld drifter')} has a daily velocity on the map: nothing to check"
    words = BAND_LABELS
    rows = {}
    for band, where in zip(BAND_NAMES, words):
        if check.get(f"{band}_velocities"):
            rows[where] = {"n": f"{check[f'{band}_velocities']} ({check[f'{band}_share']:.0%})",
                           "map": f"{check[f'{band}_error']:.0%}", "binned": f"{check[f'{band}_binned_error']:.0%}",
                           "zero": "100%", "band": f"{check[f'{band}_coverage_95']:.0%}"}
    columns = (("n", "daily velocities"), ("map", "lagda map"),
               ("binned", f"binned mean ({BINNED_DEG:g} degree, +-{BINNED_DAYS:g} days)"), ("zero", "map of zero"),
               ("band", "lagda map's 95% band holds"))
    lines = [
        f"The map checked against {counted(check['drifters'], 'drifter')} it was not made from "
        f"({check['velocities']} daily velocities; their RMS speed {check['speed_rms_m_s']:.3f} m/s).",
        "Velocity error, % of the withheld drifters' RMS speed (lower is better; a map of zero errs 100%), by "
        "distance to the nearest mapped drifter:",
        format_table(rows, columns, first="distance to the nearest mapped drifter", number="{}"),
        f"In all: lagda map errs {check['error']:.0%} (RMS {check['rms_m_s']:.3f} m/s); its 95% band holds "
        f"{check['coverage_95']:.0%} of the velocity components (95% when its std is right), and the RMS of its "
        f"error over its std is {check['z_rms']:.2f} (1 when right)."]
    if check.get("near_velocities") and check.get("far_velocities"):
        lines.append(f"Near its drifters ({words[0]}) the map errs {check['near_error']:.0%}, far from them "
                     f"({words[2]}) {check['far_error']:.0%}: away from the drifters it returns to its prior mean, "
                     "and its std grows to say so.")
    return "\n".join(lines)


# ---------------------------------------------------------------- the twin experiment (model units)


def format_table(rows: dict) -> str:
    """Returns a markdown table of the twin experiment's scores: one row per method."""
    from lagda.report import format_table as table

    return table(rows, TWIN_COLUMNS)


def _from_scratch(out_dir: pathlib.Path, progress: bool, log) -> tuple[pathlib.Path, pathlib.Path]:
    """Simulates train/test data, trains the cpu preset, evaluates it, exports tracks; returns (run, tracks)."""
    from lagda.io.tracks import tracks_from_dataset, write_tracks
    from lagda.learning.config import cpu
    from lagda.learning.evaluate import evaluate
    from lagda.learning.evaluate import format_table as retrieval_table
    from lagda.learning.train import train
    from lagda.progress import FieldProgress
    from simulate import generate_dataset, open_dataset, small

    train_file, test_file = out_dir / "small_train.nc", out_dir / "small_test.nc"
    log("simulating the small training and test datasets")
    for config, path, label in ((small(n_samples=16384, seed=1), train_file, "train data"),
                                (small(n_samples=1024, seed=2), test_file, "test data")):
        bar = FieldProgress(label) if progress else None
        generate_dataset(config, path, overwrite=True, progress=bar)
        if bar is not None:
            bar.close()
    log("training the cpu preset")
    run_dir = train(cpu(), train_file, test_file, out_dir / "run", progress=progress)
    log(retrieval_table(evaluate(run_dir, test_file)))
    tracks_file = out_dir / "example_tracks.nc"
    with open_dataset(test_file) as ds:
        write_tracks(tracks_from_dataset(ds, samples=range(8)), tracks_file)
    return run_dir, tracks_file


def run_twin(out_dir="lagda-demo", *, model=None, tracks=None, methods=DEFAULT_METHODS, full: bool = False,
             progress: bool = True, log=print) -> dict:
    """Returns `{method: AssimilationSummary}` after assimilating model-unit example tracks with each method.

    Writes `<out_dir>/result_<method>.nc` and `<out_dir>/result_<method>.png` and prints a
    table of errors against the truth (velocity error over the grid and window and along the tracks, each
    relative to the true RMS velocity: the prior mean, zero, errs 1; forecast position error to 1.5 T in model
    units; the share of true velocities inside the 95% band; seconds per track).

    Parameters
    ----------
    out_dir
        output folder (made if missing).
    model
        run directory; default the shipped encoder of every regime (lagda/shipped/learned).
    tracks
        track file; default the shipped example tracks (`lagda.examples.path("example_tracks")`).
    methods
        assimilation methods to run (`lagda.assimilation.METHODS`).
    full
        simulate, train and evaluate from scratch first (`model` and `tracks` are then the new ones).
    progress
        show progress bars.
    log
        called with each line of the report.

    Returns
    -------
    dict
        `{method: AssimilationSummary}`, each what `lagda.assimilation.assimilate.assimilate_file` returns.
    """
    from lagda import examples
    from lagda.assimilation.assimilate import assimilate_file
    from lagda.assimilation.settings import AssimilateSettings

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if full:
        model, tracks = _from_scratch(out_dir, progress, log)
    model = pathlib.Path(model) if model is not None else examples.shipped(examples.DEFAULT_MODEL)
    tracks = pathlib.Path(tracks) if tracks is not None else examples.path("example_tracks")
    log("lagda demo --twin: 8 flows of lagda's own model (model units: x, y in 0..1 of a periodic domain), one "
        "drifter in each, assimilated and scored against the known truth")
    rows = {}
    for method in methods:
        start = time.perf_counter()
        summary = assimilate_file(tracks, out_dir / f"result_{method}.nc", AssimilateSettings(method, run_dir=model),
                                  plot=out_dir / f"result_{method}.png", overwrite=True)
        rows[method] = summary
        log(f"{method}: {summary.fields} fields in {time.perf_counter() - start:.1f} s -> "
            f"{out_dir / f'result_{method}.nc'}")
        log(summary.diagnostics)
    log("Errors relative to the true RMS velocity (the prior mean, zero, errs 1):")
    log(format_table({method: summary.scores for method, summary in rows.items()}))
    if {"linear", "hybrid"} <= set(rows):
        log("hybrid is linear's Gaussian posterior with the encoder's learned prior: on one dense track the data "
            "outweigh any prior, so it lands where linear does; the prior counts where tracks are sparse or noisy.")
    return rows
