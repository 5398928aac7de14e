"""What an assimilation of a track file is made of: `AssimilateSettings`, the options of `assimilate_file` and
`lagda assimilate` (as `MapSettings` holds those of `lagda map`)."""

from __future__ import annotations

import dataclasses
import os

from lagda.arguments import given
from lagda.assimilation.methods.config import MethodConfig
from lagda.assimilation.methods.registry import check_options


@dataclasses.dataclass(frozen=True)
class AssimilateSettings:
    """The options of an assimilation of a track file (`assimilate_file`), checked once when made.

    What a call writes and draws (the output file, `overwrite`, the figure and its day) are `assimilate_file`'s
    own arguments; everything that decides the result is here.

    Attributes
    ----------
    method : str, optional
        A key of lagda.assimilation.METHODS. None: `default_method` chooses from the tracks (linear in the circular
        basis for physical tracks without a lagda model; else hybrid with `run_dir` or the shipped encoder), and
        says so in the notes.
    config : MethodConfig or dict, optional
        The method's settings: its config (`METHODS[method].Config`, e.g. LinearConfig(members=16)), or a dict of
        that config's field names, checked once the method is chosen (the command line's way; the deprecated names
        of CHANGELOG.md are accepted with a note). None: the method's defaults.
    run_dir : str or path-like, optional
        A trained run (lagda train): needed by the learned methods (None: the shipped encoder); for the others it
        supplies the modes and prior.
    n_grid : int
        Grid points per side of the result's psi, u, v.
    seed : int
        Seed of the method's randomness.
    dt : float, optional
        RK4 step in model time units (default: the run's, else the file's dt attribute, else guessed; a note).
    box : (float, float, float, float), optional
        (west, east, south, north) of physical tracks in degrees (metres for projected x, y); default: the file's,
        else inferred (a note).
    time_scale : float, optional
        Seconds per model time unit for physical tracks (default: the file's, else inferred; a note).
    basis : {"circular", "rectangular"}, optional
        Assimilate into this chosen basis instead of the file's or run's modes: Fourier modes up to `k_max`
        (circular: 0 < |k| <= k_max; rectangular: max(|k1|, |k2|) <= k_max) times Legendre polynomials of degree
        0..`degree` in time over the tracks' window (lagda.assimilation.methods.basis); `linear` then models the
        velocity the basis leaves out as an OU error along each track (its representation "auto").
    k_max : float
        With a basis: the largest wavenumber, in cycles per domain.
    degree : int
        With a basis: the largest Legendre degree in time.
    climatology : str or path-like, optional
        With a basis: a QG truth file of other flows (lagda simulate --flow qg) giving the prior spectrum and the
        variance of the velocity the basis leaves out (else the default spectrum shape at the tracks' RMS speed).
    times : int or str, optional
        The result's grid times (fields.result_times): None (daily for physical tracks, else 11 over the window), a
        count, or a step such as "6h" for physical tracks.
    keep_undrogued : bool
        Keep fixes a GDP file marks undrogued (drogue_status 0; default: left out, counted in a note).
    low_pass : bool
        For longitude/latitude tracks with dates: average each drifter's positions over its local inertial period
        and two M2 tidal periods first (lagda.io.formats.read_tracks), as `lagda map` does; a note says so.
    local_gp : bool
        For `linear` in a chosen basis on physical tracks (the ocean path; longitude/latitude or projected metres):
        add the local Gaussian process of what the basis leaves out at the drifters, as `lagda map` does per tile
        (lagda.assimilation.local_gp.box_local_gp): u, v follow the drifters' velocities where they are and u_total_std,
        v_total_std include it; psi stays the basis field's. A note says what was fitted.
    background : str or path-like, optional
        A gridded product on (time, lat, lon) taken as the prior mean (lagda.io.background: CF velocities, or sea
        surface height and its geostrophic velocity), for `linear` in a chosen basis on longitude/latitude tracks
        (the ocean path, the default for them): the drifters' velocities less the background's are fitted, the
        background on the result's grid is added back to u, v, and far from the drifters u, v are the background
        (lagda.assimilation.background; notes say what psi and the std hold). None: a prior mean of zero.

    Raises
    ------
    ValueError
        One line naming the value refused as the user gave it (`n_grid=1` in Python, `--n-grid 1` on the command
        line: lagda.arguments): `n_grid` below 2; with `method` given, an unknown method, an option it does not
        take, a bad value or another method's config (lagda.assimilation.methods.registry.check_options); a
        background with a method other than linear, or with a climatology. What depends on the tracks (a
        climatology without a basis when the method is chosen from them, a method that cannot use a chosen basis,
        a background on tracks that are not longitude/latitude or without a chosen basis) and the background file
        itself are checked by `assimilate_file` once they are read, before the method runs.

    Examples
    --------
    >>> from lagda.assimilation.methods.config import LinearConfig
    >>> settings = AssimilateSettings("linear", LinearConfig(members=16), n_grid=8)
    >>> settings.method, settings.config.members, settings.k_max
    ('linear', 16, 12)
    >>> AssimilateSettings(n_grid=1)
    Traceback (most recent call last):
    ...
    ValueError: n_grid=1: must be at least 2
    """

    method: str | None = None
    config: MethodConfig | dict | None = None
    run_dir: str | None = None
    n_grid: int = 32
    seed: int = 0
    dt: float | None = None
    box: tuple[float, float, float, float] | None = None
    time_scale: float | None = None
    basis: str | None = None
    k_max: float = 12
    degree: int = 3
    climatology: str | None = None
    times: int | str | None = None
    keep_undrogued: bool = False
    low_pass: bool = True
    local_gp: bool = True
    background: str | None = None

    def __post_init__(self):
        if self.n_grid < 2:
            raise ValueError(f"{given('n_grid', self.n_grid)}: must be at least 2")
        if self.method is not None:
            check_options(self.method, self.config)  # before the file is read
        if self.background is not None:
            object.__setattr__(self, "background", os.fspath(self.background))  # frozen: set once, here
            check_background(self.background, self.method, self.climatology)


def check_background(background: str, method: str | None, climatology) -> None:
    """Checks that a background (the prior mean) can go with the chosen method and climatology, before any work.

    Raises
    ------
    ValueError
        One line naming the options as the user gave them: a method other than `linear` (the one whose fit takes
        the departure from a prior mean), or a climatology (its prior is of the whole flow, not of the departure).
    """
    if method is not None and method != "linear":
        raise ValueError(f"{given('background', background)}: the prior mean of the linear method in a chosen basis "
                         f"(the default on longitude/latitude drifters), not of {given('method', method)}")
    if climatology is not None:
        raise ValueError(f"{given('background', background)} with {given('climatology', climatology)}: the "
                         "climatology's prior is of the whole flow, not of its departure from the background; give "
                         "one of them")
