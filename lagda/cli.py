"""The `lagda` command: one argparse parser with a subcommand per job.

Each subcommand is a thin shell over one library function, added by a pair
`_add_<name>_parser(subparsers)` + `_run_<name>(args) -> int`. Errors from bad input
(ValueError, FileNotFoundError, OSError) become one stderr line "lagda <cmd>: error: ..."
and exit code 2; any other exception one line "lagda <cmd>: unexpected error: ..." and exit
code 1; `--debug` on any subcommand prints the traceback first. Ctrl-C exits with 130.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import shlex
import sys
import time
import traceback
import types
import typing

from lagda.version import __version__

EXIT_FAILURE = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


# ---------------------------------------------------------------- simulate

# flag dest -> SimConfig field, for flags that set exactly one field
_SIMULATE_FIELDS = ("n_samples", "seed", "frequency_seed", "n_drifters", "release", "obs_noise", "diffusivity",
                    "dt", "t_final", "stride", "spectrum_exponent", "rms_speed", "omega_max", "precision",
                    "chunk_size")
_SIMULATE_PAIRS = {"release_point": ("release_x", "release_y"), "k1_range": ("k1_min", "k1_max"),
                   "k2_range": ("k2_min", "k2_max")}


def _add_simulate_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate", help="generate a dataset of (Fourier coefficients, drifter tracks) pairs",
        description="Generate a netCDF dataset of prior flow fields and their drifter tracks. "
                    "A preset gives every setting; the flags given override it.")
    p.add_argument("--out", required=True, metavar="FILE.nc", help="output netCDF file")
    p.add_argument("--preset", choices=("paper", "small"), default="small",
                   help="base settings: paper (dt 1e-5, stride 10, 32,268 fields) or small (dt 1e-4, 4,096 fields)")
    p.add_argument("--n-samples", type=int, help="number of flow fields")
    p.add_argument("--seed", type=int, help="seed of coefficients, release points and noise")
    p.add_argument("--frequency-seed", type=int, help="seed of the frequencies omega_k (shared by train/test files)")
    p.add_argument("--n-drifters", type=int, help="tracks per field")
    p.add_argument("--release", choices=("fixed", "random"), help="fixed release point or uniform on the torus")
    p.add_argument("--release-point", type=float, nargs=2, metavar=("X", "Y"), help="fixed release point")
    p.add_argument("--obs-noise", type=float, help="std of Gaussian noise on recorded positions")
    p.add_argument("--diffusivity", type=float, help="Brownian forcing kappa: dz = w dt + sqrt(2 kappa) dW")
    p.add_argument("--steady", action="store_true", default=None, help="steady field (all omega_k = 0)")
    p.add_argument("--dt", type=float, help="RK4 time step")
    p.add_argument("--t-final", type=float, help="observation window T")
    p.add_argument("--stride", type=int, help="RK4 steps between recorded positions")
    p.add_argument("--k1-range", type=int, nargs=2, metavar=("MIN", "MAX"), help="mode set: k1 in [MIN, MAX]")
    p.add_argument("--k2-range", type=int, nargs=2, metavar=("MIN", "MAX"), help="mode set: k2 in [MIN, MAX]")
    p.add_argument("--spectrum-exponent", type=float, help="a_k proportional to (1 + |k|^2)^(-exponent)")
    p.add_argument("--rms-speed", type=float, help="expected RMS speed of the prior fields")
    p.add_argument("--omega-max", type=float, help="omega_k ~ U(-omega_max, omega_max)")
    p.add_argument("--precision", choices=("float32", "float64"), help="arithmetic of the integrator")
    p.add_argument("--chunk-size", type=int, help="fields per compiled chunk (results do not depend on it)")
    p.add_argument("--like", metavar="FILE", help="copy modes, frequencies and prior from this dataset")
    p.add_argument("--shard", metavar="I/N", default=None,
                   help="generate only shard I of N: the contiguous block of samples I*n/N .. (I+1)*n/N - 1 with the "
                        "same per-sample keys (the N shard files together equal one run; lagda train reads them as "
                        "one)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run of the same settings (refused if one differs, the shard "
                        "included); a complete output of the same settings is left as it is (exit 0); with nothing "
                        "to resume, start afresh")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output / unfinished run (with --resume: start again)")
    p.add_argument("--flow", choices=("fourier", "qg"), default="fourier",
                   help="fourier: lagda's Fourier model (default); qg: flows of the pyqg-jax ocean model with their "
                        "gridded truth (needs lagda[qg]); with qg, --n-samples counts flows")
    p.add_argument("--regime", choices=("rossby", "turbulence"),
                   help="qg: linear Rossby waves on a barotropic beta plane, or two-layer turbulence (default)")
    p.add_argument("--qg-preset", choices=("qg", "tiny", "window"),
                   help="qg base settings: qg (default; 64^2 turbulence, 5-year spin-up), tiny (16^2, for tests) or "
                        "window (the qg preset on a domain twice as wide, 128^2 and 2000 km, drifters released in its "
                        "central 1000 km box)")
    p.add_argument("--qg-background", choices=("full", "anomaly"),
                   help="qg turbulence: drifters feel the upper layer's full velocity, the imposed flow U1 included "
                        "(default), or only its anomaly (the frame moving with the upper layer, as before format 2)")
    p.add_argument("--qg-windows", type=int, metavar="W",
                   help="qg: W successive windows of each spun-up flow, drifters released afresh in each; the file "
                        "holds n-samples x W flows (a training set of windows at one spin-up per W; default 1)")
    p.add_argument("--release-box", type=float, nargs=4, metavar=("X0", "X1", "Y0", "Y1"),
                   help="qg: release drifters in [X0, X1] x [Y0, Y1], fractions of the domain side (default 0 1 0 1)")
    p.add_argument("--window-days", type=float, help="qg: observation window after the release, days")
    p.add_argument("--obs-interval", type=float, metavar="SECONDS", help="qg: seconds between recorded positions")
    p.add_argument("--truth-interval", type=float, metavar="SECONDS",
                   help="qg: seconds between stored gridded truth fields")
    p.add_argument("--spin-up-days", type=float, help="qg: spin-up before the release, days")
    p.add_argument("--k-max", type=int, help="qg: projection basis, k1 and k2 in [-K_MAX, K_MAX]")
    p.set_defaults(run=_run_simulate)


def simulate_config(args: argparse.Namespace):
    """Returns the SimConfig of `lagda simulate`: preset, then the --like file's modes/prior, then flags.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed `lagda simulate` command line (`build_parser().parse_args(...)`).

    Returns
    -------
    simulate.SimConfig
        Validated; each flag given overrides one field (--release-point, --k1-range, --k2-range two).

    Raises
    ------
    ValueError
        One line for a bad value (SimConfig.validate).
    FileNotFoundError
        A missing --like file.

    Examples
    --------
    >>> args = build_parser().parse_args(["simulate", "--preset", "small", "--n-samples", "8", "--out", "d.nc"])
    >>> simulate_config(args).n_samples
    8
    """
    from simulate import PRESETS, schema
    from simulate.generate import LIKE_FIELDS

    config = PRESETS[args.preset]()
    if args.like is not None:
        with schema.open_dataset(args.like) as ds:
            like_config = schema.config_from_attrs(ds)
        config = dataclasses.replace(config, **{name: getattr(like_config, name) for name in LIKE_FIELDS})
    overrides = {name: getattr(args, name) for name in _SIMULATE_FIELDS if getattr(args, name) is not None}
    for flag, (first, second) in _SIMULATE_PAIRS.items():
        if getattr(args, flag) is not None:
            overrides[first], overrides[second] = getattr(args, flag)
    if args.steady:
        overrides["steady"] = True
    return dataclasses.replace(config, **overrides).validate()


def _shard(text: str | None) -> tuple[int, int]:
    """Returns (I, N) of --shard I/N (default (0, 1): the whole run)."""
    if text is None:
        return 0, 1
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must be I/N with integers 0 <= I < N, got {text!r}") from None
    return index, count


def _run_simulate(args: argparse.Namespace) -> int:
    from lagda.progress import FieldProgress
    from simulate import schema
    from simulate.atomic import Interrupted, fault_point
    from simulate.generate import ALREADY_COMPLETE, generate_dataset, wander_statistics
    from simulate.kernels import use_host_cores

    if args.flow == "qg":
        return _run_simulate_qg(args)
    use_host_cores()  # before any JAX work: one CPU device per core, the kernel splits chunks over them
    _refuse_flags(args, _QG_ONLY, "applies only to --flow qg")
    config = simulate_config(args)
    shard = _shard(args.shard)
    progress = FieldProgress("simulate")
    start = time.perf_counter()
    notes = []

    def report(line: str) -> None:  # a line the bar does not overwrite
        notes.append(line)
        (progress.bar.write if progress.bar is not None else functools.partial(print, file=sys.stderr))(line)

    try:
        out = generate_dataset(config, args.out, like=args.like, resume=args.resume, overwrite=args.overwrite,
                               progress=progress, history="lagda " + shlex.join(args.argv), shard=shard,
                               report=report)
    except BaseException as error:  # the bar's line ended before the error's
        progress.close()
        if not isinstance(error, Interrupted):
            raise
        print(f"lagda simulate: interrupted: {error}", file=sys.stderr)
        return EXIT_INTERRUPTED
    progress.close()
    if any(ALREADY_COMPLETE in line for line in notes):
        return 0
    try:
        fault_point("summary")
        with schema.open_dataset(out) as ds:
            stats, n_modes, n_fields = wander_statistics(ds), ds.sizes["mode"], ds.sizes["sample"]
    except KeyboardInterrupt:
        print(f"lagda simulate: interrupted: {out} is complete; the same command with --resume reports it "
              f"{ALREADY_COMPLETE}", file=sys.stderr)
        return EXIT_INTERRUPTED
    what = f"shard {args.shard} ({n_fields} of {config.n_samples} fields)" if args.shard else f"{n_fields} fields"
    print(f"wrote {out}: {what} x {config.n_drifters} drifter(s) x {config.n_obs} obs, "
          f"{n_modes} modes, {time.perf_counter() - start:.1f} s; median displacement at T = {config.t_final:g}: "
          f"{stats['median_displacement']:.3f}, tracks leaving the unit square: {100 * stats['fraction_leaving']:.1f}%")
    return 0


# qg: flag dest -> QGConfig field; flags only one of the two flows accepts
_QG_FIELDS = {"n_samples": "n_flows", "n_drifters": "n_drifters", "release": "release", "seed": "seed",
              "rms_speed": "rms_speed", "window_days": "window_days", "obs_interval": "obs_interval",
              "truth_interval": "truth_interval", "spin_up_days": "spin_up_days", "k_max": "k_max",
              "qg_background": "background", "release_box": "release_box", "qg_windows": "windows"}
_QG_ONLY = ("regime", "qg_preset", "window_days", "obs_interval", "truth_interval", "spin_up_days", "k_max",
            "qg_background", "release_box", "qg_windows")
_FOURIER_ONLY = ("frequency_seed", "release_point", "obs_noise", "diffusivity", "steady", "dt", "t_final", "stride",
                 "k1_range", "k2_range", "spectrum_exponent", "omega_max", "precision", "chunk_size", "like", "resume",
                 "shard")


def _refuse_flags(args: argparse.Namespace, dests, why: str) -> None:
    """Raises ValueError naming the first flag of `dests` given on the command line."""
    given = [dest for dest in dests if getattr(args, dest, None) not in (None, False)]
    given += ["preset"] if why.endswith("fourier") and any(a.split("=")[0] == "--preset" for a in args.argv) else []
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')} {why}")


def qg_config(args: argparse.Namespace):
    """Returns the QGConfig of `lagda simulate --flow qg`: the preset of --qg-preset and --regime, then flags.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed `lagda simulate --flow qg` command line, with `args.argv` the words it was parsed from.

    Returns
    -------
    simulate.qg.QGConfig
        Validated.

    Raises
    ------
    ValueError
        One line for a flag of the Fourier flows only, or a bad value.
    """
    from simulate import qg

    _refuse_flags(args, _FOURIER_ONLY, "does not apply to --flow qg; it applies only to --flow fourier")
    config = qg.PRESETS[args.qg_preset or "qg"][args.regime or "turbulence"]()
    overrides = {field: getattr(args, dest) for dest, field in _QG_FIELDS.items() if getattr(args, dest) is not None}
    if "release_box" in overrides:
        overrides["release_box"] = tuple(overrides["release_box"])
    return dataclasses.replace(config, **overrides).validate()


def _run_simulate_qg(args: argparse.Namespace) -> int:
    from lagda.progress import FieldProgress
    from simulate.qg import write_qg_dataset

    config = qg_config(args)
    progress = FieldProgress("simulate qg")
    start = time.perf_counter()
    try:
        out = write_qg_dataset(config, args.out, overwrite=args.overwrite, progress=progress,
                               history="lagda " + shlex.join(args.argv))
    except ImportError as error:  # the optional extra is missing: bad environment, one line
        raise ValueError(str(error)) from None
    finally:
        progress.close()
    windows = f" x {config.windows} window(s)" if config.windows > 1 else ""
    print(f"wrote {out}: {config.regime} QG, {config.n_flows} flow(s){windows} x {config.n_drifters} drifter(s) x "
          f"{config.n_obs} obs every {config.obs_interval:g} s over {config.window_days:g} days, truth on "
          f"{config.nx}^2 every {config.truth_interval:g} s, projection k_max = {config.k_max}, "
          f"{time.perf_counter() - start:.1f} s")
    return 0


# ---------------------------------------------------------------- options declared by config dataclasses


def _option_kind(kind) -> dict:
    """Returns the argparse keywords of a config field's annotation: type, choices, nargs, metavar."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):  # X | None: the option sets X
        kind = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is bool:
        return {"type": _boolean, "metavar": "true|false"}
    if origin is typing.Literal:
        return {"choices": args}
    if origin is tuple:
        return {"type": args[0], "nargs": "+"}
    return {"type": kind if kind in (int, float) else str}


