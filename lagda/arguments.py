"""The options of `lagda assimilate` and `lagda map`, each declared once, and how a message names what the user gave:
the Python argument (`resolution=0`) or the command's flag (`--resolution 0`).

OPTIONS holds each command's options in the order its --help lists them: Python name (an AssimilateSettings or
MapSettings field, or an argument of assimilate_file or map_archive) -> `Option` (the flag, its help text, how
argparse reads it). An option both commands take with one meaning is one `Option` in both (SHARED). The command
line's parsers are built from OPTIONS (lagda.cli), and so is FLAGS, each name's flag per command.

`given(name, value)` writes the argument the user used. A Python call is the default; a command runs inside
`on_command_line(command)`, so the same message reads in its own words there:

    raise ValueError(f"{given('resolution', 0)}: must be positive")
    # Python:       resolution=0: must be positive
    # command line: --resolution 0: must be positive
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import numbers


@dataclasses.dataclass(frozen=True)
class Option:
    """One command-line option: its flag, its help text and how argparse reads it.

    Attributes
    ----------
    flag : str
        What the user types. A switch that turns a setting off is "--no-" and the setting's name
        ("--no-low-pass" sets `low_pass` False).
    help : str
        The --help text, as argparse takes it ("%%" for "%"): "{default}" in it is the command's default for the
        option, written when the parser is built (lagda.cli), so the text is true for every command that takes it.
    keywords : dict
        argparse's keywords for it (action, type, nargs, metavar, choices, required; a default only where the
        command line's text differs from the setting's, as --cadence 1d for `cadence_s`).

    Examples
    --------
    >>> SHARED["low_pass"].flag, SHARED["low_pass"].dest
    ('--no-low-pass', 'low_pass')
    """

    flag: str
    help: str
    keywords: dict = dataclasses.field(default_factory=dict)

    @property
    def dest(self) -> str:
        """Returns the attribute of the parsed command line that holds the option: the flag's name in Python words,
        less a switch's "no-" (`--plot-day`: plot_day; `--no-local-gp`: local_gp)."""
        return self.flag.removeprefix("--").removeprefix("no-").replace("-", "_")

    def describe(self, default=None, **fill) -> str:
        """Returns the help text with "{default}" the command's `default` (a number as short as it reads: 12, 0.25)
        and each other "{field}" its value in `fill`.

        Raises
        ------
        KeyError
            A "{field}" of the text not in `fill`.

        Examples
        --------
        >>> OPTIONS["map"]["resolution"].describe(0.25)
        'cell size in degrees (default 0.25)'
        """
        return self.help.format(default=_text(default), **fill)


def _option(flag: str, help_text: str, **keywords) -> Option:
    """Returns the Option of `flag` with its help text and argparse `keywords`."""
    return Option(flag, help_text, keywords)


# options `lagda assimilate` and `lagda map` both take, with one meaning and one help text
SHARED = {
    "keep_undrogued": _option(
        "--keep-undrogued", "keep fixes a GDP file marks undrogued (drogue_status 0; default: left out, counted)",
        action="store_true"),
    "low_pass": _option(
        "--no-low-pass", "on longitude/latitude tracks with dates, use the positions as they are (default: each "
        "drifter's positions averaged over its local inertial period and two M2 tidal periods, so that inertial "
        "oscillations and tides stay out of the velocities)", action="store_false"),
    "local_gp": _option(
        "--no-local-gp", "in a Fourier-Legendre basis (lagda assimilate's on physical tracks, lagda map's with "
        "--tile-method basis), leave out the local Gaussian process of the velocity the basis leaves out at the "
        "drifters (u, v are then the basis field's)", action="store_false"),
    "background": _option(
        "--background", "a gridded product on (time, lat, lon) as the prior mean of lon/lat drifters: velocities "
        "(ugos/vgos, uo/vo, ...) or sea surface height (adt, sla: geostrophy); the drifters correct its departure, "
        "far from them u, v are the background (default: zero)", metavar="FILE"),
}

