"""How a message names what the user gave: the Python argument (`resolution=0`) or the command's flag
(`--resolution 0`).

One table per command (FLAGS) holds each argument's flag; `given(name, value)` writes the one the user used. A
Python call is the default; a command runs inside `on_command_line(command)`, so the same message reads in its own
words there:

    raise ValueError(f"{given('resolution', 0)}: must be positive")
    # Python:       resolution=0: must be positive
    # command line: --resolution 0: must be positive
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers

# each argument a message may name -> the flag that sets it, per command (a switch's flag is the one that gives its
# non-default value): `lagda map` (MapSettings fields, map_archive's arguments), `lagda assimilate` (assimilate_file's)
FLAGS = {
    "map": {
        "tracks": "--tracks", "out": "--out", "region": "--region", "period": "--period", "resolution": "--resolution",
        "cadence_s": "--cadence", "tile_deg": "--tile-size", "halo_deg": "--halo", "window_days": "--window-days",
        "step_days": "--window-step", "k_max": "--k-max", "degree": "--degree", "keep_undrogued": "--keep-undrogued",
        "local_gp": "--no-local-gp", "land_mask": "--no-land-mask", "withhold": "--withhold",
        "low_pass": "--no-low-pass", "method": "--tile-method", "background": "--background", "workers": "--workers",
        "scheduler": "--scheduler", "resume": "--resume", "overwrite": "--overwrite", "plot": "--plot",
        "plot_day": "--plot-day",
    },
    "assimilate": {
        "tracks_path": "--tracks", "out_path": "--out", "method": "--method", "run_dir": "--model",
        "n_grid": "--n-grid", "plot": "--plot", "plot_day": "--plot-day", "overwrite": "--overwrite",
        "seed": "--seed", "dt": "--dt", "box": "--box", "time_scale": "--time-scale", "basis": "--basis",
        "k_max": "--k-max", "degree": "--degree", "climatology": "--climatology", "times": "--times",
        "keep_undrogued": "--keep-undrogued", "local_gp": "--no-local-gp", "low_pass": "--no-low-pass",
    },
}

_ON_COMMAND_LINE = contextvars.ContextVar("lagda_on_command_line", default=None)  # the command, or None


@contextlib.contextmanager
def on_command_line(command: str = "map"):
    """Within it, `given` names the flags of `lagda COMMAND` (a key of FLAGS; the command line's run is inside it)."""
    token = _ON_COMMAND_LINE.set(command)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def given(name: str, value=True) -> str:
    """Returns how the user gave argument `name` its `value`: `name=value` from Python, the flag and its value on
    the command line (a switch's flag alone).

    Args:
        name: a key of the command's FLAGS (e.g. a MapSettings field, an assimilate_file argument).
        value: the value given (a tuple or list is the flag's several values).

    Raises:
        KeyError: on the command line, `name` has no flag in the command's FLAGS.

    Example:
        >>> given("resolution", 0), given("region", (170, -170, 30, 40)), given("resume")
        ('resolution=0', 'region=(170, -170, 30, 40)', 'resume=True')
        >>> with on_command_line("map"):
        ...     given("resolution", 0), given("region", (170, -170, 30, 40)), given("resume")
        ('--resolution 0', '--region 170 -170 30 40', '--resume')
        >>> with on_command_line("assimilate"):
        ...     given("run_dir", "RUN"), given("overwrite")
        ('--model RUN', '--overwrite')
    """
    command = _ON_COMMAND_LINE.get()
    if command is None:
        return f"{name}={_python_text(value)}"
    flag = FLAGS[command][name]
    if isinstance(value, bool):
        return flag
    return " ".join([flag, *map(_text, value if isinstance(value, (tuple, list)) else (value,))])


def again() -> str:
    """Returns what repeats a run: "the same command" on the command line, "the same call" from Python."""
    return "the same call" if _ON_COMMAND_LINE.get() is None else "the same command"


def _text(value) -> str:
    """Returns a number as short as it reads (0.25, not 0.25000), anything else as str."""
    return f"{value:g}" if isinstance(value, numbers.Real) and not isinstance(value, bool) else str(value)


def _python_text(value) -> str:
    """Returns a value as Python would write it, its numbers short (a tuple or list as a tuple)."""
    if isinstance(value, (tuple, list)):
        return f"({', '.join(map(_python_text, value))}{',' * (len(value) == 1)})"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return _text(value)
    return repr(value)