def add_config_options(parser, fields: dict, shown: dict | None = None) -> None:
    """Adds one option --NAME per config field to `parser` (default None: not given).

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
        Where the options go.
    fields : dict
        Field name -> (annotation, help text); the annotation gives the option's type, choices or nargs
        (bool: true|false; Literal: its choices; tuple: one or more values; X | None: X).
    shown : dict, optional
        Field name -> (annotation, help text) of the options --help lists, with these help texts; the other
        options are accepted and left out of --help. None: every option listed.

    Examples
    --------
    >>> import argparse, typing
    >>> parser = argparse.ArgumentParser()
    >>> add_config_options(parser, {"fd_lag": (int | None, "lag"), "track_data": (typing.Literal["auto"], "data")})
    >>> parser.parse_args(["--fd-lag", "2"])
    Namespace(fd_lag=2, track_data=None)
    """
    for name, (kind, help_text) in fields.items():
        if shown is not None:
            help_text = shown[name][1] if name in shown else None
        parser.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                            help=argparse.SUPPRESS if help_text is None else help_text.replace("%", "%%"),
                            **_option_kind(kind))


def add_command_options(parser, command: str, settings: type, keywords: dict | None = None, groups: dict | None = None,
                        fill: dict | None = None) -> None:
    """Adds the options of `lagda COMMAND` to `parser`, each as lagda.arguments.OPTIONS declares it, in its order.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    command : str
        A key of lagda.arguments.OPTIONS ("assimilate", "map").
    settings : type
        The command's settings dataclass (AssimilateSettings, MapSettings): an option that sets a field takes the
        field's default (unless its Option gives the command line's own), also written into its help's "{default}".
    keywords : dict, optional
        Option name -> more argparse keywords, those known only here (the choices of a registry).
    groups : dict, optional
        Option name -> the argument group of `parser` it is listed in (default: `parser` itself).
    fill : dict, optional
        The other "{field}"s of the help texts (Option.describe).

    Examples
    --------
    >>> import argparse
    >>> from lagda.assimilation.settings import AssimilateSettings
    >>> parser = argparse.ArgumentParser()
    >>> add_command_options(parser, "assimilate", AssimilateSettings, fill={"methods": "linear: ..."})
    >>> args = parser.parse_args(["--tracks", "t.nc", "--out", "r.nc", "--no-low-pass"])
    >>> args.tracks, args.n_grid, args.low_pass, args.model
    (['t.nc'], 32, False, None)
    """
    from lagda.arguments import OPTIONS

    defaults = {field.name: field.default for field in dataclasses.fields(settings)}
    for name, option in OPTIONS[command].items():
        given = {**option.keywords, **(keywords or {}).get(name, {})}
        if name in defaults and "default" not in given:
            given["default"] = defaults[name]
        (groups or {}).get(name, parser).add_argument(
            option.flag, dest=option.dest, help=option.describe(given.get("default"), **(fill or {})), **given)


