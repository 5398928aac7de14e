"""The local Gaussian process of what a chosen basis leaves out at the drifters, for `lagda map`'s basis tiles and
`lagda assimilate`'s one box alike.

The drifters' velocities over chunks of `LOCAL_CHUNK_S` (`chunk_velocities`), less the basis field's there, are
mapped by a space-time Gaussian process (lagda.assimilation.gaussian_process) fitted to them on the box's plane,
whose mean is added to the field and whose variance joins the field's (`local_gp_correction`). A tile of a map
(lagda.mapping.methods.basis) and the one box of `lagda assimilate --method linear --basis circular` on physical
tracks (`box_local_gp`) take the same correction. The predictive std is computed on a coarser lattice of cells and
days and interpolated between (`lattice`, `interpolate_lattice`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagda.assimilation.gaussian_process import DAY_S, EARTH_RADIUS_KM, NearestInTime, Predictor, fit, local_km
from lagda.io.fixes import Fixes

STD_EVERY = 2  # the predictive std is computed on every STD_EVERY-th cell and day, and interpolated between
LOCAL_CHUNK_S = 6 * 3600.0  # the drifter velocities of the local fit: displacements over chunks of this length
LOCAL_MAX_POINTS = 1200  # the GP is conditioned on at most this many velocities (beyond: the nearest in time per day)
LOCAL_FIT_POINTS = 150  # the hyperparameters are fitted on sets of at most this many of them (a fit costs its cube)
LOCAL_FIT_SLABS = 3  # in a dense tile, also on this many sets of the velocities nearest in time to a random time
MIN_LOCAL_POINTS = 10
NOISE_FLOOR = 0.25  # the local fit's noise std at least this fraction of the residuals' RMS (tiny noise on dense
NOISE_FLOOR_M_S = 0.001  # tracks is ill-conditioned), and at least this
LOCAL_REACH = 2.0  # a local correction over this many times the drifters' largest residual (from the basis field or
# from their mean velocity) is rejected
OUTLIER_SIGMAS = 5.0  # chunk velocities whose residual, and its departure from its neighbours', lie over this many
# robust stds off are left out


@dataclasses.dataclass(frozen=True)
class Box:
    """The box and time window a local GP lives in: its plane is about the box's centre, its time counted from the
    window's start.

    A tile of a map (lagda.mapping.tiles.Tile) is a `Box` with more: its core, halos and time taper.

    Attributes
    ----------
    box : tuple of float
        (west, east, south, north): degrees of longitude and latitude, or x, y metres of projected tracks.
    start_s, end_s : float
        The window, seconds since 1970-01-01T00:00:00Z.

    Examples
    --------
    >>> Box((-40.0, -38.0, 30.0, 34.0), 0.0, 86400.0).centre
    (-39.0, 32.0)
    """

    box: tuple[float, float, float, float]
    start_s: float
    end_s: float

    @property
    def centre(self) -> tuple[float, float]:
        """Returns the box centre (lon, lat) in degrees (x, y metres for projected tracks)."""
        west, east, south, north = self.box
        return 0.5 * (west + east), 0.5 * (south + north)


def local_gp_correction(field: dict, cells, fixes: Fixes, segments, mean, model, mapping, tile: Box,
                        k_max: float, zero_guard: bool, far_floor: float = 0.0, kept_var=None, offset=None):
    """Returns ((u, v, var_u, var_v) `(day, lat, lon)` with the local GP of what the basis leaves out at the
    drifters, its record) or (None, why not) when too few velocities or a rejected fit leave the basis field alone.
    Given `kept_var`, a rejected fit gives (the basis field drawn back away from the drifters, its variance plus
    kept_var and the variance away from the drifters; why) instead.

    Parameters
    ----------
    field
        the basis field on the cells: u, v (m/s) and the variance of the field in the basis var_u, var_v (m/s)^2, `(day,
        lat, lon)`.
    cells
        (lon `(lat, lon)`, lat `(lat, lon)` degrees, seconds `(day,)`); for a projected `mapping`, x and y metres in
        place of lon and lat, here and in `fixes` and `tile`.
    fixes, segments
        the drifters' fixes and their segments (`Fixes.segments`)
    mean
        the basis posterior mean `(2K,)` (real, imaginary parts), or None for a zero field
    model, mapping
        the basis (None with a None mean) and the box's tangent plane
    tile
        the box and window (its centre is the GP's plane)
    zero_guard
        the basis estimate is the prior mean.
    far_floor
        the least variance away from the drifters (m/s)^2
    kept_var
        (var_u, var_v) (m/s)^2, `(lat, lon)`, of the velocity the basis leaves out (its error model's), or None.
    offset
        a prior mean velocity the basis field departs from (a background product's,
        lagda.assimilation.background.BackgroundFlow.velocity): called at the drifters' (lon, lat, seconds) `(n,)`
        it returns `(n, 2)` m/s, subtracted from their velocities, so that everything here is the departure from
        it; None: zero.
    """
    local = _local_fit(fixes, segments, mean, model, mapping, tile, k_max, offset)
    if local is None:
        return None, f"fewer than {MIN_LOCAL_POINTS} drifter velocities: not fitted"
    gp, hyper, points, spread, largest, outliers, span_h, (seen_mean, seen_anomaly) = local
    du, dv, var_local = _local_on(gp, tile, *cells, projected=mapping.coordinates == "projected")
    reach = float(max(np.abs(du).max(), np.abs(dv).max()))
    # near a drifter the local fit corrects the basis field's error too: its variance shrinks by the same
    # fraction as the residual's. Away from the drifters the velocity the basis leaves out is larger than its
    # residual at them (where the basis fit absorbed part of it): its variance there is the drifters' mean square
    # velocity, entering with the square of that fraction so that it is gone near a drifter. Their spread about
    # their mean and their mean itself: drifters gather in a jet, whose mean velocity the basis's uniform current
    # takes up and carries to cells beside the jet where the ocean may be at rest. When the basis estimate is zero
    # (its guard), the local fit maps the drifters' velocities themselves and the basis posterior is its prior:
    # the velocity's own variance, which the local fit's already holds, is not added twice
    remaining = var_local / hyper.s2
    far = [remaining**2 * max(max(spread + m**2, far_floor) - hyper.s2, 0.0) for m in seen_mean]
    basis = 0.0 if zero_guard else remaining
    # away from the drifters, where the basis field departs from their mean velocity by more than any of their own
    # velocities did, it extrapolates what no drifter saw (a lone eddy's fit rings across the box): that excess is
    # uncertain, and its square joins the variance there, as far from the drifters as the rest of `far`...
    departure = [field[c] - seen_mean[i] for i, c in enumerate(("u", "v"))]
    excess = [np.maximum(np.abs(d) - seen_anomaly[i], 0.0) for i, d in enumerate(departure)]
    unseen = [remaining**2 * e**2 for e in excess]
    # ... and its mean is drawn back, as far from the drifters, to the edge of the velocities they saw
    clamp = [remaining**2 * np.sign(d) * e for d, e in zip(departure, excess)]
    # an ill-posed fit rings between its data: the tile keeps its basis field. The yardstick is the drifters'
    # largest residual, not a percentile (dense tracks sample an eddy the basis misses at its peak only in a few
    # velocities), from the basis field or from their mean velocity: where a dense cluster skirts an eddy, the basis
    # fits the drifters closely and the eddy's flank beside them is larger than any residual from the basis there.
    # Its variance still says how far from the drifters a cell lies: the rules away from them hold
    if reach > LOCAL_REACH * largest:
        why = (f"rejected: its correction reached {reach:.3g} m/s, over {LOCAL_REACH:g}x the drifters' largest "
               f"residual ({largest:.3g} m/s)")
        if kept_var is None:
            return None, why
        return (field["u"] - clamp[0], field["v"] - clamp[1], field["var_u"] + kept_var[0] + far[0] + unseen[0],
                field["var_v"] + kept_var[1] + far[1] + unseen[1]), why + (
                    "; the basis field kept, its std and mean away from the drifters as a fitted one's")
    record = {"velocities": points, "ell_km": hyper.ell_km, "tau_days": hyper.tau_days,
              "std_m_s": float(np.sqrt(hyper.s2)), "noise_m_s": float(np.sqrt(hyper.n2)),
              "spread_m_s": float(np.sqrt(spread)), "outliers": outliers, "span_h": span_h,
              "beyond_drifters": float(np.mean(((excess[0] > 0) | (excess[1] > 0)) & (remaining > 0.5)))}
    if points > LOCAL_MAX_POINTS:
        record["nearest_per_day"] = LOCAL_MAX_POINTS
    return (field["u"] + du - clamp[0], field["v"] + dv - clamp[1],
            field["var_u"] * basis + var_local + far[0] + unseen[0],
            field["var_v"] * basis + var_local + far[1] + unseen[1]), record


def box_local_gp(result, posterior, model, k_max: float) -> list[str]:
    """Adds to a one-box `lagda assimilate` result of physical tracks (longitude/latitude, or projected x, y
    metres) the local GP of what its basis leaves out at the drifters (`local_gp_correction`, as each tile of a
    map has it): its u_mean, v_mean (m/s) follow the
    drifters' own velocities where they are, and u_total_std, v_total_std become the total predictive std; psi
    and the coefficients stay the basis field's. Returns one note line per field of what was fitted or why not.

    Parameters
    ----------
    result
        lagda.io.results.Result of a chosen basis (physical fields, `result.tracks` with a physical mapping), changed in
        place
    posterior
        its Posterior
    model
        its basis (basis_model)
    k_max
        the basis's.

    With a background (`model.background`) the result's u, v are the departure from it (the background is added
    afterwards: lagda.assimilation.background.add_background), and so is what the local GP fits: the drifters'
    velocities less the background, less the departure field.
    """
    from lagda.io.results import physical_axes

    tracks, mapping = result.tracks, result.mapping
    time = model.modes[3]
    window = mapping.time_from_model(np.array([time.start, time.start + time.length]))
    tile = Box(tuple(mapping.box), float(window[0]), float(window[1]))
    cells = (*np.meshgrid(*physical_axes(result)), mapping.time_from_model(result.time))
    notes = []
    for f in range(posterior.n_field):
        rows = np.flatnonzero(np.asarray(tracks.field) == f)
        x, y, t = (np.asarray(a, np.float64)[rows] for a in (tracks.positions[..., 0], tracks.positions[..., 1],
                                                               tracks.times))
        ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(t)
        fix_lon, fix_lat = mapping.from_model(x[ok], y[ok])
        fixes = Fixes(np.nonzero(ok)[0].astype(np.int64), mapping.time_from_model(t[ok]), fix_lon, fix_lat,
                      np.arange(len(rows)))
        mean = np.concatenate([posterior.mean[f].real, posterior.mean[f].imag])
        field = {c: result.fields[f"{c}_mean"][f] for c in ("u", "v")}
        field |= {f"var_{c}": result.fields[f"{c}_std"][f] ** 2 for c in ("u", "v")}
        info = (posterior.info or ({},) * posterior.n_field)[f]
        offset = None if model.background is None else model.background.velocity
        corrected, record = local_gp_correction(field, cells, fixes, fixes.segments(), mean, model, mapping, tile,
                                                k_max, bool(info.get("zero_guard")), offset=offset)
        label = f"near the drifters{f' (field {f})' if posterior.n_field > 1 else ''}"
        if corrected is None:
            notes.append(f"{label}: no correction ({record}); u, v are the flow's alone (--no-local-gp)")
            continue
        u, v, var_u, var_v = corrected
        result.fields["u_mean"][f], result.fields["v_mean"][f] = u, v
        for c, var in (("u", var_u), ("v", var_v)):
            result.fields.setdefault(f"{c}_total_std", np.array(result.fields[f"{c}_std"]))[f] = np.sqrt(var)
        nearest = f", each day the {record['nearest_per_day']:,} nearest" if "nearest_per_day" in record else ""
        notes.append(f"{label}: what the flow leaves out, fitted to {record['velocities']:,} "
                     f"{record['span_h']:.2g}-h velocities{nearest} (correlated over {record['ell_km']:.0f} km and "
                     f"{record['tau_days']:.1f} days, std {record['std_m_s']:.3f} m/s), added to u, v and their std "
                     "(--no-local-gp)")
        field = f" (field {f})" if posterior.n_field > 1 else ""
        notes += [f"away from the drifters{field}: {beyond_note(record)}"] if beyond_note(record) else []
    return notes


def beyond_note(record: dict) -> str:
    """Returns "" or the words saying on what share of the cells, away from the drifters, the basis field departs
    from their mean velocity by more than any of their velocities did (`local_gp_correction`: its mean is drawn
    back to the edge of theirs, its std holds the excess)."""
    share = record.get("beyond_drifters", 0.0)
    return (f"on {100 * share:.3g}% of the cells the flow departed from their mean more than any of them did: held "
            "at their edge, the excess in the std" if share > 0 else "")


def lattice(n: int) -> np.ndarray:
    """Returns every STD_EVERY-th index of range(n), the last index included."""
    return np.unique(np.append(np.arange(0, n, STD_EVERY), n - 1)) if n else np.zeros(0, int)


def interpolate_lattice(values, axes, shape) -> np.ndarray:
    """Returns `values` on the lattice `axes` (index arrays) linearly interpolated to every index of `shape`."""
    from scipy.interpolate import RegularGridInterpolator

    axes = [a.astype(np.float64) if len(a) > 1 else np.array([a[0] - 1.0, a[0] + 1.0]) for a in axes]
    vals = values
    for i, a in enumerate(axes):
        if vals.shape[i] == 1:
            vals = np.repeat(vals, 2, axis=i)
    interp = RegularGridInterpolator(axes, vals, bounds_error=False, fill_value=None)
    mesh = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1)
    return interp(mesh)


def _plane_km(a, b, tile: Box, projected: bool) -> tuple[np.ndarray, np.ndarray]:
    """Returns (x, y) km of points `(...)` on the local GP's plane about the tile's centre: longitude, latitude
    degrees on the sinusoidal plane (lagda.assimilation.gaussian_process.local_km), or projected x, y metres as
    they are."""
    if projected:
        centre = tile.centre
        return (np.asarray(a, np.float64) - centre[0]) / 1000.0, (np.asarray(b, np.float64) - centre[1]) / 1000.0
    return local_km(a, b, tile.centre)


def mean_square_velocity(fixes: Fixes) -> float:
    """Returns the mean square of the drifters' velocities over LOCAL_CHUNK_S (`chunk_velocities`) per component,
    (m/s)^2; 0.0 when they have none."""
    velocity = chunk_velocities(fixes, fixes.segments(), LOCAL_CHUNK_S)[3]
    return float(np.mean(velocity**2)) if len(velocity) else 0.0


def chunk_velocities(fixes: Fixes, segments: list[np.ndarray], chunk_s: float, projected: bool = False):
    """Returns (lon, lat, seconds, velocity `(n, 2)` m/s, span `(n,)` s, segment `(n,)`) of each drifter segment's
    velocities (in time order, `segment` the index of theirs in `segments`) over
    about `chunk_s` whatever its fixes' cadence (hourly, 6-hourly, irregular; over their step when that is longer,
    as for daily fixes): the displacement between the first fixes of consecutive chunks of `chunk_s` (counted from
    the segment's first fix; the segment's last fix closes the last) over their time apart, `span`, at the
    midpoint, pairs under half `chunk_s` apart left out; (u, v) = (R cos(lat) dlon/dt, R dlat/dt) (dlon the short way
    round: a track may cross its file's longitude seam), or (dx/dt, dy/dt)
    of `projected` fixes (x, y metres in place of lon, lat)."""
    from lagda.io.physical import EARTH_RADIUS_M

    first, last = [], []
    for s in segments:
        block = np.floor((fixes.time[s] - fixes.time[s[0]]) / chunk_s).astype(np.int64)
        marks = s[np.unique(np.r_[np.flatnonzero(np.r_[True, np.diff(block) != 0]), len(s) - 1])]
        ok = fixes.time[marks[1:]] - fixes.time[marks[:-1]] >= 0.5 * chunk_s
        first.append(marks[:-1][ok])
        last.append(marks[1:][ok])
    i, j = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (first, last))
    segment = np.repeat(np.arange(len(first)), [len(a) for a in first])
    dt = fixes.time[j] - fixes.time[i]
    dx, dy = fixes.lon[j] - fixes.lon[i], fixes.lat[j] - fixes.lat[i]
    if not projected:  # a track across the 0 or 180 meridian of its file's convention: the short way round
        dx = (dx + 180.0) % 360.0 - 180.0
    lon, lat = fixes.lon[i] + 0.5 * dx, fixes.lat[i] + 0.5 * dy
    if not projected:
        dx, dy = EARTH_RADIUS_M * np.cos(np.deg2rad(lat)) * np.deg2rad(dx), EARTH_RADIUS_M * np.deg2rad(dy)
    u, v = dx / dt, dy / dt
    return lon, lat, 0.5 * (fixes.time[i] + fixes.time[j]), np.stack([u, v], axis=-1), dt, segment


def _departures(values, segment) -> np.ndarray:
    """Returns each of `values` `(n, c)` less the mean of its neighbours in its `segment` `(n,)` (the values of a
    segment consecutive): one neighbour at a segment's ends, zero for a segment's lone value. One bad fix between
    two chunk velocities moves them apart, against their neighbours; a flow the basis misses moves them together."""
    values = np.asarray(values, np.float64)
    has_prev = np.r_[False, segment[1:] == segment[:-1]]
    has_next = np.r_[segment[:-1] == segment[1:], False]
    total = np.zeros_like(values)
    total[has_prev] += values[:-1][has_prev[1:]]
    total[has_next] += values[1:][has_next[:-1]]
    count = (has_prev.astype(int) + has_next)[:, None]
    return np.where(count > 0, values - total / np.maximum(count, 1), 0.0)


def _local_fit(fixes: Fixes, segments, mean, model, mapping, tile: Box, k_max: float, offset=None):
    """Returns (the residual's GP, its Hyper, the number of velocities, their spread, the largest residual
    component m/s, the outliers left out, the velocities' median span in hours, (their mean, their largest departure
    from it) `(2,)` m/s per component) for the drifters' chunk velocities
    (`chunk_velocities`) less the basis field's there, or None with fewer than MIN_LOCAL_POINTS velocities; the
    spread is the variance of the chunk velocities about their mean, (m/s)^2 per component, the largest residual
    that of a velocity from the basis field's or from their mean, whichever is larger.

    Its hyperparameters maximise the marginal likelihood of LOCAL_FIT_POINTS of them drawn at random (u and v
    sharing them), its length scale bounded by half the basis's shortest wavelength (the box's side over k_max): the
    scales the basis resolves are the basis's. A dense tile (over LOCAL_MAX_POINTS velocities) also fits them on
    LOCAL_FIT_SLABS sets of the LOCAL_FIT_POINTS nearest in time to a random time, since a random draw from many
    drifters holds few close pairs and misses the short scales, and conditions the GP at each day on the
    LOCAL_MAX_POINTS velocities nearest to it in time (lagda.assimilation.gaussian_process.NearestInTime).
    With `offset` (`local_gp_correction`) the chunk velocities are taken less it first: all of the above is then of
    the departure from it.
    """
    from lagda.assimilation.methods.prior_search import velocity_outliers
    from simulate.flow import velocity_basis

    projected = mapping.coordinates == "projected"
    lon, lat, seconds, velocity, span, segment = chunk_velocities(fixes, segments, LOCAL_CHUNK_S, projected)
    if len(lon) < MIN_LOCAL_POINTS:
        return None
    if offset is not None:
        velocity = velocity - offset(lon, lat, seconds)
    residual = velocity.copy()
    if mean is not None and np.any(mean):  # a zero field (a lone segment's, a zero-guarded basis) leaves them as is
        k1, k2, omega, time = model.modes
        z, t = np.stack(mapping.to_model(lon, lat), axis=-1), mapping.time_to_model(seconds)
        block = 2000  # G is (n, 2, 2K): built a block of velocities at a time
        fitted = np.concatenate([velocity_basis(z[i:i + block], t[i:i + block], k1, k2, omega, time) @ mean
                                 for i in range(0, len(z), block)])
        residual -= fitted * np.stack(mapping.velocity_factors(lat), axis=-1)
    # a fix the spike rule let through makes a chunk velocity far off the others and off its neighbours along the
    # drifter: left out beyond OUTLIER_SIGMAS robust stds of both. Not of the residuals alone: where a compact
    # cluster meets an eddy the basis misses, the residuals of most drifters are tiny and the eddy's far off them,
    # yet smooth in time
    far = [velocity_outliers(r, OUTLIER_SIGMAS, error_std=1e-3)[0] for r in (residual, _departures(residual, segment))]
    inlier = ~(far[0] & far[1])
    lon, lat, seconds, span = lon[inlier], lat[inlier], seconds[inlier], span[inlier]
    residual, velocity = residual[inlier], velocity[inlier]
    if len(lon) < MIN_LOCAL_POINTS:
        return None
    x, y = _plane_km(lon, lat, tile, projected)
    points = np.stack([x, y, (seconds - tile.start_s) / DAY_S], axis=-1)
    pick = np.random.default_rng(0).permutation(len(points))[:LOCAL_FIT_POINTS]
    side_km = (tile.box[3] - tile.box[2]) / 1000.0 if projected else np.deg2rad(tile.box[3] - tile.box[2]) * \
        EARTH_RADIUS_KM
    window_days = (tile.end_s - tile.start_s) / DAY_S
    power = float(np.mean(residual**2))
    anomaly = velocity - velocity.mean(axis=0)
    spread = float(np.mean(anomaly**2))
    dense = len(points) > LOCAL_MAX_POINTS
    sets = [pick]
    if dense:
        for centre in np.random.default_rng(1).uniform(points[:, 2].min(), points[:, 2].max(), LOCAL_FIT_SLABS):
            sets.append(np.argsort(np.abs(points[:, 2] - centre), kind="stable")[:LOCAL_FIT_POINTS])
    # the variance at most a few times the residual's, or the velocities' spread: a longer trend is the basis's, not
    # a reason to inflate it, but where the basis fits a compact cluster closely its residual there is no measure
    # of what it leaves out beside the cluster
    bounds = ((10.0, max(0.5 * side_km / k_max, 11.0)), (0.25, window_days / 3),
              (1e-6, max(4.0 * power, spread, 2e-6)), (max(NOISE_FLOOR**2 * power, NOISE_FLOOR_M_S**2), 0.25))
    hyper = fit([(points[i], residual[i, c]) for i in sets for c in (0, 1)],
                start=(30.0, 3.0, power, 0.1 * power), bounds=bounds, centre=False, maxiter=50)
    gp = NearestInTime(points, residual, hyper, LOCAL_MAX_POINTS) if dense else \
        Predictor(points, residual, hyper, centre=False)
    largest = float(max(np.abs(residual).max(), np.abs(anomaly).max()))
    seen = (velocity.mean(axis=0), np.abs(anomaly).max(axis=0))
    return gp, hyper, len(points), spread, largest, int((~inlier).sum()), float(np.median(span)) / 3600.0, seen


def _local_on(gp, tile: Box, lon2, lat2, seconds, projected: bool = False) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """Returns the residual GP's mean (du, dv) and its latent variance `(day, lat, lon)` at the cells lon2, lat2
    `(lat, lon)` degrees (in the tile's longitude convention; x, y metres when `projected`) on each of `seconds`
    `(day,)`."""
    xy = np.stack(_plane_km(lon2, lat2, tile, projected), axis=-1)  # (lat, lon, 2) km
    day = (np.asarray(seconds, np.float64) - tile.start_s) / DAY_S
    shape = (len(day), *lon2.shape)
    sub_d, sub_y, sub_x = (lattice(n) for n in shape)
    mean, std = gp.on_days(xy.reshape(-1, 2), day, xy[np.ix_(sub_y, sub_x)].reshape(-1, 2), day[sub_d])
    mean, var = mean.reshape(*shape, 2), std**2
    var = interpolate_lattice(var.reshape(len(sub_d), len(sub_y), len(sub_x)), (sub_d, sub_y, sub_x), shape)
    return mean[..., 0], mean[..., 1], var
