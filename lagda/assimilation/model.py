"""The model tracks are assimilated into: `FlowModel`, and how it is found for a track file.

A coefficient vector is handled as the real vector x = (Re c, Im c) in R^{2K}, the fixed Eulerian
embedding g_u (docs/design/learning.md); the prior is x ~ N(0, diag(a_k^2 / 2, a_k^2 / 2)).

`model_settings` finds the model of tracks: a trained run's modes and prior, else the track file's
modes with the generator's default prior (physical tracks that state none: the steady model); every
setting not given by a run is a note. A chosen basis is `lagda.assimilation.methods.basis.basis_model`.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from lagda.io.tracks import Tracks, off_steps
from lagda.report import duration


@dataclasses.dataclass(frozen=True)
class FlowModel:
    """The model the tracks are assimilated into: modes, frequencies, prior, RK4 step, time basis.

    Attributes
    ----------
    k1, k2
        int `(mode,)` wavevectors
    omega
        float64 `(mode,)` frequencies.
    scale
        float64 `(mode,)` prior std a_k = sqrt(E|c_k|^2).
    dt
        RK4 step of the forward model (model time).
    time
        `simulate.flow.TimeBasis` (a Legendre degree per mode over a window), or None: f_k = 1.
    unresolved
        (variance per component, Lagrangian time scale) of the velocity the basis leaves out
        (from a climatology), or None: `linear`'s representation error, estimated when None.
    search
        a chosen basis without a climatology: `methods.prior_search.PriorSearch`, the prior's spectrum
        and the representation error that `linear` chooses from the tracks; None: the prior is `scale`.
    notes
        how each setting was found when no trained run gave it, one line each.
    background
        the prior mean velocity the field in the basis departs from, or None (zero): called at model positions
        `(n, 2)` and times `(n,)`, it returns `(n, 2)` in model units (lagda.assimilation.background.BackgroundFlow,
        a product given by `lagda assimilate --background`). Only `linear` with its error model along the tracks
        takes one; the other methods refuse a model with one.
    """

    k1: np.ndarray
    k2: np.ndarray
    omega: np.ndarray
    scale: np.ndarray
    dt: float
    time: object | None = None
    unresolved: tuple[float, float] | None = None
    notes: tuple[str, ...] = ()
    search: object | None = None
    background: object | None = None

    @property
    def modes(self) -> tuple:
        """Returns (k1, k2, omega, time): the arguments of simulate.flow's functions after the coefficients."""
        return self.k1, self.k2, self.omega, self.time

    @property
    def n_modes(self) -> int:
        """Number of Fourier modes K."""
        return len(self.k1)

    @property
    def prior_var(self) -> np.ndarray:
        """Returns the prior variances of x = (Re c, Im c), `(2K,)`: a_k^2 / 2 twice."""
        half = np.asarray(self.scale, np.float64) ** 2 / 2.0
        return np.concatenate([half, half])


def flow_model(k1, k2, omega, scale, dt: float, time=None, unresolved=None, notes=(), search=None) -> FlowModel:
    """Returns a `FlowModel` with int32 modes and float64 frequencies and prior (any array-likes in)."""
    return FlowModel(np.asarray(k1).astype(np.int32), np.asarray(k2).astype(np.int32), np.asarray(omega, np.float64),
                     np.asarray(scale, np.float64), float(dt), time, unresolved, tuple(notes), search)


def to_real(coef) -> np.ndarray:
    """Returns x = (Re c, Im c), `(..., 2K)` for complex `(..., mode)`."""
    return np.concatenate([np.real(coef), np.imag(coef)], axis=-1)


def to_complex(x):
    """Returns c = x[:K] + i x[K:], complex `(..., mode)` for real `(..., 2K)` (jax or numpy)."""
    k = x.shape[-1] // 2
    return x[..., :k] + 1j * x[..., k:]