def settings_from(args: argparse.Namespace, command: str, settings: type, **values):
    """Returns the settings of `lagda COMMAND` from its parsed command line: each field an option of
    lagda.arguments.OPTIONS sets, from that option (its value as parsed), unless `values` gives it.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (`build_parser().parse_args(...)`).
    command : str
        A key of lagda.arguments.OPTIONS.
    settings : type
        The settings dataclass to build (AssimilateSettings, MapSettings), which checks the values.
    **values
        Fields whose value is not the option's as parsed (e.g. MapSettings.cadence_s, parsed from --cadence 1d).

    Returns
    -------
    object
        The `settings` instance.

    Raises
    ------
    ValueError
        A value the settings refuse, in one line naming the flag (inside lagda.arguments.on_command_line).

    Examples
    --------
    >>> from lagda.assimilation.settings import AssimilateSettings
    >>> args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--model", "RUN"])
    >>> settings = settings_from(args, "assimilate", AssimilateSettings)
    >>> settings.run_dir, settings.n_grid, settings.local_gp
    ('RUN', 32, True)
    """
    from lagda.arguments import OPTIONS

    fields = {field.name for field in dataclasses.fields(settings)}
    return settings(**{**{name: getattr(args, option.dest) for name, option in OPTIONS[command].items()
                          if name in fields}, **values})


