"""A flow basis chosen for the tracks: spatial Fourier modes (circular or rectangular) times Legendre
polynomials in time over the tracks' window, with its prior from a truth climatology.

For flows that are not lagda's own (no known frequencies, more scales): psi(z, t) = Re sum_{k, p}
c_kp L_p(s) exp(2 pi i k.z), s = 2 t / t_end - 1 over the window [0, t_end] of the tracks
(simulate.flow.in_time), plus the uniform current (U_p, V_p) L_p(s) that every box of the ocean has
(simulate.flow's current modes, first in the model). The velocity stays linear in the coefficients,
so every classical method
applies. The prior std of c_kp and the variance of the velocity the basis leaves out (the linear
method's representation error) come from a climatology: a QG truth file of other flows of the same
model (simulate.qg.projection: the truth's least-squares fit in the basis, pooled over wavenumber
shells and degrees). Without one the linear method chooses the prior's spectrum and the representation
error from the tracks (methods.prior_search); the other methods take the generator's spectrum shape at
the tracks' RMS speed (the same energy in every degree); both are notes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.model import FlowModel, flow_model, resolve_dt, to_real
from lagda.io.tracks import Tracks
from lagda.report import counted
from simulate.flow import circular_modes, in_time, rectangular_modes

BASES = ("circular", "rectangular")
CURRENT_FLOOR = 0.1  # the current's prior std per degree is at least this fraction of the climatology's RMS speed


def spatial_modes(basis: str, k_max: float):
    """Returns the spatial modes `(k1, k2)`: "circular" 0 < |k| <= k_max (one of each +-k), or
    "rectangular" max(|k1|, |k2|) <= k_max (both signs, k = 0 included, lagda's default layout).

    Raises
    ------
    ValueError
        for an unknown basis or k_max < 1.
    """
    if basis not in BASES:
        raise ValueError(f"unknown basis {basis!r}; valid: {', '.join(BASES)}")
    if not k_max >= 1:
        raise ValueError(f"k_max must be >= 1, got {k_max}")
    if basis == "circular":
        return circular_modes(k_max)
    m = int(k_max)
    return rectangular_modes((-m, m), (-m, m))


def adopt_climatology_mapping(tracks: Tracks, climatology: Tracks) -> tuple[Tracks, list[str]]:
    """Returns (the tracks in the climatology's mapping where theirs was inferred, notes).

    A climatology's prior and representation error are per box length and model time unit of its own
    mapping, so tracks whose box or time scale was inferred (not given, not in their file) take the
    climatology's: its time scale, and its box when the tracks lie inside it (the same model domain), else
    a box of its side lengths centred on the tracks. A mapping the user set is kept (and checked later).
    """
    mine, theirs = tracks.mapping, climatology.mapping
    if mine is None or theirs is None or not {"box", "time_scale"} & set(mine.inferred):
        return tracks, []
    from lagda.io.physical import box_of_size
    from lagda.io.tracks import remap_tracks

    box, scale, inferred = mine.box, mine.time_scale_s, set(mine.inferred)
    if "box" in inferred:
        fixes = np.stack(mine.from_model(tracks.positions[..., 0], tracks.positions[..., 1]), axis=-1)
        west, east, south, north = theirs.box
        inside = theirs.coordinates == mine.coordinates and np.all(
            (np.nan_to_num(fixes[..., 0], nan=west) >= west) & (np.nan_to_num(fixes[..., 0], nan=west) <= east)
            & (np.nan_to_num(fixes[..., 1], nan=south) >= south) & (np.nan_to_num(fixes[..., 1], nan=south) <= north))
        box = theirs.box if inside else box_of_size(mine.centre, theirs.lengths_m, mine.coordinates)
    if "time_scale" in inferred:
        scale = theirs.time_scale_s
    adopted = dataclasses.replace(mine, box=tuple(float(b) for b in box), time_scale_s=float(scale),
                                  inferred=tuple(sorted(inferred - {"box", "time_scale"})))
    note = ("mapping adopted from the climatology (the tracks' "
            f"{' and '.join(sorted({'box', 'time_scale'} & inferred))} "
            f"were inferred): {adopted.describe()}")
    remapped = remap_tracks(tracks, dataclasses.replace(adopted, notes=adopted.notes + (note,)))
    return dataclasses.replace(remapped, notes=remapped.notes + (note,)), [note]


def window_k_max(tracks: Tracks, k_max: float) -> float:
    """Returns k_max in the box: k_max itself, or for an inferred box k_max x (1 + 2 BOX_MARGIN).

    An inferred box is a window into a larger ocean, the tracks' extent plus a margin on each side
    (lagda.io.physical): the periodic basis extends the flow across the margin, where no drifter
    constrains it, so the flow need not repeat at the window's edges. k_max then sets the resolution over
    the tracks' extent, as it does in a box the user gives (the basis's note says both).
    """
    if tracks.mapping is None or "box" not in tracks.mapping.inferred:
        return k_max
    from lagda.io.physical import BOX_MARGIN

    return k_max * (1 + 2 * BOX_MARGIN)


def basis_note(tracks: Tracks, basis: str, given: float, k_max: float, degree: int, t_end: float, n_modes: int) -> str:
    """Returns the one line on a chosen basis: for physical tracks its shortest wavelength in km (box side / k_max)
    and its window in days, else in cycles per box length and model time; the options that set them.

    Parameters
    ----------
    given
        k_max as the user gave it
    k_max
        in the box (`window_k_max`)
    t_end
        the window's end, model time
    n_modes
        the basis's modes (space x time).
    """
    how = "" if basis == "circular" else " along each axis (--basis rectangular)"
    scaled = f" over the drifters, {k_max:.3g} over the box" if k_max != given else ""
    if tracks.mapping is None:
        return (f"flow: a uniform current and waves of up to {k_max:g} cycles per box length{how}, each of degree "
                f"0-{degree} in time over the window [0, {t_end:.6g}] (model time; --k-max, --degree): {n_modes:,} "
                "modes")
    wavelength_km = np.sqrt(np.prod(tracks.mapping.lengths_m)) / k_max / 1e3
    days = t_end * tracks.mapping.time_scale_s / 86400.0
    return (f"flow: a uniform current and waves down to {wavelength_km:.2g} km{how}, of degree 0-{degree} in "
            f"time over {days:.4g} days (--k-max {given:g}{scaled}; --degree): {n_modes:,} modes")


def basis_model(tracks: Tracks, basis: str, k_max: float, degree: int, climatology: Tracks | None = None,
                dt: float | None = None, window: float | None = None) -> FlowModel:
    """Returns the `FlowModel` of `basis` with k_max and Legendre degree over the tracks' window.

    Parameters
    ----------
    tracks
        lagda.io.tracks.Tracks (model units; the mapping of physical tracks applied).
    climatology
        the tracks of a QG truth file (lagda simulate --flow qg, read by read_tracks: its gridded
        truth in `gridded_truth`) of other flows, or None.
    dt
        RK4 step (var, enkf), default the file's dt attribute, else guessed from the times (a note).
    window
        the end of the time basis's window [0, window] in model time (default: the tracks' last time).

    Raises
    ------
    ValueError
        for a bad basis, k_max or degree, tracks without a time after 0, or a
        climatology in another mapping (box or time scale) than the tracks.
    """
    from simulate.qg.projection import with_current

    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    given, k_max = k_max, window_k_max(tracks, k_max)
    k1, k2 = spatial_modes(basis, k_max)
    t_end = float(np.nanmax(tracks.times)) if window is None else float(window)
    if not t_end > 0:
        raise ValueError("the tracks have no time after 0: no window for the time basis")
    e1, e2, omega, time = in_time(*with_current(k1, k2)[:2], np.zeros(len(k1) + 1), degree, 0.0, t_end,
                                  with_current(k1, k2)[2])
    notes = [basis_note(tracks, basis, given, k_max, degree, t_end, len(e1))]
    unresolved, search = None, None
    if climatology is None:
        scale, note = _track_prior(tracks, k1, k2, degree)
        search, search_note = _prior_search(tracks, t_end)
        notes += [search_note, note]
    else:
        scale, rep_var, rep_time, clim_notes = _climatology(climatology, tracks, k1, k2, degree, t_end)
        unresolved, notes = (rep_var, rep_time), notes + clim_notes
    dt, dt_notes = resolve_dt(tracks, dt)
    return flow_model(e1, e2, omega, scale, dt, time, unresolved, notes + dt_notes, search)


def _phase_shifted(cov, phase) -> np.ndarray:
    """Returns the covariance of x' = (Re c', Im c') for c' = c exp(i phase): M cov M^T with M = [[C, -S], [S, C]],
    C, S = diag(cos, sin of phase); cov `(2 mode, 2 mode)`, phase `(mode,)`."""
    cos, sin = np.cos(phase), np.sin(phase)

    def rows(a):  # M a
        n = len(cos)
        re, im = a[:n], a[n:]
        return np.concatenate([cos[:, None] * re - sin[:, None] * im, sin[:, None] * re + cos[:, None] * im])

    return rows(rows(np.asarray(cov, np.float64)).T).T


def _prior_search(tracks: Tracks, t_end: float):
    """Returns (PriorSearch, note): the linear method's search of the prior and error model, its grids in days
    (the mapping's, else a 60-day window's: model-unit tracks have no physical time)."""
    from lagda.assimilation.methods.prior_search import PriorSearch

    if tracks.mapping is not None:
        day, unit = 86400.0 / tracks.mapping.time_scale_s, "days"
    else:
        day, unit = t_end / 60.0, "sixtieths of the window (model-unit tracks: no physical day)"
    search = PriorSearch(day)
    taus = f"{min(search.taus_days):g}-{max(search.taus_days):g}"
    return search, (
        f"linear: its spectrum fitted to the drifters; the current the flow leaves out ({taus} {unit}, "
        f"{100 * min(search.var_fractions):g}-{100 * max(search.var_fractions):g}% of the mean square velocity) by "
        f"{search.folds}-fold cross-validation over drifters")


def _track_prior(tracks, k1, k2, degree: int):
    """Returns (prior std `(mode,)`, note): the generator's spectrum shape at the tracks' RMS speed.

    The RMS of the tracks' lag-1 difference velocities sets the amplitude (lagda's default of 10
    model units is for its own flows, and a physical mapping's unit can be anything); each degree p
    gets the share (2p + 1) / (P + 1) of a spatial mode's power, so that, as mean L_p^2 = 1 / (2p + 1)
    over the window, every degree carries the same expected kinetic energy and the total is the
    tracks' mean square speed.
    """
    from lagda.assimilation.methods.track_data import finite_differences
    from simulate.config import SimConfig
    from simulate.prior import spectrum

    vel = finite_differences(tracks.positions, tracks.times, None, 1)[2]
    rms = float(np.sqrt(np.mean(np.sum(vel**2, axis=-1)))) if len(vel) else SimConfig().rms_speed
    exponent = SimConfig().spectrum_exponent
    share = np.sqrt((2 * np.arange(degree + 1) + 1) / (degree + 1))
    scale = (spectrum(k1, k2, exponent, rms)[:, None] * share[None, :]).ravel()
    speed = (f"{rms * np.sqrt(np.prod(tracks.mapping.lengths_m)) / tracks.mapping.time_scale_s:.3g} m/s"
             if tracks.mapping is not None else f"{rms:.4g} (model units)")
    return np.concatenate([np.full(degree + 1, rms), scale]), (
        f"prior of the other methods: the spectrum of lagda's own flows (exponent {exponent:g}) at the drifters' RMS "
        f"speed, {speed}, equal energy at every degree (--climatology: from a model run)")


def _climatology(clim: Tracks, tracks: Tracks, k1, k2, degree: int, t_end: float):
    """Returns (prior scale `(mode,)`, unresolved variance, its time scale, notes) from a QG truth file.

    The variance and time scale are those of the velocity the basis leaves out along the file's own
    drifters: their lag-1 difference velocities less the truth's fit in the basis there, an OU
    process fitted by methods.representation.ou_time_scale (the drifters see the unresolved scales
    in their own, Lagrangian, frame: neither the Eulerian variance nor its decorrelation time).
    """
    from simulate.qg.projection import grid_holds, top_wavenumber, truth_in_basis

    ds = clim.gridded_truth
    if ds is None:
        raise ValueError("the climatology is not a QG truth file (lagda simulate --flow qg): "
                         "it has no gridded truth psi")
    n = int(ds.attrs["qg_nx"])
    if not grid_holds(k1, k2, n):
        raise ValueError(f"the climatology's {n}^2 grid resolves |k| < {n / 2:g}, the basis reaches |k| = "
                         f"{top_wavenumber(k1, k2)}: give --k-max below {n / 2:g} or a climatology on a finer grid")
    scale_s, length = float(ds.attrs["lagda_mapping_time_scale_s"]), float(ds.attrs["qg_L"])
    if tracks.mapping is not None:
        lx, ly = tracks.mapping.lengths_m
        if not (np.isclose(lx, length) and np.isclose(ly, length) and np.isclose(tracks.mapping.time_scale_s, scale_s)):
            raise ValueError(f"the climatology maps a {length:g} m box with {scale_s:g} s per model time unit, "
                             f"the tracks {lx:g} x {ly:g} m with {tracks.mapping.time_scale_s:g} s")
    truth = truth_in_basis(ds, k1, k2, degree, current=True)
    scale, rms = truth_prior(truth, degree)
    rep_var, rep_time = _along_track_residual(clim, truth)
    notes = [f"prior: the climatology's {counted(truth['coef'].shape[0], 'flow')}: mean power of their truth's "
             f"coefficients per wavenumber shell and degree (the current's at least {CURRENT_FLOOR:g} "
             "of their RMS speed "
             f"{rms:.4g}); the basis leaves out {np.mean(truth['limit']):.3f} of its "
             f"velocity (relative L2); along its drifters that velocity has std {np.sqrt(rep_var):.4g} per component "
             f"and time scale {rep_time:.4g} (model units): the representation error's"]
    window = float(truth["times"][-1])
    if not np.isclose(window, t_end, rtol=0.01):
        notes.append(f"the climatology's window ({window:.6g} model time) differs from the tracks' ({t_end:.6g}): "
                     "its power per degree is for its own window")
    return scale, rep_var, rep_time, notes


def truth_prior(truth: dict, degree: int) -> tuple[np.ndarray, float]:
    """Returns (prior std `(mode,)`, RMS speed) of flows' truth in a basis (simulate.qg.projection.truth_in_basis with
    the current): their power per wavenumber shell and degree, the current's (their background flow) floored at
    CURRENT_FLOOR of their RMS speed, since a few flows are few samples of a current that may vary."""
    from simulate.qg.projection import climatology_prior

    scale = climatology_prior(truth["coef"], truth["k1"], truth["k2"], degree)
    rms = float(np.sqrt(np.mean(truth["u"] ** 2 + truth["v"] ** 2)))
    scale[: degree + 1] = np.maximum(scale[: degree + 1], CURRENT_FLOOR * rms)
    return scale, rms


def _along_track_residual(clim: Tracks, truth: dict) -> tuple[float, float]:
    """Returns (variance, time scale) of the climatology drifters' velocity less the truth's fit in the basis."""
    from lagda.assimilation.methods.config import LinearConfig
    from lagda.assimilation.methods.linear import track_differences, track_residuals
    from lagda.assimilation.methods.representation import ou_time_scale

    k1, k2 = truth["k1"], truth["k2"]
    model = flow_model(k1, k2, np.zeros(len(k1)), np.ones(len(k1)), 1.0, truth["time_basis"])  # only G is used
    residuals, times, track = [], [], []
    for f in range(truth["coef"].shape[0]):  # the truth's flows, the file's first ones
        sub = clim.for_field(f)
        points, t, vel, _, _, _, ids = track_differences(sub.positions, sub.times, None, LinearConfig(fd_order=2),
                                                         {"lag": 1, "sparse": False})
        residuals.append(track_residuals(model, points, t, vel, ids, to_real(truth["coef"][f])))
        times.append(t)
        track.append(f * 100_000 + ids)
    return ou_time_scale(np.concatenate(residuals), np.concatenate(times), np.concatenate(track))


def qg_scores(tracks: Tracks, posterior, model: FlowModel) -> dict:
    """Returns the velocity errors and band coverages of a Posterior `(field, member, mode)` against the QG truth
    the tracks carry, or {}.

    Field f is the file's flow f. Over the truth grid, truth times and fields: "velocity_error_vs_truth" (relative
    L2 of the posterior-mean velocity) against the full gridded truth, "velocity_error_vs_projection" against the
    truth's least-squares fit in the basis, and "projection_limit", that fit's own error (no estimate in the basis
    can do better); "velocity_coverage_vs_truth" and "velocity_coverage_vs_projection", the fraction of the truth's
    (and of its fit's) grid velocities inside the posterior mean +- 1.96 std (the bands of the result's u_std,
    v_std: the field in the basis, without the velocity it leaves out); where the posterior's fields record
    `linear`'s representation_std r (the std per component of the velocity the basis leaves out),
    "velocity_coverage_vs_truth_with_unresolved", that of the bands mean +- 1.96 sqrt(std^2 + r^2) (the result's
    u_total_std, v_total_std: fields.total_std), the predictive bands of the full velocity. A basis finer than
    the truth's grid (|k1| or |k2| >= n/2 on its n^2 grid) has no fit there: the scores against the truth only,
    and "projection_note" says why. {} for tracks without a gridded truth (`Tracks.gridded_truth`).

    Parameters
    ----------
    posterior
        lagda.assimilation.posterior.Posterior in the model's modes.
    model
        the chosen basis (its modes: each spatial mode repeated for p = 0..degree, and the TimeBasis).
    """
    from lagda.assimilation.fields import grid_posterior, total_std
    from lagda.assimilation.posterior import Posterior
    from lagda.assimilation.scores import band_coverage
    from simulate.qg.projection import (
        at_cell_centres,
        grid_holds,
        gridded_truth,
        projection_limit,
        top_wavenumber,
        truth_in_basis,
    )

    ds, time = tracks.gridded_truth, model.time
    if ds is None or time is None:
        return {}
    degree = int(np.max(time.degree))
    current = time.current is not None  # the uniform current comes first (basis_model)
    k1, k2 = model.k1[:: degree + 1][int(current):], model.k2[:: degree + 1][int(current):]
    flows, n = list(range(posterior.n_field)), int(ds.attrs["qg_nx"])
    fits = grid_holds(k1, k2, n)  # a fit in the basis needs its modes below the truth grid's Nyquist wavenumber
    if fits:
        truth = truth_in_basis(ds, k1, k2, degree, flows=flows, current=current)
    else:
        truth = dict(zip(("psi", "u", "v", "times"), gridded_truth(ds, flows)))
    centred = Posterior(at_cell_centres(posterior.samples, model.k1, model.k2, n), posterior.weights, posterior.method,
                        cov=None if posterior.cov is None else np.stack([
                            _phase_shifted(c, np.pi * (model.k1 + model.k2) / n) for c in posterior.cov]))
    grid = grid_posterior(centred, model.k1, model.k2, model.omega, truth["times"], n, time=time)
    u, v = grid["u_mean"], grid["v_mean"]
    # projection_limit: relative L2 against the first pair
    scores = {"velocity_error_vs_truth": projection_limit(truth["u"], truth["v"], u, v),
              "velocity_coverage_vs_truth": float(np.mean(band_coverage(truth["u"], truth["v"], grid)))}
    total = total_std(grid, posterior)  # linear's error model of the velocity the basis leaves out, if any
    if total:
        wide = grid | {f"{c}_std": total[f"{c}_total_std"] for c in ("u", "v")}
        scores["velocity_coverage_vs_truth_with_unresolved"] = float(np.mean(band_coverage(truth["u"], truth["v"],
                                                                                           wide)))
    if not fits:
        return scores | {"projection_note": f"the basis's |k| up to {top_wavenumber(k1, k2)} is finer than the truth's "
                                            f"{n}^2 grid resolves (|k| < {n / 2:g}): no fit in the basis, no "
                                            "projection limit"}
    return scores | {
        "velocity_error_vs_projection": projection_limit(truth["u_fit"], truth["v_fit"], u, v),
        "projection_limit": projection_limit(truth["u"], truth["v"], truth["u_fit"], truth["v_fit"]),
        "velocity_coverage_vs_projection": float(np.mean(band_coverage(truth["u_fit"], truth["v_fit"], grid)))}


def write_basis_pairs(qg_path, out, basis: str = "circular", k_max: float = 12.0, degree: int = 3, every: int = 1,
                      overwrite: bool = False):
    """Writes the flows of a QG truth file as training pairs in a chosen basis; returns the path written.

    Each flow is one pair: its truth's least-squares coefficients in the basis over its window (the uniform current
    first, as in `basis_model`; simulate.qg.projection.truth_in_basis) and its drifters' tracks in model units,
    every `every`-th fix. The file is a lagda dataset (simulate.schema) with the time basis (to_dataset's
    time_basis), which a set encoder trained on it reads (lagda.learning.set_encoder); prior_scale is the pairs' own
    power per wavenumber shell and degree (`truth_prior`, as a climatology's).

    Raises
    ------
    ValueError
        for a file that is not a QG truth file, a bad basis, or an output that exists (without overwrite).
    """
    import pathlib

    from lagda.io.formats import read_tracks
    from simulate.config import SimConfig
    from simulate.generate import check_output, write_netcdf
    from simulate.qg.projection import truth_in_basis, with_current
    from simulate.schema import to_dataset

    out = pathlib.Path(out)
    check_output(out, overwrite)
    tracks = read_tracks(qg_path)
    ds = tracks.gridded_truth
    if ds is None:
        raise ValueError(f"{qg_path} is not a QG truth file (lagda simulate --flow qg): it has no gridded truth")
    k1, k2 = spatial_modes(basis, k_max)
    truth = truth_in_basis(ds, k1, k2, degree, current=True)
    coef, length = truth["coef"], float(truth["times"][-1])
    e1, e2, omega, time = in_time(*with_current(k1, k2)[:2], np.zeros(len(k1) + 1), degree, 0.0, length,
                                  with_current(k1, k2)[2])
    n_flow = coef.shape[0]
    n_obs = tracks.times.shape[1]
    positions = tracks.positions.reshape(n_flow, -1, n_obs, 2)[:, :, every - 1 :: every]
    release = tracks.release.reshape(n_flow, -1, 2)
    spacing = float(tracks.times[0, every - 1])
    config = SimConfig(n_samples=n_flow, n_drifters=positions.shape[1], dt=spacing,
                       t_final=spacing * positions.shape[2], stride=1, release="random", precision="float32")
    scale, _ = truth_prior(truth, degree)
    pairs = to_dataset(config, k1=e1, k2=e2, omega=omega, prior_scale=scale, coef=coef, release=release,
                       positions=positions, time_basis=time,
                       history=f"training pairs in the {basis} basis k_max {k_max:g}, degree {degree}, of {qg_path}")
    pairs.attrs.update(time_basis_kind=basis, time_basis_k_max=float(k_max))
    write_netcdf(pairs, out)
    return out
