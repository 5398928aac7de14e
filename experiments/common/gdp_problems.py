"""The GDP's problems planted on a drifter's clean hourly track, and the GDP-hourly ragged layout of the result.

What the synthetic archives of several families share (experiments.basin.archive on a plane, the global archive
on the sphere). `corrupt` takes one drifter's clean positions `(n, 2)` in metres in a local east/north frame
(a plane's coordinates, or zeros to get the displacements alone) and returns its fixes as a GDP file has them;
`config` is a `GdpProblems` (the archives' configs extend it):

- **noise**: each fix gets a standard deviation drawn uniformly in [`noise_m`[0], `noise_m`[1]] metres, Gaussian
  east and north;
- **gaps**: Poisson(`gaps_per_30d` x days / 30) gaps of uniform length in `gap_hours`, and a fraction `missing` of
  single fixes dropped (`keep_mask`);
- **spikes**: a fraction `spike_rate` of fixes moved `spike_km` km in a random direction;
- **duplicated times**: a fraction `duplicate_rate` of fixes repeated at the same time, half exactly and half with
  a fresh noise draw (a conflicting duplicate).

An undrogued drifter's windage slip turns its direction by `slip_angle`: +-0.5 rad over a week about a direction
of its own. `gdp_dataset` writes rows as a CF contiguous ragged array as clouddrift's GDP-hourly has it: dims
`traj`, `obs`; `id`, `rowsize`, `deploy_date`, `deploy_lon`, `deploy_lat` per trajectory; `time`, `lon`, `lat`,
`err_lon`, `err_lat`, `drogue_status`, `location_type` (1 = GPS) per fix; no lagda attributes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

WEEK = 7 * 86400.0  # the period of an undrogued drifter's slip direction swing, s


@dataclasses.dataclass(frozen=True)
class GdpProblems:
    """The GDP-like problems `corrupt` plants, and the undrogued drifters' share and slip (module docstring)."""

    noise_m: tuple[float, float] = (10.0, 100.0)  # per-fix position noise std range, m
    gaps_per_30d: float = 1.0  # gaps per drifter per 30 days
    gap_hours: tuple[float, float] = (3.0, 72.0)  # gap length range, hours
    missing: float = 0.02  # single fixes dropped
    spike_rate: float = 0.003  # fixes moved spike_km away
    spike_km: float = 50.0
    duplicate_rate: float = 0.005  # fixes repeated at the same time
    undrogued: float = 0.4  # drifters that lose their drogue
    slip_speed: float = 0.1  # windage slip of an undrogued drifter, m/s


def slip_angle(t, theta0, phase):
    """Returns the direction (rad, from east, counter-clockwise) of an undrogued drifter's windage slip at `t` s
    after its drogue's loss: `theta0 + 0.5 sin(2 pi t / week + phase)` (arrays broadcast)."""
    return theta0 + 0.5 * np.sin(2 * np.pi * t / WEEK + phase)


def keep_mask(n: int, config, dt: float, rng) -> np.ndarray:
    """Returns bool `(n,)`: which of n fixes dt s apart survive the gaps and the single missing fixes."""
    keep = rng.random(n) >= config.missing
    for _ in range(rng.poisson(config.gaps_per_30d * n * dt / (30 * 86400.0))):
        length = int(round(rng.uniform(*config.gap_hours) * 3600.0 / dt))
        start = rng.integers(0, n)
        keep[start:start + length] = False
    return keep