def _method_options(only: str | None = "") -> dict:
    """Returns {field: (annotation, help)} over every method's config, the help naming each method and default;
    with `only` a method's name, that method's fields alone; with None, none."""
    from lagda.assimilation.methods.registry import METHODS
    from lagda.settings import setting_help

    if only is None:
        return {}
    uses: dict = {}
    for name, cls in METHODS.items():
        if only and name != only:
            continue
        for field in dataclasses.fields(cls.Config):
            kind = typing.get_type_hints(cls.Config)[field.name]
            known, by_help = uses.setdefault(field.name, (kind, {}))
            if known != kind and typing.get_origin(known) is typing.get_origin(kind) is typing.Literal:
                uses[field.name] = (  # one option for both methods' choices (e.g. --start)
                    typing.Literal[tuple(dict.fromkeys(typing.get_args(known) + typing.get_args(kind)))], by_help)
            by_help.setdefault((setting_help(cls.Config, field.name), repr(field.default)), []).append(name)
    out = {}
    for field, (kind, by_help) in uses.items():
        parts = [f"{', '.join(methods)}: {text} (default {default})" for (text, default), methods in by_help.items()]
        out[field] = (kind, "; ".join(parts))
    return out


# ---------------------------------------------------------------- assimilate

from lagda.assimilation.methods.config import RENAMED  # noqa: E402  (no jax import)
from lagda.assimilation.methods.registry import METHODS as ASSIM_METHODS  # noqa: E402  (no jax import)
from lagda.assimilation.settings import AssimilateSettings  # noqa: E402  (no jax import)


def _add_assimilate_parser(subparsers, help_method: str | None = None) -> None:
    p = subparsers.add_parser(
        "assimilate", help="recover the velocity field (with uncertainty) from observed drifter tracks",
        description="Assimilate drifter tracks into the flow model: writes the posterior over the Fourier "
                    "coefficients and the posterior mean/std of psi, u, v on a grid to a netCDF result file.")
    methods = "; ".join(f"{name}: {cls.summary}" for name, cls in ASSIM_METHODS.items())
    add_command_options(p, "assimilate", AssimilateSettings, keywords={"method": {"choices": list(ASSIM_METHODS)}},
                        fill={"methods": methods})
    shown = _method_options(help_method)
    group = p.add_argument_group(
        f"settings of --method {help_method}" if help_method else "method settings",
        None if help_method else "each method has settings of its own: `lagda assimilate --method M --help` lists M's")
    add_config_options(group, _method_options(), shown)
    for old in RENAMED:  # deprecated option names (CHANGELOG.md), accepted with a deprecation note
        p.add_argument("--" + old.replace("_", "-"), dest=old, default=None, help=argparse.SUPPRESS,
                       **_option_kind(typing.get_type_hints(ASSIM_METHODS[RENAMED[old][0][0]].Config)[RENAMED[old][1]]))
    p.set_defaults(run=_run_assimilate)


def _given_method_options(args) -> dict:
    """Returns the method settings given on the command line, refusing one the chosen method does not take."""
    options = {name: getattr(args, name) for name in list(_method_options()) + list(RENAMED)
               if getattr(args, name, None) is not None}
    if args.method is None:  # the default method is chosen from the file: its settings are checked then
        return {name: tuple(value) if isinstance(value, list) else value for name, value in options.items()}
    fields = {f.name for f in dataclasses.fields(ASSIM_METHODS[args.method].Config)}
    for name, value in list(options.items()):
        if isinstance(value, list):
            options[name] = tuple(value)
        if name not in fields and name not in RENAMED:
            takers = [m for m, cls in ASSIM_METHODS.items() if name in {f.name for f in dataclasses.fields(cls.Config)}]
            raise ValueError(f"--{name.replace('_', '-')} does not apply to --method {args.method} "
                             f"(it applies to {', '.join(takers)})")
    return options


def _run_assimilate(args: argparse.Namespace) -> int:
    from lagda.arguments import on_command_line

    with on_command_line("assimilate"):  # its messages name its flags (--overwrite), not overwrite=True
        return _assimilate_command(args)


