"""The basin-year's standard answers and its scores: finite-difference velocities, binned means, a per-tile GP.

- `fd_velocities`: the quality control a drifter user applies, then centred finite differences. Kept: drogued fixes
  (`drogue_status` 1, when present); the first of fixes with the same time; not a spike (a fix whose speed from the
  previous and to the next fix both exceed `max_speed`); a velocity (u, v) = (R cos(lat) dlon/dt, R dlat/dt) from the
  fixes either side, both within `max_gap_h` hours, of speed at most `max_speed`.
- `binned_means`: the mean of those velocities per bin of `bin_deg` degrees and per day (fixes within half a day
  of the map time) or per window of `window_days` days centred on it, spread onto the map's cells (numpy bincount; the
  installed clouddrift, 0.44, has no binning module).
- `gp_tiles`: Gaussian-process regression of the velocities per tile, after Goncalves et al. (2019): u and v
  independent, each with a space-time squared-exponential kernel
  k = s2 exp(-|dx|^2 / (2 l^2) - dt^2 / (2 tau^2)) plus noise n2 on the diagonal, the prior mean the subsample's
  mean, its hyperparameters (l km, tau days, s2, n2) by maximising the summed log marginal likelihood over
  `fit_tiles` tile-windows of `fit_n` velocities (scipy L-BFGS-B with the analytic gradient, <= 100 iterations).
  Tiles as `lagda map`'s: a regular grid of `tile_size_deg` from
  (LON0, LAT0), data from each tile widened by `halo_deg`, at most `n_sub` fixes (random) per tile and time window of
  `window_days` every `window_step_days`; each day is predicted by the window whose centre is nearest, on its tile's
  own cells (local tangent plane at the tile centre). The std is the latent field's predictive std.
- `score_map`: relative L2 error, 95% coverage and the seam ratio of a map against the truth; `box_comparison`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from lagda.assimilation.gaussian_process import fit, predict

EARTH_RADIUS_M = 6_371_008.8
DAY_S = 86400.0


def fd_velocities(archive: xr.Dataset, max_speed: float = 2.0, max_gap_h: float = 3.0) -> tuple[dict, dict]:
    """Returns (fixes, counts): fixes {time (s since the epoch), lon, lat, u, v (m/s)} `(fix,)` after the quality
    control of the module docstring, and the count each rule removed.

    Parameters
    ----------
    archive
        a contiguous ragged dataset: `rowsize` (traj,), `time`, `lon`, `lat` (obs,), optional
        `drogue_status` (obs,).
    """
    rowsize = archive["rowsize"].values.astype(np.int64)
    traj = np.repeat(np.arange(rowsize.size), rowsize)
    t = (archive["time"].values.astype("datetime64[ns]").astype(np.int64) / 1e9).astype(np.float64)
    lon, lat = archive["lon"].values.astype(np.float64), archive["lat"].values.astype(np.float64)
    order = np.lexsort((t, traj))
    traj, t, lon, lat = traj[order], t[order], lon[order], lat[order]
    counts = {"fixes": int(t.size)}
    keep = np.ones(t.size, bool)
    keep[1:] &= ~((traj[1:] == traj[:-1]) & (t[1:] == t[:-1]))
    counts["duplicate_times"] = int((~keep).sum())
    if "drogue_status" in archive:
        drogued = archive["drogue_status"].values[order] == 1
        counts["undrogued"] = int((keep & ~drogued).sum())
        keep &= drogued
    traj, t, lon, lat = traj[keep], t[keep], lon[keep], lat[keep]

    def step_speed(a, b):
        dx = np.deg2rad(lon[b] - lon[a]) * EARTH_RADIUS_M * np.cos(np.deg2rad(0.5 * (lat[a] + lat[b])))
        dy = np.deg2rad(lat[b] - lat[a]) * EARTH_RADIUS_M
        return np.hypot(dx, dy) / np.maximum(t[b] - t[a], 1.0), (traj[a] == traj[b])

    speed, same = step_speed(np.arange(t.size - 1), np.arange(1, t.size))
    fast = np.where(same, speed > max_speed, False)
    spike = np.zeros(t.size, bool)
    spike[1:-1] = fast[:-1] & fast[1:]
    counts["spikes"] = int(spike.sum())
    traj, t, lon, lat = traj[~spike], t[~spike], lon[~spike], lat[~spike]
    a, b = np.arange(t.size - 2), np.arange(2, t.size)
    ok = (traj[a] == traj[b]) & (t[b] - t[a] <= 2 * max_gap_h * 3600.0)
    ok &= (t[a + 1] - t[a] <= max_gap_h * 3600.0) & (t[b] - t[a + 1] <= max_gap_h * 3600.0)
    dt = t[b] - t[a]
    u = np.deg2rad(lon[b] - lon[a]) * EARTH_RADIUS_M * np.cos(np.deg2rad(lat[a + 1])) / dt
    v = np.deg2rad(lat[b] - lat[a]) * EARTH_RADIUS_M / dt
    counts["no_neighbours"] = int((~ok).sum() + 2 * rowsize.size)
    fast = ok & (np.hypot(u, v) > max_speed)
    counts["too_fast"] = int(fast.sum())
    ok &= ~fast
    i = a[ok] + 1
    counts["velocities"] = int(i.size)
    return {"time": t[i], "lon": lon[i], "lat": lat[i], "u": u[ok], "v": v[ok]}, counts


def _map_frame(grid_lon, grid_lat, times):
    return {"time": ("time", times), "lat": ("lat", grid_lat), "lon": ("lon", grid_lon)}


def binned_means(fixes: dict, grid_lon, grid_lat, times, bin_deg: float, window_days: float = 1.0) -> xr.Dataset:
    """Returns u, v `(time, lat, lon)` m/s and `n` (velocities averaged): per bin of `bin_deg` degrees from the grid's
    south-west corner, the mean of the velocities nearest to the map times k - h .. k + h (window_days = 2 h + 1 map
    steps: 1 is the day's own), on every cell of the bin (NaN where the bin has none).

    Parameters
    ----------
    fixes
        from `fd_velocities`
    grid_lon, grid_lat
        cell centres `(nlon,)`, `(nlat,)` at an even spacing that divides bin_deg
    times
        datetime64 `(time,)` at an even daily (or coarser) step.
    """
    res = float(grid_lon[1] - grid_lon[0])
    lon0, lat0 = grid_lon[0] - res / 2, grid_lat[0] - res / 2
    nbx = int(np.ceil(grid_lon.size * res / bin_deg - 1e-9))
    nby = int(np.ceil(grid_lat.size * res / bin_deg - 1e-9))
    t0 = times[0].astype("datetime64[ns]").astype(np.int64) / 1e9
    step = float((times[1] - times[0]) / np.timedelta64(1, "s")) if times.size > 1 else DAY_S
    k = np.floor((fixes["time"] - t0) / step + 0.5).astype(np.int64)  # the nearest map time
    bx = np.floor((fixes["lon"] - lon0) / bin_deg).astype(np.int64)
    by = np.floor((fixes["lat"] - lat0) / bin_deg).astype(np.int64)
    half = int(np.floor((window_days * DAY_S / step - 1) / 2 + 0.5))  # window_days = (2 half + 1) map steps
    inside = (bx >= 0) & (bx < nbx) & (by >= 0) & (by < nby) & (k >= -half) & (k < times.size + half)
    nt = times.size + 2 * half
    flat = ((k[inside] + half) * nby + by[inside]) * nbx + bx[inside]
    sums = {name: np.bincount(flat, weights=fixes[name][inside], minlength=nt * nby * nbx).reshape(nt, nby, nbx)
            for name in ("u", "v")}
    sums["n"] = np.bincount(flat, minlength=nt * nby * nbx).reshape(nt, nby, nbx).astype(np.float64)
    if half:
        for name, s in sums.items():  # the sum over times k - half .. k + half
            c = np.concatenate([np.zeros((1, nby, nbx)), np.cumsum(s, axis=0)])
            sums[name] = c[2 * half + 1:] - c[:-2 * half - 1]
    iy = np.floor((grid_lat - lat0) / bin_deg + 1e-9).astype(int)
    ix = np.floor((grid_lon - lon0) / bin_deg + 1e-9).astype(int)
    n = sums["n"][:, iy][:, :, ix]
    with np.errstate(invalid="ignore", divide="ignore"):
        data = {name: (("time", "lat", "lon"), np.where(n > 0, sums[name][:, iy][:, :, ix] / n, np.nan))
                for name in ("u", "v")}
    data["n"] = (("time", "lat", "lon"), n.astype(np.int64))
    return xr.Dataset(data, coords=_map_frame(grid_lon, grid_lat, times),
                      attrs={"method": f"binned means, {bin_deg:g} degree bins, {window_days:g}-day window"})


@dataclasses.dataclass(frozen=True)
class Tiling:
    """`lagda map`'s tiling: tiles of `tile_size_deg` from (LON0, LAT0), widened by `halo_deg`, time windows of
    `window_days` every `window_step_days`."""

    tile_size_deg: float = 5.0
    halo_deg: float = 1.0
    window_days: float = 30.0
    window_step_days: float = 10.0

    @classmethod
    def from_attrs(cls, attrs) -> "Tiling":
        """Returns the tiling a map store's global attributes give."""
        return cls(*(float(attrs[f.name]) for f in dataclasses.fields(cls)))

    def windows(self, days: float) -> np.ndarray:
        """Returns the windows' start days `(window,)`: 0, step, ..., the last ending at `days` (or 0 alone)."""
        last = max(days - self.window_days, 0.0)
        starts = np.arange(0.0, last + 1e-9, self.window_step_days)
        return np.unique(np.append(starts, last))


def _local_km(lon, lat, centre):
    return (np.deg2rad(lon - centre[0]) * EARTH_RADIUS_M * np.cos(np.deg2rad(centre[1])) / 1e3,
            np.deg2rad(lat - centre[1]) * EARTH_RADIUS_M / 1e3)


def _tiles(grid_lon, grid_lat, tile_deg):
    """Yields (ix, iy) index arrays of the cells of each tile of the regular tiling from the grid's corner."""
    res = float(grid_lon[1] - grid_lon[0])
    lon0, lat0 = grid_lon[0] - res / 2, grid_lat[0] - res / 2
    tx = np.floor((grid_lon - lon0) / tile_deg + 1e-9).astype(int)
    ty = np.floor((grid_lat - lat0) / tile_deg + 1e-9).astype(int)
    for j in range(ty.max() + 1):
        for i in range(tx.max() + 1):
            yield np.flatnonzero(tx == i), np.flatnonzero(ty == j), (lon0 + i * tile_deg, lat0 + j * tile_deg)


def _subset(idx, n_sub, rng):
    if idx.size > n_sub:
        idx = np.sort(rng.choice(idx, n_sub, replace=False))
    return idx


def gp_tiles(fixes: dict, grid_lon, grid_lat, times, tiling: Tiling, n_sub: int = 400, fit_tiles: int = 8,
             fit_n: int = 300, min_fixes: int = 20, seed: int = 0, log=print) -> xr.Dataset:
    """Returns the per-tile GP map u, v, u_std, v_std `(time, lat, lon)` m/s (module docstring), NaN on a tile and
    window with fewer than `min_fixes` velocities; attrs hold the hyperparameters and the subsample sizes.

    Parameters
    ----------
    fixes
        from `fd_velocities`
    grid_lon, grid_lat
        cell centres (degrees)
    times
        datetime64 `(time,)` daily.
    """
    rng = np.random.default_rng(seed)
    t0 = times[0].astype("datetime64[ns]").astype(np.int64) / 1e9
    tday = (fixes["time"] - t0) / DAY_S
    days = (times.astype("datetime64[ns]").astype(np.int64) / 1e9 - t0) / DAY_S
    starts = tiling.windows(float(days[-1]))
    centres = starts + tiling.window_days / 2
    nearest = np.argmin(np.abs(days[:, None] - centres[None, :]), axis=1)
    halo, size = tiling.halo_deg, tiling.tile_size_deg
    jobs = []
    for ix, iy, (west, south) in _tiles(grid_lon, grid_lat, size):
        space = ((fixes["lon"] >= west - halo) & (fixes["lon"] < west + size + halo)
                 & (fixes["lat"] >= south - halo) & (fixes["lat"] < south + size + halo))
        for w, s in enumerate(starts):
            if not np.any(nearest == w):
                continue
            members = np.flatnonzero(space & (tday >= s) & (tday <= s + tiling.window_days))
            jobs.append((ix, iy, (west + size / 2, south + size / 2), w, members))
    rich = [j for j in jobs if j[4].size >= fit_n]
    picks = rng.choice(len(rich), min(fit_tiles, len(rich)), replace=False) if rich else []
    points, values = [], []
    for p in picks:
        ix, iy, centre, w, members = rich[p]
        idx = _subset(members, fit_n, rng)
        x, y = _local_km(fixes["lon"][idx], fixes["lat"][idx], centre)
        points.append(np.stack([x, y, tday[idx]], -1))
        values.append(idx)
    if not points:
        raise ValueError(f"no tile and window holds {fit_n} velocities to fit the GP's hyperparameters")
    hyper = {}
    for name in ("u", "v"):
        hyper[name] = fit([(x, fixes[name][idx]) for x, idx in zip(points, values)])
        h = hyper[name]
        log(f"GP {name}: hyperparameters from {len(points)} tile-windows of {fit_n}: l = {h.ell_km:.0f} km, "
            f"tau = {h.tau_days:.1f} days, s = {np.sqrt(h.s2):.3f} m/s, noise {np.sqrt(h.n2):.3f} m/s")
    shape = (times.size, grid_lat.size, grid_lon.size)
    out = {k: np.full(shape, np.nan) for k in ("u", "v", "u_std", "v_std")}
    used = 0
    for j, (ix, iy, centre, w, members) in enumerate(jobs):
        if j and j % max(len(jobs) // 10, 1) == 0:
            log(f"GP: {j} of {len(jobs)} tile-windows")
        if members.size < min_fixes:
            continue
        idx = _subset(members, n_sub, rng)
        used += idx.size
        x, y = _local_km(fixes["lon"][idx], fixes["lat"][idx], centre)
        k = np.flatnonzero(nearest == w)
        glon, glat = np.meshgrid(grid_lon[ix], grid_lat[iy])
        gx, gy = _local_km(glon.ravel(), glat.ravel(), centre)
        xs = np.concatenate([np.stack([gx, gy, np.full(gx.size, d)], -1) for d in days[k]])
        sel, cells = np.ix_(k, iy, ix), (k.size, iy.size, ix.size)
        for name in ("u", "v"):
            mean, std = predict(np.stack([x, y, tday[idx]], -1), fixes[name][idx], xs, hyper[name])
            out[name][sel], out[f"{name}_std"][sel] = mean.reshape(cells), std.reshape(cells)
    data = {name: (("time", "lat", "lon"), values) for name, values in out.items()}
    return xr.Dataset(data, coords=_map_frame(grid_lon, grid_lat, times),
                      attrs={"method": f"GP per tile (n_sub {n_sub})", "tile_windows": len(jobs),
                             "velocities_used": used,
                             **{f"gp_{c}_{k}": v for c, h in hyper.items() for k, v in dataclasses.asdict(h).items()}})


def relative_l2(u, v, ut, vt, mask) -> float:
    """Returns sqrt(sum |(u, v) - (ut, vt)|^2 / sum |(ut, vt)|^2) over `mask` (NaN when the mask is empty)."""
    if not np.any(mask):
        return float("nan")
    err = np.sum((u[mask] - ut[mask]) ** 2 + (v[mask] - vt[mask]) ** 2)
    return float(np.sqrt(err / np.sum(ut[mask] ** 2 + vt[mask] ** 2)))


def seam_mask(grid_lon, grid_lat, tiling: Tiling) -> np.ndarray:
    """Returns `(lat, lon)` True on cells whose centre lies within one halo of an interior tile edge."""
    res = float(grid_lon[1] - grid_lon[0])

    def near(c):
        origin, span = c[0] - res / 2, c.size * res
        edges = origin + tiling.tile_size_deg * np.arange(1, int(np.ceil(span / tiling.tile_size_deg - 1e-9)))
        if edges.size == 0:
            return np.zeros(c.size, bool)
        return np.min(np.abs(c[:, None] - edges[None, :]), axis=1) < tiling.halo_deg

    return near(np.asarray(grid_lat))[:, None] | near(np.asarray(grid_lon))[None, :]


def crop_to_truth(store: xr.Dataset, truth: xr.Dataset) -> tuple[xr.Dataset, str]:
    """Returns (the store on the truth's cells and at its times, a note; "" when nothing was cut): a map made
    without --region or --period covers the archive's extent, which may be more than the truth's grid.

    Raises
    ------
    ValueError
        if the store's cells do not hold every truth cell.
    """
    pick, cut = {}, []
    for name in ("lon", "lat"):
        mine, truths = np.round(store[name].values, 6), np.round(truth[name].values, 6)
        keep = np.isin(mine, truths)
        if keep.sum() != truths.size:
            raise ValueError(f"the store's {name} cells ({mine.size} from {mine[0]:g}) do not hold the truth's "
                             f"({truths.size} from {truths[0]:g})")
        if not keep.all():
            pick[name] = np.flatnonzero(keep)
            cut.append(f"{truths.size} of its {mine.size} {name} cells")
    times = store["time"].values.astype("datetime64[ns]")
    keep = np.isin(times, truth["time"].values.astype("datetime64[ns]"))
    if not keep.all():
        pick["time"] = np.flatnonzero(keep)
        cut.append(f"{int(keep.sum())} of its {times.size} days")
    return store.isel(pick), (f"scored on the truth's grid: {', '.join(cut)}" if cut else "")


def aligned_truth(store: xr.Dataset, truth: xr.Dataset) -> xr.Dataset:
    """Returns the truth at the store's times and cells.

    Raises
    ------
    ValueError
        if a store time is not a truth time or the cell centres differ.
    """
    for name in ("lat", "lon"):
        if store[name].size != truth[name].size or not np.allclose(store[name].values, truth[name].values,
                                                                       atol=1e-6):
            raise ValueError(f"the store's {name} ({store[name].size} cells from {float(store[name][0]):g}) is not the "
                             f"truth's ({truth[name].size} from {float(truth[name][0]):g})")
    missing = np.setdiff1d(store["time"].values.astype("datetime64[ns]"), truth["time"].values.astype("datetime64[ns]"))
    if missing.size:
        raise ValueError(f"{missing.size} store times are not truth times (first {missing[0]})")
    return truth.sel(time=store["time"].values.astype("datetime64[ns]"))


def score_map(store: xr.Dataset, truth: xr.Dataset, tiling: Tiling | None = None, z: float = 1.96) -> dict:
    """Returns the map's scores against the truth on informed cells (n_fixes > 0, u and v finite):
    `error` (relative L2), `coverage` (fraction of u and v components with |est - truth| <= z std), `coverage_u`,
    `coverage_v`, `coverage_all` and `error_all` (on every cell with a value, informed or not), `seam_ratio` (the
    error within one halo of an interior tile edge over the error elsewhere, with `error_seam`, `error_interior`)
    and `cells` (informed cell-days).

    Parameters
    ----------
    store
        `lagda map`'s store: u, v, u_std, v_std, n_fixes `(time, lat, lon)`, tiling attributes (unless `tiling` is
        given)
    truth
        u, v `(time, lat, lon)` on the same cells, at least at the store's times.
    """
    tiling = tiling or Tiling.from_attrs(store.attrs)
    tr = aligned_truth(store, truth)
    u, v, ut, vt = (np.asarray(a, np.float64) for a in (store["u"], store["v"], tr["u"], tr["v"]))
    informed = (store["n_fixes"].values > 0) & np.isfinite(u) & np.isfinite(v)
    out = {"cells": int(informed.sum()), "error": relative_l2(u, v, ut, vt, informed)}
    cover = {}
    for name, est, true in (("u", u, ut), ("v", v, vt)):
        std = np.asarray(store[f"{name}_std"], np.float64)
        ok = informed & np.isfinite(std)
        cover[name] = (np.abs(est - true)[ok] <= z * std[ok])
        out[f"coverage_{name}"] = float(cover[name].mean()) if cover[name].size else float("nan")
    both = np.concatenate([cover["u"], cover["v"]])
    out["coverage"] = float(both.mean()) if both.size else float("nan")
    every = [np.abs(est - true)[np.isfinite(est) & np.isfinite(std)] <= z * std[np.isfinite(est) & np.isfinite(std)]
             for est, true, std in ((u, ut, np.asarray(store["u_std"], np.float64)),
                                    (v, vt, np.asarray(store["v_std"], np.float64)))]
    out["coverage_all"] = float(np.concatenate(every).mean())
    out["error_all"] = relative_l2(u, v, ut, vt, np.isfinite(u) & np.isfinite(v))
    seam = np.broadcast_to(seam_mask(store["lon"].values, store["lat"].values, tiling), informed.shape)
    out["error_seam"] = relative_l2(u, v, ut, vt, informed & seam)
    out["error_interior"] = relative_l2(u, v, ut, vt, informed & ~seam)
    out["seam_ratio"] = out["error_seam"] / out["error_interior"]
    return out


def score_on_own_cells(method: xr.Dataset, store: xr.Dataset | None, truth: xr.Dataset) -> dict:
    """Returns {error, cells} of a method on the cells where it has a value, and with a map store also `map_error`
    (the store's error on those cells where the store has a value too) and `method_error_shared` (the method's there).
    """
    tr = aligned_truth(method, truth)
    u, v, ut, vt = (np.asarray(a, np.float64) for a in (method["u"], method["v"], tr["u"], tr["v"]))
    has = np.isfinite(u) & np.isfinite(v)
    out = {"cells": int(has.sum()), "error": relative_l2(u, v, ut, vt, has)}
    if store is not None:
        sm = store.sel(time=method["time"].values)
        mu, mv = np.asarray(sm["u"], np.float64), np.asarray(sm["v"], np.float64)
        shared = has & np.isfinite(mu) & np.isfinite(mv)
        out["map_error"] = relative_l2(mu, mv, ut, vt, shared)
        out["method_error_shared"] = relative_l2(u, v, ut, vt, shared)
    return out