def model_settings(tracks: Tracks | None, run_dir=None, dt: float | None = None) -> FlowModel:
    """Returns the model of `tracks`: modes, prior and RK4 step from the run's dataset meta, else from the tracks.

    Without a run the modes and frequencies are the track file's (for physical tracks their phases
    count from the file's time origin, a note); physical tracks (with a mapping) that state none get
    the steady model: the generator's default mode set with all omega_k = 0 (a time origin of real
    tracks is arbitrary, so frequencies not stated by the file would have no phase). The prior is the
    generator's default spectrum, and dt is, in order: `dt` (given), the track file's `dt` attribute
    (`Tracks.dt`, e.g. a lagda dataset), else the smallest observation spacing divided into steps no
    longer than the generator's default dt (an RK4 step as long as a sparse spacing would be inaccurate
    and would make sparse tracks look dense). Each guess is a note.

    Parameters
    ----------
    tracks
        the observed tracks (`lagda.io.Tracks`); may be None when `run_dir` is given.
    run_dir
        a trained run directory (`lagda train --run-dir`), whose dataset meta gives the modes,
        frequencies, prior and dt; None: they come from the tracks, as above.
    dt
        RK4 step in model time units, given by the user (overrides the run's and the file's); None: found.

    Returns
    -------
    FlowModel
        The `FlowModel`: `k1`, `k2`, `omega`, `scale` `(mode,)`, `dt`, and `notes` (one line per guess).

    Raises
    ------
    ValueError
        without a run, if model-unit tracks do not state their modes and frequencies;
        with a run that has frequencies, for physical tracks.

    Examples
    --------
    >>> from lagda.examples import shipped
    >>> from lagda.io import read_tracks
    >>> model = model_settings(read_tracks(shipped("example_tracks.nc")))  # no run: from the file
    >>> len(model.k1), round(model.dt, 9)
    (49, 0.0001)
    >>> model.notes[1].startswith('time step dt 0.0001 for the methods that integrate')
    True
    >>> model_settings(None, shipped("model"), dt=5e-5).notes  # a run's modes, another dt
    ("dt 5e-05 given (the model run's is 0.0001)",)
    """
    from simulate.config import SimConfig
    from simulate.prior import spectrum

    notes = []
    physical = tracks is not None and tracks.mapping is not None
    if run_dir is not None:
        from lagda.learning.model import read_run_files

        _, meta = read_run_files(run_dir)  # the modes and prior only: no checkpoint restore
        if physical and np.any(np.asarray(meta["omega"], np.float64) != 0):
            raise ValueError(f"physical tracks are assimilated with the steady model, but the run {os.fspath(run_dir)} "
                             "was trained on flows with frequencies: use --method linear --basis circular (for "
                             "ocean drifters: a flow lagda did not make), --method linear, var or enkf (lagda's "
                             "steady model), or a run trained with --steady")
        times = np.asarray(meta["time"], np.float64)
        run_dt = float(meta.get("attrs", {}).get("dt", times[1] - times[0]))
        if dt is not None and not np.isclose(dt, run_dt, rtol=1e-9):
            notes.append(f"dt {dt:g} given (the model run's is {run_dt:g})")
        return flow_model(meta["k1"], meta["k2"], meta["omega"], meta["prior_scale"], run_dt if dt is None else dt,
                          notes=notes)
    base = SimConfig()  # prior of the generator's defaults: the file carries modes, not the prior
    if physical and (tracks.k1 is None or tracks.omega is None):
        from simulate.flow import rectangular_modes

        k1, k2 = rectangular_modes((base.k1_min, base.k1_max), (base.k2_min, base.k2_max))
        tracks = dataclasses.replace(tracks, k1=np.asarray(k1), k2=np.asarray(k2), omega=np.zeros(len(k1)))
        notes.append(f"flow: lagda's own steady model ({len(k1)} modes), the file stating none; for ocean drifters "
                     "--basis circular fits better (this model fitted to every fix can do worse than zero)")
    if tracks is None or tracks.k1 is None or tracks.omega is None:
        raise ValueError("the track file does not state the modes and frequencies: pass a trained model (--model RUN)")
    if physical and np.any(np.asarray(tracks.omega) != 0):
        from lagda.io.physical import iso_time

        notes.append("frequencies omega_k from the track file: their phases count from its time origin "
                     f"{iso_time(tracks.mapping.time_origin)}")
    scale = spectrum(tracks.k1, tracks.k2, base.spectrum_exponent, base.rms_speed)
    speed = f"{base.rms_speed:g}"
    if physical:
        speed = f"{base.rms_speed * np.sqrt(np.prod(tracks.mapping.lengths_m)) / tracks.mapping.time_scale_s:.3g} m/s"
    notes.append(f"prior: the generator's default spectrum (exponent {base.spectrum_exponent:g}) at an RMS speed of "
                 f"{speed}, the track file stating no prior (--model RUN: a trained run's)")
    dt, dt_note = resolve_dt(tracks, dt)
    return flow_model(tracks.k1, tracks.k2, tracks.omega, scale, dt, notes=notes + dt_note)