def _assimilate_command(args: argparse.Namespace) -> int:
    from lagda.io.sources import track_files

    track_files(args.tracks)  # each a file, a Parcels v3 zarr store or a folder of track files
    if args.model is not None and not os.path.isdir(args.model):
        raise FileNotFoundError(f"no such model run directory: {args.model}")
    if args.climatology is not None and not os.path.isfile(args.climatology):
        raise FileNotFoundError(f"no such climatology file: {args.climatology}")
    settings = settings_from(args, "assimilate", AssimilateSettings, config=_given_method_options(args))
    from lagda.assimilation.assimilate import assimilate_file

    summary = assimilate_file(args.tracks, args.out, settings, overwrite=args.overwrite, plot=args.plot,
                              plot_day=args.plot_day)
    _print_summary(summary, args.out, args.plot)
    return 0


def _print_summary(summary, out, plot) -> None:
    """Prints an AssimilationSummary: notes and warnings on stderr, one line per score group and the method's
    decisions on stdout."""
    from lagda.report import counted

    for kind, lines in (("note", summary.notes), ("warning", summary.warnings)):
        for line in lines:
            print(f"lagda assimilate: {kind}: {line}", file=sys.stderr)
    scalars = {key: value for key, value in summary.scores.items() if isinstance(value, (int, float, str))}
    details = "".join(f", {key} {value:.4g}" if isinstance(value, float) else f", {key} {value}"
                      for key, value in scalars.items())
    print(f"wrote {out}" + (f" and {plot}" if plot else "") + f": method {summary.method}, "
          f"{counted(summary.fields, 'field')}, {summary.seconds:.1f} s{details}")
    scores, note = summary.scores, summary.projection_note
    if "velocity_rms_error_m_s" in scores:
        print(f"velocity error against the truth: RMS {scores['velocity_rms_error_m_s']:.3g} m/s over the box and "
              f"window (true RMS speed {scores['velocity_rms_true_m_s']:.3g} m/s)")
    if "velocity_error_vs_truth" in scores:
        fit = ("; " + note if note is not None else
               f"; against the truth's fit in the basis {scores['velocity_error_vs_projection']:.3f}; the basis's "
               f"projection limit {scores['projection_limit']:.3f}")
        print(f"velocity error against the QG truth (relative L2 over its grid, times and flows): "
              f"{scores['velocity_error_vs_truth']:.3f}{fit}")
        print(f"95% bands of u_std, v_std (the field in the basis) cover {scores['velocity_coverage_vs_truth']:.3f} "
              "of the QG truth's grid velocities" + ("" if note is not None else
                                                     f", {scores['velocity_coverage_vs_projection']:.3f} of its fit's")
              + ("" if "velocity_coverage_vs_truth_with_unresolved" not in scores else
                 "; of u_total_std, v_total_std (the velocity the basis leaves out included) "
                 f"{scores['velocity_coverage_vs_truth_with_unresolved']:.3f} of the truth's"))
    print(summary.diagnostics)


# ---------------------------------------------------------------- map


def _add_map_parser(subparsers) -> None:
    from lagda.mapping.methods.registry import TILE_METHODS, tile_methods_help
    from lagda.mapping.settings import MapSettings

    p = subparsers.add_parser(
        "map", help="daily velocity maps with their std from a drifter archive (tiles on Dask)",
        description="Map a drifter archive (a clouddrift/GDP ragged netCDF or Zarr store, read in slices; or any "
                    "longitude/latitude track file lagda reads, read whole) to velocity "
                    "maps on (time, lat, lon) with their total predictive std: overlapping tiles, each an inversion "
                    "in its own tangent plane, blended with tapered weights. Each finished tile is saved at once: "
                    "--resume continues an interrupted run.")
    tiles = p.add_argument_group("tiles")
    add_command_options(p, "map", MapSettings, keywords={"method": {"choices": list(TILE_METHODS)}},
                        groups=dict.fromkeys(("tile_deg", "halo_deg", "window_days", "step_days", "k_max", "degree",
                                              "local_gp"), tiles), fill={"tile_methods": tile_methods_help()})
    p.set_defaults(run=_run_map)


def _background_path(path: str | None) -> str | None:
    """Returns a --background file's absolute path (read by Dask workers wherever they run), None for none.

    Raises
    ------
    FileNotFoundError
        no such file.
    """
    if path is None:
        return None
    if not os.path.exists(path):
        raise FileNotFoundError(f"--background {path}: no such file")
    return os.path.abspath(path)


def _run_map(args: argparse.Namespace) -> int:
    from lagda.arguments import on_command_line

    with on_command_line("map"):  # the map's messages name its flags (--resume), not the Python arguments (resume=True)
        return _map_command(args)


