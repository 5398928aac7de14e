"""The pyqg-jax model of a regime, and one flow: spin-up, release, drifters and gridded truth."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simulate.qg.config import DAY, QGConfig
from simulate.qg.spectral import spectral_grid, spectral_velocity, step_drifters


def build_model(config: QGConfig):
    """Returns the pyqg-jax `SteppedModel` (float64, AB3 with step dt) of the config's regime.

    Raises
    ------
    ImportError
        if pyqg-jax is not installed (`pip install "lagda[qg]"`).
    """
    try:
        import pyqg_jax
    except ImportError:
        raise ImportError('QG flows need pyqg-jax: pip install "lagda[qg]" (or "pyqg-jax>=0.8")') from None
    precision = pyqg_jax.state.Precision.DOUBLE
    if config.regime == "rossby":
        # rd = 0: BTModel inverts q -> psi as psi = -q (1/|k|^2 + kd^2), the usual (|k|^2 + kd^2)^-1 only when kd = 0
        model = pyqg_jax.bt_model.BTModel(nx=config.nx, L=config.L, beta=config.beta, rd=config.rd, rek=config.rek,
                                          precision=precision)
    else:
        # pyqg's own frame (U1 = shear, U2 = 0), or the frame moving with the upper layer (U1 = 0, U2 = -shear)
        upper = config.shear if config.background == "full" else 0.0
        model = pyqg_jax.qg_model.QGModel(nx=config.nx, L=config.L, beta=config.beta, rd=config.rd, rek=config.rek,
                                          delta=config.delta, H1=config.H1, U1=upper, U2=upper - config.shear,
                                          precision=precision)
    return pyqg_jax.steppers.SteppedModel(model, pyqg_jax.steppers.AB3Stepper(dt=config.dt))


def rossby_frequencies(config: QGConfig, k1, k2) -> np.ndarray:
    """Returns omega_k = beta k_x / |k|^2 in rad/s (lagda's exp(+i omega t) convention; 0 for k = 0).

    The linear barotropic Rossby wave psi_k exp(i (k.x - w t)), w = -beta k_x / |k|^2 (kd = 0).
    """
    kx, ky = 2 * np.pi / config.L * np.asarray(k1, np.float64), 2 * np.pi / config.L * np.asarray(k2, np.float64)
    kappa2 = kx**2 + ky**2
    return np.where(kappa2 > 0, config.beta * kx / np.where(kappa2 > 0, kappa2, 1.0), 0.0)


def _rossby_initial_qh(model, config: QGConfig, key):
    """Returns q-hat `(1, ny, nk)` of random waves max(|k1|, |k2|) <= init_k_max with RMS speed rms_speed.

    Coefficients c_k ~ CN(0, (1 + |k|^2)^-3) (lagda's prior spectrum), then scaled to the RMS speed.
    """
    n, m = config.nx, config.init_k_max
    k1, k2 = (a.ravel() for a in jnp.meshgrid(jnp.arange(-m, m + 1), jnp.arange(-m, m + 1), indexing="ij"))
    re, im = jax.random.normal(key, (2, k1.size))
    c = (re + 1j * im) * (1.0 + k1**2 + k2**2) ** -1.5 * ((k1 != 0) | (k2 != 0))
    cell = (jnp.arange(n) + 0.5) / n
    phase = jnp.exp(2j * jnp.pi * (k1[:, None, None] * cell[None, None, :] + k2[:, None, None] * cell[None, :, None]))
    psi = jnp.real(jnp.einsum("m,myx->yx", c, phase))
    ph = jnp.fft.rfftn(psi)
    grid = spectral_grid(n, config.L)
    uv = jnp.fft.irfftn(spectral_velocity(ph, grid), s=(n, n), axes=(-2, -1))
    ph = ph * (config.rms_speed / jnp.sqrt(jnp.mean(uv**2) * 2))
    return (-model.wv2 * ph)[None]


def background_velocity(config: QGConfig) -> tuple[float, float]:
    """Returns the uniform velocity (u, v) in m/s that the drifters feel beyond the model's periodic anomaly.

    The observed layer's imposed flow in the model's frame: U1 = shear with `background` "full" (pyqg's
    frame), 0 with "anomaly" (the frame moving with the upper layer) and in the `rossby` regime (none).
    """
    return (config.shear if config.regime == "turbulence" and config.background == "full" else 0.0), 0.0


def release_points(config: QGConfig, key) -> jax.Array:
    """Returns release positions `(drifter, 2)` in metres inside `release_box`: a regular lattice ("fixed") or uniform
    ("random")."""
    x0, x1, y0, y1 = config.release_box
    low, size = np.array([[x0, y0]]), np.array([[x1 - x0, y1 - y0]])
    if config.release == "random":
        return config.L * (low + size * jax.random.uniform(key, (config.n_drifters, 2), jnp.float64))
    side = int(np.ceil(np.sqrt(config.n_drifters)))
    cell = (np.arange(side) + 0.5) / side
    lattice = np.stack(np.meshgrid(cell, cell, indexing="xy"), axis=-1).reshape(-1, 2)[: config.n_drifters]
    return jnp.asarray(config.L * (low + size * lattice))


def make_flow_runner(config: QGConfig) -> Callable:
    """Returns jitted `run(key) -> (release, positions, psi, u, v)` for one spun-up flow and its successive windows.

    Shapes, each with a leading `(window,)`: release `(drifter, 2)` m; positions `(drifter, obs, 2)` m, unwrapped;
    psi, u, v `(truth, ny, nx)` of the observed (upper) layer at t = 0 and every truth_interval (m^2/s, m/s):
    psi the periodic anomaly streamfunction, u, v the velocity the drifters feel, psi's velocity plus
    `background_velocity(config)`.
    """
    stepped = build_model(config)
    model, stepper = stepped.model, stepped.stepper
    grid, dt = spectral_grid(config.nx, config.L), config.dt
    n_spin = int(round(config.spin_up_days * DAY / dt))
    background = background_velocity(config)
    # the uniform background as the rfft2 coefficient at k = 0 (spectral_value divides by the number of points)
    uniform = jnp.zeros((2, config.nx, config.nx // 2 + 1)).at[:, 0, 0].set(jnp.asarray(background) * grid.n_points)

    def spectral(full):
        """Spectral velocity the drifters feel (upper layer and background) and its time derivative (the PV tendency
        inverted; the background is steady), `(2, ny, nk)` each."""
        dph = model._apply_a_ph(full.state.update(qh=full.dqhdt))  # q -> psi is linear, so d/dt commutes with it
        uvh = spectral_velocity(full.ph[0], grid)
        return (uvh + uniform if any(background) else uvh), spectral_velocity(dph[0], grid)

    def model_step(state, full):
        """One AB3 step reusing the tendency already in `full` (SteppedModel.step_model without recomputing it)."""
        state = stepper.apply_updates(state, full.state.update(qh=full.dqhdt))
        state = state.update(state=model.postprocess_state(state.state))
        return state, model.get_full_state(state.state)

    def one_step(n, carry):
        state, full, z, current = carry
        state, full = model_step(state, full)
        following = spectral(full)
        z = step_drifters(z, n * dt, dt, (*current, *following), grid)
        return state, full, z, following

    def one_obs(carry, j):
        carry = jax.lax.fori_loop(0, config.steps_per_obs, lambda i, c: one_step(j * config.steps_per_obs + i, c),
                                  carry)
        return carry, carry[2]

    def snapshot(full):
        psi = jnp.fft.irfftn(full.ph[0], s=(config.nx, config.nx))
        return jnp.stack([psi, full.u[0] + background[0], full.v[0] + background[1]])

    def one_truth(carry, m):
        carry, z = jax.lax.scan(one_obs, carry, m * config.obs_per_truth + jnp.arange(config.obs_per_truth))
        return carry, (z, snapshot(carry[1]))

    def one_window(carry, release_key):
        state, full = carry
        release = release_points(config, release_key)
        start = snapshot(full)
        (state, full, _, _), (z, fields) = jax.lax.scan(one_truth, (state, full, release, spectral(full)),
                                                        jnp.arange(config.n_truth))
        positions = jnp.transpose(z.reshape(config.n_obs, config.n_drifters, 2), (1, 0, 2))
        fields = jnp.concatenate([start[None], fields])  # (truth, 3, ny, nx)
        return (state, full), (release, positions, fields[:, 0], fields[:, 1], fields[:, 2])

    @jax.jit
    def run(key):
        init_key, release_key = jax.random.split(key)
        inner = model.create_initial_state(init_key)
        if config.regime == "rossby":
            inner = inner.update(qh=_rossby_initial_qh(model, config, init_key))
        state = stepped.initialize_stepper_state(inner)
        full = model.get_full_state(state.state)
        state, full = jax.lax.fori_loop(0, n_spin, lambda i, c: model_step(*c), (state, full))
        # window 0 releases from release_key itself (independent of `windows`), window w from fold_in(., w)
        keys = jnp.stack([release_key] + [jax.random.fold_in(release_key, w) for w in range(1, config.windows)])
        _, out = jax.lax.scan(one_window, (state, full), keys)
        return out

    return run


class QGFlows(NamedTuple):
    """The flows of `simulate_qg`, NumPy float64, SI units (shapes in `make_flow_runner`, with a leading `flow`)."""

    release: np.ndarray  # (flow, drifter, 2) m
    positions: np.ndarray  # (flow, drifter, obs, 2) m, unwrapped
    psi: np.ndarray  # (flow, truth, ny, nx) m^2/s, the periodic anomaly
    u: np.ndarray  # (flow, truth, ny, nx) m/s, what the drifters feel: the anomaly's -dpsi/dy plus the background
    v: np.ndarray  # (flow, truth, ny, nx) m/s, dpsi/dx plus the background


def simulate_qg(config: QGConfig, progress: Callable[[int, int], None] | None = None) -> QGFlows:
    """Returns the flows of `config`: flow s from key fold_in(key(seed), s) (module docstring), its windows
    successive (file flow s * windows + w is window w of flow s; with windows = 1 the flows are independent).

    Parameters
    ----------
    config
        the settings (validated here)
    progress
        called as progress(done, total) after each flow.

    Raises
    ------
    ValueError
        for a bad setting
    ImportError
        without pyqg-jax.
    """
    config.validate()
    # pyqg-jax broadcasts (1, ny, nk) against (ny, nk), which a strict rank-promotion setting would refuse
    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):
        run = make_flow_runner(config)
        key = jax.random.key(config.seed)
        out = []
        if progress is not None:
            progress(0, config.n_flows)
        for s in range(config.n_flows):
            out.append([np.asarray(a, np.float64) for a in run(jax.random.fold_in(key, s))])
            if progress is not None:
                progress(s + 1, config.n_flows)
    return QGFlows(*(np.concatenate(parts) for parts in zip(*out)))
