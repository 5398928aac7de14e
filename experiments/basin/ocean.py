"""The basin-year ocean: a pyqg-jax QG year on a large domain, its drifters, and the truth on a lon/lat grid.

The flow is pyqg-jax's two-layer `QGModel` (simulate.qg) on a doubly periodic square of side `L`, run in its own
frame so the upper layer carries the imposed mean current U1 = `shear` eastward plus its eddies. It is spun up
with a long step `spin_dt` (the spun-up potential vorticity restarts the AB3 stepper at the year's step `dt`),
then run for `days` days while `n_drifters` drifters, uniform at day 0, are advected in the upper layer's velocity
(simulate.qg.spectral: trigonometric interpolation, RK4 with the model's step), recorded every `dt`, with the
gridded upper-layer velocity stored daily. The flow is incompressible, so the drifters stay uniform on the torus
and a track cut at any day r is a drifter released there at day r (how `experiments.basin.archive` releases them
over the year).

**On the sphere.** The domain is placed through lagda's tangent plane (lagda.io.physical) at `centre`
(lon_c, lat_c): a plane point (X, Y) metres from the domain centre is lon = lon_c + X / (R cos lat_c),
lat = lat_c + Y / R, so the eastward velocity of a drifter on the sphere is u_X cos(lat) / cos(lat_c) and the
northward one v_Y. `truth_on_grid` evaluates the daily field at the region's cell centres in that geometry
(spectral interpolation of the model grid: exact for its band-limited field).
"""

from __future__ import annotations

import dataclasses

import numpy as np

EARTH_RADIUS_M = 6_371_008.8  # as lagda.io.physical
DAY = 86400.0


@dataclasses.dataclass(frozen=True)
class OceanConfig:
    """Settings of the basin-year ocean and its drifters (defaults: the full benchmark)."""

    nx: int = 128  # QG grid points per side
    L: float = 4.5e6  # domain side, m
    rd: float = 35_000.0  # deformation radius, m (about one grid cell, as pyqg's default 64^2 model)
    beta: float = 1.0e-11  # gradient of the Coriolis parameter, 1/(m s)
    shear: float = 0.06  # imposed U1 - U2, m/s: the upper layer's mean eastward current
    rek: float = 5.787e-7  # linear bottom drag, 1/s
    dt: float = 3600.0  # model and drifter step during the year, s (= the fix interval)
    spin_dt: float = 14400.0  # model step during the spin-up, s
    spin_up_days: float = 1460.0  # spin-up, days
    days: int = 365  # the recorded year, days
    n_drifters: int = 400  # drifters advected over the whole year
    centre: tuple[float, float] = (-30.0, 30.0)  # (lon, lat) of the domain centre on the sphere, degrees
    seed: int = 0  # initial state and drifter positions

    def validate(self) -> "OceanConfig":
        """Returns self, or raises ValueError naming the bad setting."""
        if not (self.nx >= 16 and self.nx % 2 == 0):
            raise ValueError(f"nx must be even and >= 16, got {self.nx}")
        if abs(self.spin_up_days * DAY / self.spin_dt - round(self.spin_up_days * DAY / self.spin_dt)) > 1e-9:
            raise ValueError(f"spin_dt = {self.spin_dt} s does not divide {self.spin_up_days} days")
        if abs(DAY / self.dt - round(DAY / self.dt)) > 1e-9:
            raise ValueError(f"dt = {self.dt} s does not divide a day")
        if self.days < 1 or self.n_drifters < 1:
            raise ValueError(f"days and n_drifters must be >= 1, got {self.days}, {self.n_drifters}")
        return self


def _qg_config(cfg: OceanConfig, dt: float):
    from simulate.qg import turbulence

    return turbulence(nx=cfg.nx, L=cfg.L, rd=cfg.rd, beta=cfg.beta, shear=cfg.shear, rek=cfg.rek, dt=dt,
                      spin_up_days=0.0, window_days=float(cfg.days), obs_interval=dt, n_drifters=cfg.n_drifters,
                      k_max=3, background="full").validate()


