"""`lagda demo`: from shipped drifter tracks to recovered velocity fields, with errors.

Default: the shipped encoder that reads every observation regime (lagda/shipped/learned/, the `learned` set
encoder trained on a mixture of regimes) and example tracks (lagda/shipped/example_tracks.nc, held out from training)
are assimilated with several methods; each writes a result file and a figure,
and a table of errors against the known truth is printed. `full=True` runs everything from
scratch: simulate the small datasets, train the cpu preset, evaluate retrieval, export
tracks, assimilate.
"""

from __future__ import annotations

import pathlib
import time

SHIPPED = pathlib.Path(__file__).resolve().parent / "shipped"  # package data: installed with lagda
DEFAULT_MODEL = "learned"  # the shipped run the learned methods use without --model: it reads any times, gaps, drifters
DEFAULT_METHODS = ("linear", "embed", "hybrid")
COLUMNS = (("velocity_rel_l2", "field err"), ("track_velocity_rel_l2", "track-vel err"),
           ("forecast_rms", "forecast rms"), ("velocity_calibration", "95% cover"), ("seconds_per_track", "s/track"))


def shipped(name: str) -> pathlib.Path:
    """Returns the path of a file shipped with the package (lagda/shipped/: the model, example tracks).

    Raises:
        FileNotFoundError: if the installation lacks it (a broken install).
    """
    path = SHIPPED / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the lagda installation is incomplete; reinstall, or use --full")
    return path


def format_table(rows: dict) -> str:
    """Returns a markdown table of the demo's scores: one row per method."""
    from lagda.report import format_table as table

    return table(rows, COLUMNS)


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


def run_demo(out_dir="lagda-demo", *, model=None, tracks=None, methods=DEFAULT_METHODS, full: bool = False,
             progress: bool = True, log=print) -> dict:
    """Returns `{method: AssimilationSummary}` after assimilating example tracks with each method.

    Writes `<out_dir>/result_<method>.nc` and `<out_dir>/result_<method>.png` and prints a
    table of errors against the truth (velocity-field relative L2 error over the domain and
    window, along-track velocity error, forecast RMS to 1.5 T, 95% coverage, seconds).

    Parameters
    ----------
    out_dir : str or os.PathLike, default "lagda-demo"
        Output folder (created).
    model : str or os.PathLike, optional
        Run directory; default the shipped encoder of every regime (lagda/shipped/learned).
    tracks : str or os.PathLike, optional
        Track file; default the shipped example tracks (lagda/shipped/example_tracks.nc).
    methods : sequence of str
        Assimilation methods to run (`lagda.assimilation.METHODS`).
    full : bool, default False
        Simulate, train and evaluate from scratch first (`model` and `tracks` are then the new ones).
    progress : bool, default True
        Show progress bars.
    log : callable, default print
        Called with each line of the report.

    Returns
    -------
    dict
        `{method: AssimilationSummary}`, each what `lagda.assimilation.assimilate.assimilate_file` returns.
    """
    from lagda.assimilation.assimilate import assimilate_file

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if full:
        model, tracks = _from_scratch(out_dir, progress, log)
    model = pathlib.Path(model) if model is not None else shipped(DEFAULT_MODEL)
    tracks = pathlib.Path(tracks) if tracks is not None else shipped("example_tracks.nc")
    rows = {}
    for method in methods:
        start = time.perf_counter()
        summary = assimilate_file(tracks, out_dir / f"result_{method}.nc", method, run_dir=model,
                                  plot=out_dir / f"result_{method}.png", overwrite=True)
        rows[method] = summary
        log(f"{method}: {summary.fields} fields in {time.perf_counter() - start:.1f} s -> "
            f"{out_dir / f'result_{method}.nc'}")
        log(summary.diagnostics)
    log(format_table({method: summary.scores for method, summary in rows.items()}))
    return rows