def corrupt(xy: np.ndarray, config, dt: float, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Returns (rows, sigma, fix, counts): one drifter's fixes with the GDP's noise, gaps, spikes and duplicates.

    Parameters
    ----------
    xy
        `(n, 2)` m: the clean positions, dt s apart, in a local east/north frame (zeros: the displacements alone).
    config
        the problems' settings (module docstring).
    dt
        the interval of the clean positions, s.
    rng
        numpy Generator; the draws follow a fixed order (outputs are reproducible from its state).

    Returns
    -------
    rows
        `(row, 2)` m: the fixes, in time order, duplicates next to their original.
    sigma
        `(row,)` m: each row's noise standard deviation.
    fix
        int `(row,)`: the clean position each row comes from (index into `xy`).
    counts
        name -> number: spikes, exact_duplicates, conflicting_duplicates.
    """
    idx = np.flatnonzero(keep_mask(len(xy), config, dt, rng))
    sigma = rng.uniform(*config.noise_m, size=idx.size)
    noisy = xy[idx] + sigma[:, None] * rng.standard_normal((idx.size, 2))
    spikes = rng.random(idx.size) < config.spike_rate
    angle = rng.uniform(0, 2 * np.pi, spikes.sum())
    noisy[spikes] += config.spike_km * 1e3 * np.stack([np.cos(angle), np.sin(angle)], -1)
    dup = np.flatnonzero(rng.random(idx.size) < config.duplicate_rate)
    conflicting = rng.random(dup.size) < 0.5
    order = np.sort(np.concatenate([np.arange(idx.size), dup]), kind="stable")
    extra = np.zeros(order.size, bool)
    extra[np.flatnonzero(np.diff(order) == 0) + 1] = True  # the second of each repeated row
    rows = noisy[order]
    redraw = np.zeros(order.size, bool)
    redraw[np.flatnonzero(extra)[conflicting]] = True
    rows[redraw] = xy[idx[order[redraw]]] + sigma[order[redraw], None] * rng.standard_normal((redraw.sum(), 2))
    counts = dict(spikes=int(spikes.sum()), exact_duplicates=int((~conflicting).sum()),
                  conflicting_duplicates=int(conflicting.sum()))
    return rows, sigma[order], idx[order], counts


def gdp_dataset(rows: dict, title: str, summary: str, deploy: bool = True):
    """Returns the GDP-hourly-like xarray Dataset (dims traj, obs) of an archive's rows.

    Parameters
    ----------
    rows
        per fix: `time` (datetime64), `lon`, `lat`, `err_lon`, `err_lat` (degrees), `drogue_status` (0: lost);
        per trajectory: `id`, `rowsize`.
    title, summary
        the global attributes of those names.
    deploy
        False leaves out `deploy_date`, `deploy_lon`, `deploy_lat`.
    """
    import xarray as xr

    starts = np.concatenate([[0], np.cumsum(rows["rowsize"])[:-1]]).astype(np.int64)
    deg = lambda name, units: {"long_name": name, "units": units}
    ds = xr.Dataset(
        {
            "rowsize": ("traj", rows["rowsize"], {"long_name": "number of observations per trajectory",
                                                  "sample_dimension": "obs", "units": "-"}),
            "deploy_date": ("traj", rows["time"][starts], {"long_name": "deployment date and time"}),
            "deploy_lon": ("traj", rows["lon"][starts], deg("deployment longitude", "degrees_east")),
            "deploy_lat": ("traj", rows["lat"][starts], deg("deployment latitude", "degrees_north")),
            "lon": ("obs", rows["lon"], {**deg("longitude", "degrees_east"), "standard_name": "longitude"}),
            "lat": ("obs", rows["lat"], {**deg("latitude", "degrees_north"), "standard_name": "latitude"}),
            "err_lon": ("obs", rows["err_lon"], deg("1-sigma error of longitude", "degrees_east")),
            "err_lat": ("obs", rows["err_lat"], deg("1-sigma error of latitude", "degrees_north")),
            "drogue_status": ("obs", rows["drogue_status"].astype(np.int8),
                              {"long_name": "status of the drogue", "flag_values": np.array([0, 1], np.int8),
                               "flag_meanings": "lost attached"}),
            "location_type": ("obs", np.ones(rows["lon"].size, np.int8),
                              {"long_name": "satellite-based location system", "flag_values": np.array([0, 1], np.int8),
                               "flag_meanings": "argos gps"}),
        },
        coords={"id": ("traj", rows["id"], {"long_name": "global drifter program buoy id",
                                            "cf_role": "trajectory_id"}),
                "time": ("obs", rows["time"], {"long_name": "time", "standard_name": "time"})},
        attrs={"title": title, "Conventions": "CF-1.6", "featureType": "trajectory", "summary": summary})
    ds["time"].encoding.update(units="seconds since 1970-01-01 00:00:00", dtype="float64")
    ds["deploy_date"].encoding.update(units="seconds since 1970-01-01 00:00:00", dtype="float64")
    return ds if deploy else ds.drop_vars(["deploy_date", "deploy_lon", "deploy_lat"])
