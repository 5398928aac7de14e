"""Test utilities shared by the tests and the experiments: small problems with known truth, and a compile counter.

`make_twin`: exact tracks of prior draws in a K = 9 model (the assimilation tests' twin experiment);
`make_pairs`: a small paired dataset (training and retrieval tests); `write_gdp_hourly_files`: a ragged track
file as the GDP's hourly collection comes, a file per drifter; `count_compiles`: how often JAX
compiled a function inside a block (read off `jax.log_compiles`, so no production code counts its traces).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np

from lagda.assimilation.model import FlowModel
from lagda.learning.data import PairedData
from simulate import (
    draw_coefficients,
    draw_frequencies,
    grid_fields,
    rectangular_modes,
    simulate_tracks,
    spectrum,
)

DT = 1e-4


@dataclasses.dataclass(frozen=True)
class Twin:
    model: FlowModel
    coef: np.ndarray  # complex (field, mode) truth
    release: np.ndarray  # (field, drifter, 2)
    positions: np.ndarray  # (field, drifter, obs, 2)
    times: np.ndarray  # (drifter, obs)

    def field_error(self, coef_est, f: int) -> float:
        """Relative L2 velocity-field error of coef_est `(mode,)` against field f over the window."""
        m = self.model
        ts = np.linspace(0.0, float(self.times.max()), 4)
        _, u1, v1 = grid_fields(np.asarray(coef_est)[None], m.k1, m.k2, m.omega, ts, 16)
        _, u0, v0 = grid_fields(self.coef[f : f + 1], m.k1, m.k2, m.omega, ts, 16)
        return float(np.sqrt(np.sum((u1 - u0) ** 2 + (v1 - v0) ** 2) / np.sum(u0**2 + v0**2)))


def write_twin_tracks(twin: Twin, path) -> None:
    """Writes the twin's tracks, truth and modes as a CF trajectory file (lagda.io.tracks)."""
    from lagda.io.tracks import Tracks, write_tracks

    n_field, n_drifter, n_obs, _ = twin.positions.shape
    tracks = Tracks(positions=twin.positions.reshape(-1, n_obs, 2),
                    times=np.tile(twin.times[:1], (n_field * n_drifter, 1)),
                    field=np.repeat(np.arange(n_field), n_drifter), trajectory_id=np.arange(n_field * n_drifter),
                    true_coef=twin.coef, k1=twin.model.k1, k2=twin.model.k2, omega=twin.model.omega,
                    release=twin.release.reshape(-1, 2))
    write_tracks(tracks, path)


GDP_FILL = -1e34  # the GDP files' missing value, stored as is (not declared as a _FillValue)