def _map_command(args: argparse.Namespace) -> int:
    from lagda.assimilation.fields import parse_step
    from lagda.mapping import MapSettings, map_archive
    from lagda.mapping.dask_driver import TileFailed
    from lagda.mapping.resume import interrupted_state

    settings = settings_from(args, "map", MapSettings, region=tuple(args.region) if args.region else None,
                             period=tuple(args.period) if args.period else None,
                             cadence_s=parse_step(args.cadence, "--cadence"),
                             background=_background_path(args.background))
    if args.plot_day is not None:
        if args.plot is None:
            raise ValueError("--plot-day needs --plot FIG.png")
        from lagda.assimilation.plot import parse_day

        parse_day(args.plot_day)  # a bad date is refused before the mapping
    say = lambda line: print(f"lagda map: {line}", file=sys.stderr)
    try:
        summary = map_archive(args.tracks, args.out, settings, workers=args.workers, scheduler=args.scheduler,
                              resume=args.resume, overwrite=args.overwrite, say=say, progress=args.progress)
    except KeyboardInterrupt:
        print(f"lagda map: interrupted: {interrupted_state(args.out)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except TileFailed as error:
        return _report(args, f"error: {error}", EXIT_FAILURE)
    if not summary.get("already_complete"):
        from lagda.report import counted

        print(f"wrote {args.out}: {counted(summary['tiles'], 'tile')} in {summary['seconds']:.1f} s "
              f"({summary['tiles'] / max(summary['seconds'], 1e-9):.3g} tiles/s)")
    if args.plot:
        from lagda.mapping.plot import plot_map

        figure, day = plot_map(args.out, args.plot, args.plot_day)
        print(f"wrote {figure}: the map of {day}" + ("" if args.plot_day else " (the day with the most fixes)"))
    return 0


# ---------------------------------------------------------------- export-tracks


def _add_export_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export-tracks", help="write any track file (a lagda dataset included) as a CF trajectory file",
        description="Read a track file in any format lagda reads and write it as a CF-1.11 trajectory netCDF file. "
                    "Model-unit tracks can be placed in the world (--box, --start, --time-scale), tracks in metres "
                    "on the sphere (--centre), and given gaps.")
    p.add_argument("--tracks", required=True, nargs="+", metavar="FILE",
                   help="input: any track file `lagda assimilate` reads (several, or a folder of them, as one)")
    p.add_argument("--out", required=True, metavar="FILE.nc", help="output netCDF file")
    p.add_argument("--layout", choices=("multidimensional", "ragged"), default="multidimensional",
                   help="multidimensional (trajectory x obs, padded; the default) or ragged (clouddrift/GDP: rowsize, "
                        "obs)")
    p.add_argument("--n-fields", type=int, metavar="N", help="keep the first N flows only")
    p.add_argument("--box", type=float, nargs=4, metavar=("LON0", "LON1", "LAT0", "LAT1"),
                   help="place model-unit tracks in this box (west east south north, degrees); needs --start, "
                        "--time-scale")
    p.add_argument("--centre", type=float, nargs=2, metavar=("LON", "LAT"),
                   help="place tracks in projected metres (a QG file) on the sphere: the same box lengths on the "
                        "tangent plane at LON LAT (degrees); --start re-dates them")
    p.add_argument("--start", metavar="DATETIME", help="ISO 8601 date of model time 0 (with --box or --centre)")
    p.add_argument("--time-scale", type=float, metavar="SECONDS", help="seconds per model time unit (with --box)")
    p.add_argument("--plain", action="store_true",
                   help="write the fixes only, as another tool would: no lagda mapping attributes, release points "
                        "or truth (a reader infers the box and time scale)")
    p.add_argument("--gaps", type=int, nargs=2, metavar=("COUNT", "LONGEST"),
                   help="cut COUNT gaps of 1..LONGEST consecutive fixes out of each track")
    p.add_argument("--seed", type=int, default=0, help="seed of the gaps (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    import warnings

    import numpy as np

    from lagda.io.export import export_tracks

    with warnings.catch_warnings(record=True) as caught:  # the reader's assumptions, one line each
        warnings.simplefilter("always")
        tracks = export_tracks(args.tracks, args.out, n_fields=args.n_fields, box=args.box, start=args.start,
                               time_scale=args.time_scale, gaps=args.gaps, layout=args.layout, centre=args.centre,
                               plain=args.plain, seed=args.seed,
                               overwrite=args.overwrite, history="lagda " + shlex.join(args.argv))
    for line in [str(w.message) for w in caught]:
        print(f"lagda export-tracks: warning: {line}", file=sys.stderr)
    for line in tracks.notes:
        print(f"lagda export-tracks: note: {line}", file=sys.stderr)
    n_fix = int(np.isfinite(tracks.times).sum())
    units = "model units" if tracks.mapping is None else tracks.mapping.describe()
    print(f"wrote {args.out}: {tracks.n_trajectory} trajectories, {n_fix} fixes, {args.layout} layout, {units}")
    return 0


# ---------------------------------------------------------------- example


def _add_example_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "example", help="copy a shipped example drifter file into a folder (--list: what there is)",
        description="Copy an example file shipped with lagda into a folder (default: this one), to try the other "
                    "commands on, e.g. `lagda example gdp_like && lagda assimilate --tracks gdp_like.nc --out "
                    "result.nc`. A different file of the same name is never replaced. Without NAME, or with "
                    "--list, list the examples. In Python: lagda.examples.path(NAME).")
    p.add_argument("name", nargs="?", metavar="NAME", help="the example to copy (see --list)")
    p.add_argument("--out", default=".", metavar="DIR", help="the folder to copy into, made if missing (default: .)")
    p.add_argument("--list", action="store_true", help="list the examples, one line each, and copy nothing")
    p.set_defaults(run=_run_example)


def _run_example(args: argparse.Namespace) -> int:
    from lagda import examples

    if args.list or args.name is None:
        width = max(map(len, examples.names()))
        for name in examples.names():
            print(f"{name:<{width}}  {examples.EXAMPLES[name]}")
        return 0
    target, written = examples.copy(args.name, args.out)
    print(f"wrote {target}" if written else f"{target} is already there, the same as the example: left as it is")
    return 0


# ---------------------------------------------------------------- train, evaluate


