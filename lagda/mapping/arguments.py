"""How a map's messages name what the user gave: the Python argument (`resolution=0`) or the flag of `lagda map`
(`--resolution 0`).

One table (FLAGS) holds each argument's flag; `given(name, value)` writes the one the user used. A Python call is
the default; the command line runs inside `on_command_line()`, so the same message reads in its own words there:

    raise ValueError(f"{given('resolution', 0)}: must be positive")
    # Python:       resolution=0: must be positive
    # command line: --resolution 0: must be positive
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers

# each MapSettings field and map_archive argument a message may name -> the flag of `lagda map` that sets it (a
# switch's flag is the one that gives its non-default value)
FLAGS = {
    "tracks": "--tracks", "out": "--out", "region": "--region", "period": "--period", "resolution": "--resolution",
    "cadence_s": "--cadence", "tile_deg": "--tile-size", "halo_deg": "--halo", "window_days": "--window-days",
    "step_days": "--window-step", "k_max": "--k-max", "degree": "--degree", "keep_undrogued": "--keep-undrogued",
    "local_gp": "--no-local-gp", "land_mask": "--no-land-mask", "withhold": "--withhold", "low_pass": "--no-low-pass",
    "method": "--tile-method", "background": "--background", "workers": "--workers", "scheduler": "--scheduler",
    "resume": "--resume", "overwrite": "--overwrite",
}

_ON_COMMAND_LINE = contextvars.ContextVar("lagda_map_on_command_line", default=False)


@contextlib.contextmanager
def on_command_line():
    """Within it, `given` names the flags of `lagda map` (the command line's run is inside it)."""
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def given(name: str, value=True) -> str:
    """Returns how the user gave argument `name` its `value`: `name=value` from Python, the flag and its value on
    the command line (a switch's flag alone).

    Args:
        name: a key of FLAGS (a MapSettings field or a map_archive argument).
        value: the value given (a tuple or list is the flag's several values).

    Raises:
        KeyError: `name` has no flag in FLAGS.

    Example:
        >>> given("resolution", 0), given("region", (170, -170, 30, 40)), given("resume")
        ('resolution=0', 'region=(170, -170, 30, 40)', 'resume=True')
        >>> with on_command_line():
        ...     given("resolution", 0), given("region", (170, -170, 30, 40)), given("resume")
        ('--resolution 0', '--region 170 -170 30 40', '--resume')
    """
    flag = FLAGS[name]
    if not _ON_COMMAND_LINE.get():
        return f"{name}={_python_text(value)}"
    if isinstance(value, bool):
        return flag
    return " ".join([flag, *map(_text, value if isinstance(value, (tuple, list)) else (value,))])


def again() -> str:
    """Returns what repeats a run: "the same command" on the command line, "the same call" from Python."""
    return "the same command" if _ON_COMMAND_LINE.get() else "the same call"


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