def simulate_year(cfg: OceanConfig, log=print) -> dict:
    """Returns the year: positions `(drifter, obs, 2)` m unwrapped at t_j = j dt (j = 0..days DAY / dt), and the
    upper layer's velocity u, v `(day, ny, nx)` m/s (background included) at days 0..days on the cell centres.

    Raises
    ------
    ValueError
        for a bad setting
    ImportError
        without pyqg-jax.
    """
    import time

    import jax
    import jax.numpy as jnp

    from simulate.qg import background_velocity, build_model, spectral_grid, spectral_velocity, step_drifters

    cfg.validate()
    fine_cfg = _qg_config(cfg, cfg.dt)
    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        coarse, fine = build_model(_qg_config(cfg, cfg.spin_dt)), build_model(fine_cfg)
        model, stepper = fine.model, fine.stepper
        grid, n = spectral_grid(cfg.nx, cfg.L), cfg.nx
        u_bg = background_velocity(fine_cfg)[0]
        uniform = jnp.zeros((2, n, n // 2 + 1)).at[0, 0, 0].set(u_bg * grid.n_points)
        n_spin = int(round(cfg.spin_up_days * DAY / cfg.spin_dt))
        per_day = int(round(DAY / cfg.dt))

        @jax.jit
        def spin(key):
            state = coarse.initialize_stepper_state(coarse.model.create_initial_state(key))
            return jax.lax.fori_loop(0, n_spin, lambda i, s: coarse.step_model(s), state).state

        def spectral(full):
            dph = model._apply_a_ph(full.state.update(qh=full.dqhdt))
            return spectral_velocity(full.ph[0], grid) + uniform, spectral_velocity(dph[0], grid)

        def one_step(carry, j):
            state, full, z, current = carry
            state = stepper.apply_updates(state, full.state.update(qh=full.dqhdt))
            state = state.update(state=model.postprocess_state(state.state))
            full = model.get_full_state(state.state)
            following = spectral(full)
            z = step_drifters(z, j * cfg.dt, cfg.dt, (*current, *following), grid)
            return (state, full, z, following), z

        def one_day(carry, d):
            carry, z = jax.lax.scan(one_step, carry, d * per_day + jnp.arange(per_day))
            full = carry[1]
            return carry, (z, jnp.stack([full.u[0] + u_bg, full.v[0]]))

        @jax.jit
        def year(inner, z0):
            state = fine.initialize_stepper_state(inner)
            full = model.get_full_state(state.state)
            _, (z, uv) = jax.lax.scan(one_day, (state, full, z0, spectral(full)), jnp.arange(cfg.days))
            first = jnp.stack([full.u[0] + u_bg, full.v[0]])
            return z, jnp.concatenate([first[None], uv])

        key_flow, key_release = jax.random.split(jax.random.key(cfg.seed))
        began = time.perf_counter()
        inner = jax.block_until_ready(spin(key_flow))
        log(f"QG spin-up: {n_spin} steps of {cfg.spin_dt:g} s ({cfg.spin_up_days:g} days) on {n}^2 in "
            f"{time.perf_counter() - began:.0f} s")
        z0 = cfg.L * jax.random.uniform(key_release, (cfg.n_drifters, 2), jnp.float64)
        began = time.perf_counter()
        z, uv = jax.block_until_ready(year(inner, z0))
        log(f"QG year: {cfg.days * per_day} steps of {cfg.dt:g} s with {cfg.n_drifters} drifters in "
            f"{time.perf_counter() - began:.0f} s")
    z = np.asarray(z, np.float64).reshape(cfg.days * per_day, cfg.n_drifters, 2)
    positions = np.concatenate([np.asarray(z0)[:, None], np.transpose(z, (1, 0, 2))], axis=1)
    uv = np.asarray(uv, np.float64)
    return {"positions": positions, "u": uv[:, 0], "v": uv[:, 1]}


def plane_to_lonlat(cfg: OceanConfig, x, y) -> tuple[np.ndarray, np.ndarray]:
    """Returns lon, lat in degrees of domain positions x, y in metres in [0, L) (module docstring)."""
    lon_c, lat_c = cfg.centre
    lon = lon_c + np.rad2deg((np.asarray(x) - cfg.L / 2) / (EARTH_RADIUS_M * np.cos(np.deg2rad(lat_c))))
    return lon, lat_c + np.rad2deg((np.asarray(y) - cfg.L / 2) / EARTH_RADIUS_M)


def lonlat_to_plane(cfg: OceanConfig, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """Returns domain positions x, y in metres of lon, lat in degrees (the inverse of `plane_to_lonlat`)."""
    lon_c, lat_c = cfg.centre
    x = cfg.L / 2 + np.deg2rad(np.asarray(lon) - lon_c) * EARTH_RADIUS_M * np.cos(np.deg2rad(lat_c))
    return x, cfg.L / 2 + np.deg2rad(np.asarray(lat) - lat_c) * EARTH_RADIUS_M


def _interpolation_matrix(points_m: np.ndarray, n: int, L: float) -> np.ndarray:
    """Returns E `(point, n)` complex with f(points) = Re(E @ fhat) for fhat = fft(f) / n along one axis of the
    cell-centred grid (trigonometric interpolation; the Nyquist term taken as a cosine)."""
    k = np.fft.fftfreq(n, 1.0 / n)
    phase = np.exp(2j * np.pi * np.outer(points_m - 0.5 * L / n, k) / L)
    phase[:, n // 2] = np.cos(np.pi * n * (points_m - 0.5 * L / n) / L)
    return phase


def truth_on_grid(cfg: OceanConfig, u, v, lon, lat, times):
    """Returns the truth Dataset u, v `(time, lat, lon)` m/s (eastward, northward on the sphere) at cell centres
    `lon` `(nlon,)`, `lat` `(nlat,)` degrees of the daily model fields u, v `(time, ny, nx)`.

    Raises
    ------
    ValueError
        if a cell centre lies outside the domain.
    """
    import xarray as xr

    x, y = lonlat_to_plane(cfg, lon, lat)
    if x.min() < 0 or x.max() > cfg.L or y.min() < 0 or y.max() > cfg.L:
        raise ValueError(f"the region's cells reach outside the {cfg.L / 1e3:g} km domain: widen L or shrink it")
    ex, ey = _interpolation_matrix(x, cfg.nx, cfg.L), _interpolation_matrix(y, cfg.nx, cfg.L)
    scale = (np.cos(np.deg2rad(lat)) / np.cos(np.deg2rad(cfg.centre[1])))[:, None]
    out = {}
    for name, field, factor in (("u", u, scale), ("v", v, 1.0)):
        fhat = np.fft.fft2(np.asarray(field, np.float64)) / cfg.nx**2  # (time, ky, kx)
        out[name] = (factor * np.real(np.einsum("ak,tkl,bl->tab", ey, fhat, ex, optimize=True))).astype(np.float32)
    attrs = lambda d: {"units": "m s-1", "long_name": f"{d} velocity of the QG upper layer on the sphere (truth)"}
    return xr.Dataset(
        {"u": (("time", "lat", "lon"), out["u"], attrs("eastward")),
         "v": (("time", "lat", "lon"), out["v"], attrs("northward"))},
        coords={"time": ("time", times), "lat": ("lat", np.asarray(lat), {"units": "degrees_north"}),
                "lon": ("lon", np.asarray(lon), {"units": "degrees_east"})},
        attrs={"title": "basin-year truth: daily QG velocity on the region's grid",
               **{f"ocean_{k}": (str(val) if isinstance(val, tuple) else val)
                  for k, val in dataclasses.asdict(cfg).items()}})