def _add_train_parser(subparsers) -> None:
    from lagda.learning.config import PRESETS, TrainConfig

    p = subparsers.add_parser("train", help="train the trajectory encoder by contrastive learning",
                              description="Train the trajectory encoder g_v by contrastive learning. A preset gives "
                                          "every setting; the flags given override it. Times are nondimensional.")
    p.add_argument("--train", required=True, nargs="+", metavar="FILE",
                   help="training dataset file (.nc), or several: the shard files of one run (lagda simulate --shard; "
                        "a quoted glob works too) are joined along samples, and files of the same fields (same seed, "
                        "e.g. fixed and random releases) along the drifter axis")
    p.add_argument("--test", default=None, nargs="+", metavar="FILE",
                   help="test dataset file for retrieval metrics (or the shard files of one run)")
    p.add_argument("--run-dir", required=True, help="output run directory")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                   help="base config: cpu (a small physics-informed encoder, 2-core CPU; the default), "
                        "learned (a pure-learned set encoder for any observation regime, 2-core CPU), "
                        "paper (section 6.3, needs a GPU) or tiny (tests)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --run-dir")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--coordinator", metavar="HOST:PORT",
                   help="several processes (jax.distributed): process 0's address, "
                        "the same in every process (default: $JAX_COORDINATOR_ADDRESS; unset: one process)")
    p.add_argument("--num-processes", type=int, help="several processes: how many (default: $JAX_NUM_PROCESSES)")
    p.add_argument("--process-id", type=int,
                   help="several processes: this one's index, 0 logs (default: $JAX_PROCESS_ID)")
    from lagda.settings import setting_help

    add_config_options(p, {field: (kind, setting_help(TrainConfig, field))
                           for field, kind in typing.get_type_hints(TrainConfig).items()})
    p.set_defaults(run=_run_train)