GUESS_MAX_DT = 1e-4  # longest guessed RK4 step: the small preset's, accurate to ~1e-10 on the default prior


def resolve_dt(tracks: Tracks, dt: float | None) -> tuple[float, list]:
    """Returns (dt, notes): `dt` given, else the file's dt attribute (`Tracks.dt`), else guessed from the times."""
    if dt is not None:
        return float(dt), []
    if tracks.dt is not None:
        return float(tracks.dt), [f"dt {float(tracks.dt):g} from the track file's dt attribute"]
    guess = _guess_dt(tracks.times, GUESS_MAX_DT)
    finite = np.asarray(tracks.times, np.float64)[np.isfinite(tracks.times)]
    spacing = _guess_dt(tracks.times, np.inf)  # the smallest observation spacing
    if tracks.mapping is not None and np.any(off_steps(finite, guess)):
        second = 1.0 / tracks.mapping.time_scale_s
        common = _common_step(tracks.times, second)
        if common is not None:
            guess = common / max(1, int(np.ceil(common / GUESS_MAX_DT * (1 - 1e-9))))
            steps = float(np.nanmax(tracks.times)) / guess
            return guess, [f"time step {duration(guess / second)} for {INTEGRATING}: the greatest common step of the "
                           f"fixes' times, {duration(common / second)}, in equal steps, {steps:.3g} over the window "
                           "(--dt sets it)"]
    if tracks.mapping is not None:
        second = 1.0 / tracks.mapping.time_scale_s
        return guess, [f"time step {duration(guess / second)} for {INTEGRATING}: the fixes' spacing, "
                       f"{duration(spacing / second)}, in equal steps (--dt sets it)"]
    return guess, [f"time step dt {guess:g} for {INTEGRATING}: the smallest observation spacing, {spacing:g}, in "
                   f"equal steps of at most {GUESS_MAX_DT:g} (model time; --dt sets it)"]


INTEGRATING = "the methods that integrate the flow (var, enkf, sample, hybrid)"


def _guess_dt(times, max_dt: float) -> float:
    """Returns the smallest observation spacing of `times` divided into equal steps of at most max_dt."""
    steps = np.diff(np.unique(np.round(times[np.isfinite(times)], 12)))
    if not len(steps):
        return max_dt
    spacing = float(np.min(steps))
    return spacing / max(1, int(np.ceil(spacing / max_dt * (1 - 1e-9))))


def _common_step(times, second: float) -> float | None:
    """Returns the greatest common step of `times` (model units) in whole seconds, else whole milliseconds (a model
    time), or None when they are not whole milliseconds from the time origin; `second` is 1 s in model time."""
    t = np.asarray(times, np.float64)[np.isfinite(times)]
    for tick in (second, second / 1000.0):
        ticks = t / tick
        whole = np.round(ticks)
        if np.all(np.abs(ticks - whole) < 1e-3):
            step = int(np.gcd.reduce(np.abs(whole).astype(np.int64)))
            return step * tick if step > 0 else None
    return None
