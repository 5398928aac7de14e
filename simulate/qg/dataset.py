"""The QG truth file: the truth's projection on Fourier modes and the CF trajectory file with the truth."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from simulate.qg.config import TIME_ORIGIN, QGConfig
from simulate.qg.model import QGFlows, background_velocity, rossby_frequencies, simulate_qg
from simulate.schema import CONVENTIONS


def project(psi, k1, k2) -> np.ndarray:
    """Returns the least-squares coefficients c `(..., mode)` of gridded psi `(..., ny, nx)` on Fourier modes.

    psi(z) ~ Re sum_k c_k exp(2 pi i k.z) on the cell centres z_ij = ((i + 1/2)/n, (j + 1/2)/n): the modes
    are orthogonal there (|k1|, |k2| < n/2), so the least-squares fit is the DFT coefficient
    c_k = (1/N) sum_ij psi_ij exp(-2 pi i k.z_ij), the minimum-norm split of each +-k pair (c_-k = conj c_k).
    Units are psi's; the velocity of the fit is the least-squares fit of the gridded velocity.
    """
    psi = np.asarray(psi, np.float64)
    n = psi.shape[-1]
    k1, k2 = np.asarray(k1), np.asarray(k2)
    dft = np.fft.fft2(psi) / (n * n)
    return dft[..., k2 % n, k1 % n] * np.exp(-1j * np.pi * (k1 + k2) / n)


def mapping_attrs(config: QGConfig) -> dict:
    """Returns the `lagda_mapping_*` global attributes (lagda.io.physical.Mapping's, projected metres)."""
    return {
        "lagda_mapping_coordinates": "projected",
        "lagda_mapping_box": np.array([0.0, config.L, 0.0, config.L]),
        "lagda_mapping_box_units": "m",
        "lagda_mapping_time_origin": TIME_ORIGIN,
        "lagda_mapping_time_scale_s": float(config.time_scale_s),
        "lagda_mapping_projection": "x = (x_m - west) / (east - west), y = (y_m - south) / (north - south); "
                                    "t = (time - time_origin) / time_scale_s",
        "lagda_mapping_notes": json.dumps([]),
    }


def to_xarray(config: QGConfig, flows: QGFlows, history: str = ""):
    """Returns the QG truth file as an xarray Dataset (docs/design/qg.md, "The QG truth file").

    A CF trajectory file (orthogonal multidimensional layout: x, y (trajectory, obs) in metres,
    one CF time(obs) shared by all drifters) of all flow x drifter tracks, plus the truth on dims
    (flow, truth_time, grid_y, grid_x) and its projection `proj_coef_*` (flow, truth_time, mode) in lagda's model
    units (psi T / L^2). psi is the periodic
    anomaly; u, v are the velocity the drifters feel, psi's velocity plus the uniform `u_background`, `v_background`
    (flow, truth_time).
    """
    import pyqg_jax
    import xarray as xr

    from simulate.flow import rectangular_modes

    n_flow, n_drifter, n_obs = flows.positions.shape[:3]
    origin = (np.datetime64(TIME_ORIGIN.rstrip("Z"), "s")
              - np.datetime64("1970-01-01T00:00:00", "s")).astype(np.float64)
    cf_time = lambda name: {"units": "seconds since 1970-01-01T00:00:00Z", "standard_name": "time",
                            "calendar": "standard", "units_metadata": "leap_seconds: none", "long_name": name}
    metres = lambda axis, name: {"units": "m", "standard_name": f"projection_{axis}_coordinate", "long_name": name}
    one = lambda name: {"units": "1", "long_name": name}
    obs_time = origin + config.obs_interval * np.arange(1, n_obs + 1)
    truth_time = origin + config.truth_interval * np.arange(config.n_truth + 1)
    k1, k2 = rectangular_modes((-config.k_max, config.k_max), (-config.k_max, config.k_max))
    coef = project(flows.psi, k1, k2) * config.time_scale_s / config.L**2  # (flow, truth, mode), model units
    cell = (np.arange(config.nx) + 0.5) * config.L / config.nx
    layer = "" if config.regime == "rossby" else "upper-layer "
    field4 = ("flow", "truth_time", "grid_y", "grid_x")
    steady = np.ones((n_flow, config.n_truth + 1))  # the background is uniform and steady here, but stored per time
    u_bg, v_bg = background_velocity(config)
    data = {
        "x": (("trajectory", "obs"), flows.positions[..., 0].reshape(-1, n_obs),
              metres("x", "drifter position x (east), unwrapped")),
        "y": (("trajectory", "obs"), flows.positions[..., 1].reshape(-1, n_obs),
              metres("y", "drifter position y (north), unwrapped")),
        "field": ("trajectory", np.repeat(np.arange(n_flow), n_drifter),
                  one("index of the flow field sampled by the drifter")),
        "x0": ("trajectory", flows.release[..., 0].ravel() / config.L,
               one("drifter release position x at t = 0 (model domain lengths)")),
        "y0": ("trajectory", flows.release[..., 1].ravel() / config.L,
               one("drifter release position y at t = 0 (model domain lengths)")),
        "k1": ("mode", k1.astype(np.int32), one("wavenumber k1 (x) of the projection basis mode")),
        "k2": ("mode", k2.astype(np.int32), one("wavenumber k2 (y) of the projection basis mode")),
        "psi": (field4, flows.psi.astype(np.float32),
                {"units": "m2 s-1",
                 "long_name": f"{layer}streamfunction psi of the periodic anomaly, without the background (truth)"}),
        "u": (field4, flows.u.astype(np.float32),
              {"units": "m s-1", "long_name": f"{layer}velocity x component u = -dpsi/dy + u_background (truth)"}),
        "v": (field4, flows.v.astype(np.float32),
              {"units": "m s-1", "long_name": f"{layer}velocity y component v = dpsi/dx + v_background (truth)"}),
        "u_background": (("flow", "truth_time"), u_bg * steady,
                         {"units": "m s-1", "long_name": "uniform background velocity x component (felt by drifters)"}),
        "v_background": (("flow", "truth_time"), v_bg * steady,
                         {"units": "m s-1", "long_name": "uniform background velocity y component (felt by drifters)"}),
        "proj_coef_re": (("flow", "truth_time", "mode"), coef.real,
                         one("real part of the truth's least-squares coefficient c_k (model units)")),
        "proj_coef_im": (("flow", "truth_time", "mode"), coef.imag,
                         one("imaginary part of the truth's least-squares coefficient c_k (model units)")),
    }
    if config.regime == "rossby":  # the paper's model is exact here: coefficients at t = 0 with the Rossby frequencies
        data["omega"] = ("mode", rossby_frequencies(config, k1, k2) * config.time_scale_s,
                         one("linear Rossby-wave frequency omega_k = beta k_x / |k|^2 (model units)"))
        data["true_coef_re"] = (("flow", "mode"), coef[:, 0].real,
                                one("real part of the true coefficient c_k at t = 0"))
        data["true_coef_im"] = (("flow", "mode"), coef[:, 0].imag,
                                one("imaginary part of the true coefficient c_k at t = 0"))
    coords = {
        "trajectory_id": ("trajectory",
                          np.array([f"f{s}d{d}" for s in range(n_flow) for d in range(n_drifter)], dtype=object),
                          {"cf_role": "trajectory_id", "long_name": "drifter identifier (flow s, drifter d)"}),
        "time": ("obs", obs_time, cf_time("time of the fix (shared by every drifter: the orthogonal layout)")),
        "truth_time": ("truth_time", truth_time, cf_time("time of the gridded truth")),
        "grid_x": ("grid_x", cell, {**metres("x", "grid cell centre x"), "axis": "X"}),
        "grid_y": ("grid_y", cell, {**metres("y", "grid cell centre y"), "axis": "Y"}),
    }
    ds = xr.Dataset(data, coords=coords)
    for name in ("x", "y"):
        ds[name].encoding["coordinates"] = "time y x"
    model = "BTModel (barotropic)" if config.regime == "rossby" else "QGModel (two-layer, upper layer observed)"
    ds.attrs = {
        "Conventions": CONVENTIONS, "featureType": "trajectory",
        "title": f"lagda QG truth ({config.regime}): drifter tracks in a pyqg-jax flow with its gridded truth",
        "source": f"pyqg-jax {pyqg_jax.__version__} {model}; drifters by simulate.qg (RK4, spectral interpolation)",
        "history": history or "written by simulate.qg.write_qg_dataset",
        "lagda_track_format_version": "2", "lagda_qg_format_version": "2",
        **mapping_attrs(config), **{f"qg_{name}": value for name, value in dataclasses.asdict(config).items()},
    }
    return ds


def write_qg_dataset(config: QGConfig, out, *, overwrite: bool = False, progress=None, history: str = ""):
    """Returns the path of the QG truth file written by simulating `config` (atomically: temporary name, rename).

    Raises
    ------
    ValueError
        for a bad setting, or an output that exists (without `overwrite`) or cannot be written.
    ImportError
        without pyqg-jax.
    """
    from pathlib import Path

    from simulate.generate import check_output, write_netcdf

    config.validate()
    out = Path(out)
    check_output(out, overwrite)
    write_netcdf(to_xarray(config, simulate_qg(config, progress), history), out)
    return out