OPTIONS = {
    "assimilate": {
        "tracks_path": _option(
            "--tracks", "track file: CF trajectory netCDF (multidimensional, orthogonal or contiguous ragged, e.g. "
            "clouddrift's), Parcels output (v4 Parquet, v3 zarr), a lagda dataset, or CSV with header "
            "id,time,x,y[,field] (model units) or id,time,lon,lat[,field] (ISO datetimes; ERDDAP's .csv and .csvp "
            "too), a GDP 6-hourly text file (buoydata_*.dat); several files, or a folder of them (a file per "
            "drifter, as the GDP's hourly files), are read as one (lon/lat or metres)",
            required=True, nargs="+", metavar="FILE"),
        "method": _option(  # its choices and their summaries come from the method registry (lagda.cli)
            "--method", "{methods}; default: linear in the circular basis for physical tracks (lon/lat or metres) "
            "without a lagda model (the ocean path), else hybrid with the shipped encoder"),
        "out_path": _option("--out", "output netCDF result file", required=True, metavar="RESULT.nc"),
        "plot": _option(
            "--plot", "also draw the result on one day (true psi if known, posterior mean and velocity, its std, the "
            "tracks)", metavar="FIG.png"),
        "plot_day": _option(
            "--plot-day", "the day --plot draws, ISO 8601 (e.g. 2025-03-15; the result time nearest it) (default: "
            "the middle of the tracks' window)", metavar="DATE"),
        "n_grid": _option("--n-grid", "grid points per side for psi, u, v (default {default})", type=int),
        "times": _option(
            "--times", "the result's grid times: N evenly spaced over the window, or for physical tracks a step such "
            "as 30min, 6h, 1d from the window's start (default: daily for physical tracks, at most 121 times; 11 over "
            "the window for model-unit tracks)", metavar="N|STEP"),
        "seed": _option("--seed", "seed of the method's randomness (default {default})", type=int),
        "dt": _option(
            "--dt", "RK4 step of the forward model (nondimensional time; default: the model run's, else the track "
            "file's dt attribute, else the smallest observation spacing in steps of at most 1e-4)",
            type=float, metavar="DT"),
        "box": _option(
            "--box", "physical tracks: the box mapped onto the periodic model domain, west east south north in "
            "degrees (metres for projected x/y); default: the file's, else the tracks' extent plus a margin",
            type=float, nargs=4, metavar=("LON0", "LON1", "LAT0", "LAT1")),
        "time_scale": _option(
            "--time-scale", "physical tracks: seconds per model time unit; default: the file's, else the window "
            "mapped onto 0.1", type=float, metavar="SECONDS"),
        "basis": _option(
            "--basis", "classical methods: assimilate into this flow basis instead of the file's or run's modes: "
            "Fourier modes 0 < |k| <= k-max (circular) or max(|k1|, |k2|) <= k-max (rectangular) times Legendre "
            "polynomials of degree 0..--degree in time over the tracks' window (for flows with no known frequencies, "
            "e.g. QG)", choices=("circular", "rectangular")),
        "k_max": _option(
            "--k-max", "with --basis: the largest wavenumber (default {default}: with 64 QG drifters as good as 16, "
            "and cheaper)", type=float),
        "degree": _option("--degree", "with --basis: the largest Legendre degree in time (default {default})",
                          type=int),
        "climatology": _option(
            "--climatology", "with --basis: a QG truth file of other flows (lagda simulate --flow qg) whose truth "
            "gives the prior spectrum and the variance of the velocity the basis leaves out (default: the default "
            "spectrum, and that variance estimated from the tracks)", metavar="QG.nc"),
        "overwrite": _option("--overwrite", "replace an existing output file", action="store_true"),
        "run_dir": _option(
            "--model", "trained model run directory (used by retrieve, embed, hybrid and sample --start learned / "
            "hybrid; default for all but --start learned: the encoder shipped with lagda that reads every observation "
            "regime, lagda/shipped/learned/); for linear, var, enkf it supplies the modes and prior when given, else "
            "they come from the track file", metavar="RUN"),
        **SHARED,
    },
    "map": {
        "tracks": _option(
            "--tracks", "drifter archive: a ragged netCDF or Zarr store (clouddrift, GDP), or a longitude/latitude "
            "track file as lagda assimilate reads (CF trajectory netCDF, Parcels output, CSV or netCDF such as "
            "ERDDAP's); or several such files, or a folder of them (a file per drifter, as the GDP's hourly files "
            "come), read as one, a group of files at a time (with --period, not the files whose drifters' stated "
            "lives miss it); or the URL of a Zarr store (https://...zarr, such as the GDP's hourly collection on "
            "AWS), read in slices", required=True, nargs="+", metavar="ARCHIVE"),
        "region": _option(
            "--region", "west east south north in degrees (LON1 < LON0 crosses the dateline); latitudes within 80 "
            "(default: the extent of the archive's fixes, rounded out to the cells; said in a note)",
            type=float, nargs=4, metavar=("LON0", "LON1", "LAT0", "LAT1")),
        "period": _option(
            "--period", "first and last map time, ISO 8601 (e.g. 2025-01-01 2025-12-31) (default: from the first to "
            "the last fix; said in a note)", nargs=2, metavar=("START", "END")),
        "resolution": _option("--resolution", "cell size in degrees (default {default})", type=float, metavar="DEG"),
        "out": _option("--out", "output map, .zarr or .nc", required=True, metavar="STORE"),
        "cadence_s": _option("--cadence", "time between maps: 6h, 1d, ... (default 1d)", default="1d",
                             metavar="STEP"),
        "workers": _option("--workers", "Dask worker processes on this machine (default: the CPUs)", type=int,
                           metavar="N"),
        "scheduler": _option("--scheduler", "a running Dask scheduler (tcp://host:8786) instead",
                             metavar="ADDRESS"),
        "resume": _option("--resume", "finish an interrupted run (a finished one is left as is)",
                          action="store_true"),
        "overwrite": _option("--overwrite", "start again, replacing the output and any partial run",
                             action="store_true"),
        "progress": _option("--no-progress", "no progress bar (the notes are still printed)", action="store_false"),
        "plot": _option(
            "--plot", "also draw one day of the map: speed and velocity, its std, the fixes per cell (also for a map "
            "already complete)", metavar="FIG.png"),
        "plot_day": _option("--plot-day", "the day --plot draws (default: the day with the most fixes)",
                            metavar="DATE"),
        "keep_undrogued": SHARED["keep_undrogued"],
        "low_pass": SHARED["low_pass"],
        "land_mask": _option(
            "--no-land-mask", "map the land cells too (default: cells with no sea in the GLOBE 1-km land mask are "
            "NaN; their sea_area_fraction is in the map either way)", action="store_false"),
        "withhold": _option(
            "--withhold", "leave this fraction of the drifters out of the map (whole drifters: tracks that continue "
            "one another in place and time go together; chosen by their ids, the same on every run) and check the "
            "map against their daily velocities by distance to the nearest fix the map used, beside a map of zero "
            "and a binned mean on the same points: error and 95%% band coverage, in a note and in the map's "
            "attributes (default 0: every drifter mapped)", type=float, metavar="FRACTION"),
        "background": SHARED["background"],
        "method": _option(  # its choices and their words are the tile methods' (lagda.cli)
            "--tile-method", "each tile's method: {tile_methods} (default {default})"),
        "tile_deg": _option("--tile-size", "tile height in degrees (about its width in km) (default {default})",
                            type=float, metavar="DEG"),
        "halo_deg": _option("--halo", "overlap of neighbouring tiles on each side (default {default})", type=float,
                            metavar="DEG"),
        "window_days": _option("--window-days", "each tile's time window (default {default})", type=float),
        "step_days": _option("--window-step", "days between windows (default {default})", type=float,
                             metavar="DAYS"),
        "k_max": _option("--k-max", "largest Fourier wavenumber per tile box side (default {default})", type=float),
        "degree": _option("--degree", "largest Legendre degree in time per window (default {default})", type=int),
        "local_gp": SHARED["local_gp"],
    },
}

# each argument a message may name -> the flag that sets it, per command (a switch's flag is the one that gives its
# non-default value)
FLAGS = {command: {name: option.flag for name, option in options.items()} for command, options in OPTIONS.items()}

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

    Parameters
    ----------
    name
        a key of the command's FLAGS (e.g. a MapSettings field, an assimilate_file argument).
    value
        the value given (a tuple or list is the flag's several values).

    Raises
    ------
    KeyError
        on the command line, `name` has no flag in the command's FLAGS.

    Examples
    --------
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