def write_gdp_hourly_files(ragged, folder, lost: dict | None = None, missing: dict | None = None) -> list:
    """Writes the drifters of a ragged lon/lat file (`rowsize`, `id`, `lon`, `lat`, `time` over `obs`) as the GDP
    hourly collection's files come from NCEI, one per drifter, and returns their paths: `drifter_hourly_<ID>.nc`
    with dimensions traj = 1 and obs, `ID(traj)`, `rowsize(traj)`, `time`, `longitude`, `latitude` over (traj,
    obs) in seconds since 1970 and degrees, `deploy_date` (the first fix's time), `end_date` (the last's) and
    `drogue_lost_date` over traj, no featureType, no cf_role, missing values -1e34 stored as numbers.

    Parameters
    ----------
    ragged
        the file to split
    folder
        where the files go (made if missing).
    lost
        drifter index -> drogue loss time (seconds since 1970); the others' drogue_lost_date is -1e34.
    missing
        drifter index -> indices of its fixes whose time and position are written as -1e34.
    """
    import os

    import xarray as xr

    from lagda.io.cf_time import cf_seconds

    os.makedirs(folder, exist_ok=True)
    with xr.open_dataset(ragged, decode_times=False) as ds:
        ds = ds.load()
    ends = np.cumsum(ds["rowsize"].values)
    paths = []
    for i, (start, stop) in enumerate(zip(ends - ds["rowsize"].values, ends)):
        seconds = cf_seconds(ds["time"].values[start:stop], ds["time"].attrs["units"], ds["time"].attrs.get("calendar"))
        lon, lat = ds["lon"].values[start:stop].astype(np.float64), ds["lat"].values[start:stop].astype(np.float64)
        bad = list((missing or {}).get(i, ()))
        seconds[bad], lon[bad], lat[bad] = GDP_FILL, GDP_FILL, GDP_FILL
        drifter = int(300234010000000 + i)
        units = {"units": "seconds since 1970-01-01 00:00:00"}
        out = xr.Dataset(
            {"ID": ("traj", [drifter], {"long_name": "Global Drifter Program Buoy ID"}),
             "rowsize": ("traj", [len(seconds)]),
             "deploy_date": ("traj", [seconds[0]], units),
             "end_date": ("traj", [seconds[seconds != GDP_FILL][-1]], units),
             "drogue_lost_date": ("traj", [(lost or {}).get(i, GDP_FILL)], units),
             "time": (("traj", "obs"), seconds[None], units),
             "longitude": (("traj", "obs"), lon[None], {"units": "degrees_east", "long_name": "Longitude"}),
             "latitude": (("traj", "obs"), lat[None], {"units": "degrees_north", "long_name": "Latitude"})},
            attrs={"title": "Global Drifter Program hourly drifting buoy collection", "Conventions": "CF-1.6"})
        path = os.path.join(folder, f"drifter_hourly_{drifter}.nc")
        out.to_netcdf(path, engine="netcdf4", encoding={name: {"_FillValue": None} for name in out.variables})
        paths.append(path)
    return paths


def make_twin(n_field=2, n_drifter=4, n_obs=200, stride=1, seed=1, rms_speed=10.0) -> Twin:
    """Returns exact tracks of prior draws (K = 9, dt 1e-4, rms speed 10 unless given)."""
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    scale = spectrum(k1, k2, 1.5, rms_speed)
    omega = draw_frequencies(jax.random.key(0), len(k1), 20 * np.pi)
    coef = np.asarray(draw_coefficients(jax.random.key(seed), scale, n_field, np.complex128))
    release = 0.5 + 0.4 * np.random.default_rng(seed).random((n_field, n_drifter, 2))
    positions = np.asarray(simulate_tracks(coef, release, k1, k2, omega, DT, n_obs, stride))
    times = np.tile(np.arange(1, n_obs + 1) * stride * DT, (n_drifter, 1))
    return Twin(FlowModel(k1, k2, omega, scale, DT), coef, release, positions, times)


def make_pairs(n, seed, n_obs=100):
    """Returns PairedData of n small fields: K = 9, dt 1e-3, n_obs observations."""
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    scale = spectrum(k1, k2, 1.5, 10.0)
    omega = draw_frequencies(jax.random.key(0), len(k1), 20 * np.pi)
    coef = draw_coefficients(jax.random.key(seed), scale, n, jnp.complex128)
    release = jnp.full((n, 1, 2), 0.75, jnp.float64)
    positions = simulate_tracks(coef, release, k1, k2, jnp.asarray(omega), 1e-3, n_obs, 1)
    return PairedData(coef=np.asarray(coef, np.complex64), positions=np.asarray(positions, np.float32),
                      time=1e-3 * np.arange(1, n_obs + 1), k1=k1, k2=k2, omega=omega, prior_scale=scale,
                      attrs={"dt": 1e-3})


@contextlib.contextmanager
def count_compiles(name: str):
    """Yields a dict whose "count" is, after the block, how many times JAX compiled a jitted function `name` in it.

    Reads the records of `jax.log_compiles` ("Compiling jit(<name>) ..."); the function's name is its Python name.
    """
    counter, pattern = {"count": 0}, re.compile(rf"Compiling (jit|pjit)\({re.escape(name)}\)")

    class Counter(logging.Handler):
        def emit(self, record):
            if pattern.search(record.getMessage()):
                counter["count"] += 1

    handler, logger = Counter(level=logging.DEBUG), logging.getLogger("jax")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the compile log is counted here, not printed
    try:
        with jax.log_compiles(True):
            yield counter
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