def _boolean(text: str) -> bool:
    """Returns True for "true", False for "false" (any case); anything else is a usage error."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _run_train(args) -> int:
    from lagda.learning.config import PRESETS, TrainConfig
    from lagda.learning.train import train

    for flag, name in (("coordinator", "JAX_COORDINATOR_ADDRESS"), ("num_processes", "JAX_NUM_PROCESSES"),
                       ("process_id", "JAX_PROCESS_ID")):
        if getattr(args, flag) is not None:  # train() starts jax.distributed from these
            os.environ[name] = str(getattr(args, flag))
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
                 if getattr(args, f.name) is not None}
    config = PRESETS[args.preset](**overrides)
    test = args.test[0] if args.test and len(args.test) == 1 else args.test
    try:
        run_dir = train(config, args.train[0] if len(args.train) == 1 else args.train, test, args.run_dir,
                        resume=args.resume, progress=not args.no_progress)
    except KeyboardInterrupt:
        from lagda.learning.checkpoint import latest_epoch

        saved = latest_epoch(os.path.join(args.run_dir, "checkpoints"))
        state = ("no epoch was saved: rerun the command (with --resume it starts afresh)" if saved is None else
                 f"epoch {saved} is saved in {args.run_dir}: rerun the same command with --resume to continue")
        print(f"lagda train: interrupted: {state}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"run directory: {run_dir}")
    return 0


def _add_evaluate_parser(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="retrieval R@1/5/10 of a trained run on a dataset, or (--assimilation) "
                              "every assimilation score per method on tracks with known truth")
    p.add_argument("--model", default=None,
                   help="run directory written by `lagda train` (required without --assimilation)")
    p.add_argument("--data", default=None,
                   help="dataset file (.nc) with the run's modes and frequencies (retrieval mode)")
    p.add_argument("--split", default="test", help="name of the split in the metric keys (default: test)")
    p.add_argument("--library-size", type=int, default=None, help="use only the first N pairs")
    p.add_argument("--blocks", action="store_true",
                   help="average R@k over every disjoint library of --library-size consecutive pairs (e.g. 128: "
                        "the in-batch recall of a training batch) instead of the first one")
    p.add_argument("--batch-size", type=int, default=512, help="queries per batch")
    p.add_argument("--out", default=None, help="write the metrics / scores as JSON here")
    p.add_argument("--assimilation", action="store_true",
                   help="score assimilation methods on --tracks (needs the truth) instead of retrieval on --data")
    p.add_argument("--tracks", default=None, metavar="FILE", help="track file with true coefficients (--assimilation)")
    p.add_argument("--methods", nargs="+", default=["linear", "embed", "hybrid"], metavar="METHOD",
                   help="assimilation methods to score (--assimilation; default: linear embed hybrid)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=_run_evaluate)


def _run_evaluate(args) -> int:
    if args.assimilation:
        return _run_evaluate_assimilation(args)
    if args.model is None or args.data is None:
        raise ValueError("--model and --data are required (or pass --assimilation --tracks FILE)")
    from lagda.learning.evaluate import evaluate, format_table, write_metrics

    metrics = evaluate(args.model, args.data, split=args.split, library_size=args.library_size,
                       batch_size=args.batch_size, progress=not args.no_progress, blocks=args.blocks)
    print(format_table(metrics))
    if args.out:
        write_metrics(metrics, args.out)
    return 0


def _run_evaluate_assimilation(args) -> int:
    from lagda.assimilation.evaluation import (
        evaluate_assimilation,
        format_table,
        write_scores,
    )

    if args.data is not None or args.tracks is None:
        raise ValueError("--assimilation takes --tracks FILE (with the truth), not --data")
    if args.model is not None and not os.path.isdir(args.model):
        raise FileNotFoundError(f"no such model run directory: {args.model}")
    table = evaluate_assimilation(args.tracks, args.methods, run_dir=args.model,
                                  log=lambda line: print(f"lagda evaluate: {line}", file=sys.stderr))
    print(format_table(table))
    if args.out:
        write_scores(table, args.out)
    return 0



# ---------------------------------------------------------------- main


def _add_demo_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="map the shipped drifter example and check the map against drifters it was not made from "
                     "(under a minute on 2 cores); --twin: the model-unit twin experiment",
        description="Map the shipped drifter example (lagda example gdp_like: 8 drifters, hourly fixes over March "
                    "2025 near 40 W, 34 N) as `lagda map --withhold 0.25` does: daily maps of the velocity and its "
                    "std in m/s, 2 of the drifters left out. Writes OUT_DIR/map.nc and map.png (a day of the map, "
                    "its std beside it, the drifters' tracks) and prints the map's error against the withheld "
                    "drifters by distance to the nearest mapped drifter, beside a map of zero and a binned mean. "
                    "--twin runs the twin experiment instead: model-unit tracks of lagda's own flows assimilated "
                    "with several methods and scored against the known truth.")
    p.add_argument("--out-dir", default="lagda-demo", help="where the map, results and figures go (default: "
                                                          "lagda-demo)")
    p.add_argument("--twin", action="store_true",
                   help="the twin experiment: the shipped model-unit tracks (one drifter in each of 8 flows) "
                        "assimilated with several methods, scored against the known truth")
    twin = p.add_argument_group("the twin experiment (each of these implies --twin)")
    twin.add_argument("--model", default=None,
                      help="run directory (default: the shipped encoder of every regime, lagda/shipped/learned)")
    twin.add_argument("--tracks", default=None,
                      help="model-unit track file (default: the shipped example tracks, lagda example "
                           "example_tracks)")
    twin.add_argument("--methods", nargs="+", default=None, choices=list(ASSIM_METHODS),
                      help="assimilation methods to compare (default: linear embed hybrid)")
    twin.add_argument("--full", action="store_true",
                      help="from scratch: simulate the small data, train the cpu preset, evaluate, assimilate (a few "
                           "minutes on a CPU)")
    p.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    from lagda.demo import DEFAULT_METHODS, run_demo, run_twin

    if args.twin or args.full or args.model or args.tracks or args.methods:
        run_twin(args.out_dir, model=args.model, tracks=args.tracks, methods=tuple(args.methods or DEFAULT_METHODS),
                 full=args.full)
    else:
        run_demo(args.out_dir)
    return 0


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Returns the `lagda` parser with every subcommand (each with --debug).

    Parameters
    ----------
    argv : list of str, optional
        The words to be parsed: `lagda assimilate --method M --help` then lists M's settings only.

    Returns
    -------
    argparse.ArgumentParser
        Its parsed namespace holds `run`, the subcommand's function (args -> exit code).

    Examples
    --------
    >>> args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--members", "16"])
    >>> args.command, args.method, args.members
    ('assimilate', None, 16)
    """
    parser = argparse.ArgumentParser(prog="lagda", description="Lagrangian data assimilation by contrastive learning.")
    parser.add_argument("--version", action="version", version=f"lagda {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_simulate_parser(subparsers)
    _add_assimilate_parser(subparsers, _help_method(argv or []))
    _add_map_parser(subparsers)
    _add_export_parser(subparsers)
    _add_example_parser(subparsers)
    _add_train_parser(subparsers)
    _add_evaluate_parser(subparsers)
    _add_demo_parser(subparsers)
    for sub in subparsers.choices.values():
        sub.add_argument("--debug", action="store_true", help="on an error, show the full traceback")
    return parser


def _help_method(argv: list[str]) -> str | None:
    """Returns M of `lagda assimilate --method M --help`, whose settings that help lists, else None."""
    if len(argv) < 2 or argv[0] != "assimilate" or not {"-h", "--help"} & set(argv):
        return None
    for i, word in enumerate(argv[:-1]):
        if word == "--method" and argv[i + 1] in ASSIM_METHODS:
            return argv[i + 1]
    return None


def compile_cache_dir() -> str | None:
    """Returns the directory of JAX's persistent compilation cache for the `lagda` command, None when off.

    The cache is per user: JAX trusts what it holds.

    Returns
    -------
    str or None
        LAGDA_COMPILE_CACHE when set to a directory; None when it is "off" or when the user set
        JAX_COMPILATION_CACHE_DIR (left to JAX); else $XDG_CACHE_HOME/lagda/jax (default ~/.cache/lagda/jax).

    Examples
    --------
    >>> import os
    >>> saved = os.environ.get("LAGDA_COMPILE_CACHE")
    >>> os.environ["LAGDA_COMPILE_CACHE"] = "off"
    >>> compile_cache_dir() is None
    True
    >>> _ = os.environ.pop("LAGDA_COMPILE_CACHE") if saved is None else os.environ.update(LAGDA_COMPILE_CACHE=saved)
    """
    setting = os.environ.get("LAGDA_COMPILE_CACHE", "")
    if setting.lower() == "off" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return setting or os.path.join(base, "lagda", "jax")


def _enable_compile_cache() -> None:
    """Points JAX's persistent compilation cache at `compile_cache_dir()` (every program, however quick to
    compile: a run of `lagda assimilate` compiles dozens of small ones, most of its time on one field)."""
    path = compile_cache_dir()
    if path is None:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def main(argv: list[str] | None = None) -> int:
    """Runs `lagda` and returns its exit code.

    An error is one stderr line; with --debug its traceback follows. Compiled programs are kept in a per-user
    cache between runs (`compile_cache_dir`).

    Parameters
    ----------
    argv : list of str, optional
        The command line after `lagda` (default: sys.argv[1:]).

    Returns
    -------
    int
        0 success (also --help, --version), 1 an unexpected error (a bug), 2 bad input (ValueError,
        FileNotFoundError, OSError, or a usage error), 130 interrupted.

    Examples
    --------
    >>> main(["assimilate", "--tracks", "missing.nc", "--out", "r.nc"])
    2
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_ERROR
    args.argv = argv
    _enable_compile_cache()
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print(f"lagda {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, FileNotFoundError, OSError) as error:
        return _report(args, f"error: {error}", EXIT_ERROR)
    except Exception as error:  # a bug, not bad input: say so in one line, the traceback with --debug
        hint = "" if args.debug else " (rerun with --debug for the traceback)"
        return _report(args, f"unexpected error: {type(error).__name__}: {error}{hint}", EXIT_FAILURE)


def _report(args, message: str, code: int) -> int:
    """Prints the traceback of the error being handled (--debug), then one line; returns `code`."""
    if args.debug:
        traceback.print_exc(file=sys.stderr)
    print(f"lagda {args.command}: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
