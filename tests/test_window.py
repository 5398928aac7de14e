"""A box that is a window into a larger ocean: the flow does not repeat at its edges.

Drifters in a steady uniform shear u = U0 + s (y - y_c), v = 0 (exact tracks: x(t) = x0 + u(y0) t) over
a 100 km square. The shear is not periodic in any box: a periodic basis on a box that ends where the
drifters end puts the sawtooth's jump among them (Gibbs ringing where the data are); the inferred box,
the tracks' extent plus a margin, puts it where no drifter is, and k_max keeps its resolution over the
extent. Scored where the drifters are (the grid cells inside their extent).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from lagda.assimilation import AssimilateSettings, assimilate_file
from lagda.io.physical import BOX_MARGIN

SIDE_M, U0, SHEAR = 1e5, 0.01, 0.02 / 1e5  # m, m/s, 1/s
DAYS, N_DRIFTER = 10, 24


def _shear_file(path) -> tuple[float, float, float, float]:
    """Writes the tracks (CF trajectory, projected metres, hourly); returns their extent (x0, x1, y0, y1) in m."""
    rng = np.random.default_rng(3)
    x0, y0 = rng.uniform(0, SIDE_M / 2, N_DRIFTER), np.linspace(0, SIDE_M, N_DRIFTER)  # y: the larger side
    seconds = np.arange(0, DAYS * 86400 + 1, 3600.0)
    x = x0[:, None] + (U0 + SHEAR * (y0[:, None] - SIDE_M / 2)) * seconds[None, :]
    y = np.repeat(y0[:, None], len(seconds), axis=1)
    time = np.datetime64("2024-03-01T00:00:00") + (seconds * 1e9).astype("timedelta64[ns]")
    ds = xr.Dataset({"x": (("trajectory", "obs"), x, {"units": "m", "axis": "X"}),
                     "y": (("trajectory", "obs"), y, {"units": "m", "axis": "Y"}),
                     "time": (("trajectory", "obs"), np.tile(time, (N_DRIFTER, 1)))},
                    attrs={"featureType": "trajectory", "Conventions": "CF-1.11"})
    ds.to_netcdf(path)
    return float(x.min()), float(x.max()), float(y.min()), float(y.max())


def _error_where_the_drifters_are(result_path, extent) -> float:
    """Relative L2 error of the result's mean velocity against the shear over the cells inside the extent."""
    with xr.open_dataset(result_path) as res:
        x, y = res["x_m"].values, res["y_m"].values
        inside_x, inside_y = (x > extent[0]) & (x < extent[1]), (y > extent[2]) & (y < extent[3])
        u = res["u_mean"].values[0][:, inside_y][:, :, inside_x]
        v = res["v_mean"].values[0][:, inside_y][:, :, inside_x]
    u_true = np.broadcast_to((U0 + SHEAR * (y[inside_y] - SIDE_M / 2))[None, :, None], u.shape)
    return float(np.sqrt(np.sum((u - u_true) ** 2 + v**2) / np.sum(u_true**2)))


def test_an_inferred_window_recovers_a_non_periodic_flow_where_the_drifters_are(tmp_path):
    extent = _shear_file(tmp_path / "shear.nc")
    common = AssimilateSettings("linear", {"members": 8}, basis="circular", k_max=4, degree=0, n_grid=24, times=3)
    window = assimilate_file(tmp_path / "shear.nc", tmp_path / "window.nc", common)
    side = max(extent[1] - extent[0], extent[3] - extent[2])
    centre = ((extent[0] + extent[1]) / 2, (extent[2] + extent[3]) / 2)
    periodic_box = (centre[0] - side / 2, centre[0] + side / 2, centre[1] - side / 2, centre[1] + side / 2)
    periodic = assimilate_file(tmp_path / "shear.nc", tmp_path / "periodic.nc",
                               dataclasses.replace(common, box=periodic_box))
    scaled = 4 * (1 + 2 * BOX_MARGIN)
    assert any(f"--k-max 4 over the drifters, {scaled:.3g} over the box" in note for note in window.notes)
    assert not any("over the box" in note for note in periodic.notes)  # a box given: k_max in it
    e_window = _error_where_the_drifters_are(tmp_path / "window.nc", extent)
    e_periodic = _error_where_the_drifters_are(tmp_path / "periodic.nc", extent)
    print(f"window {e_window:.4f} periodic {e_periodic:.4f}")
    assert e_window < 0.5 * e_periodic


def test_fixes_a_few_kilometres_off_their_track_do_not_zero_the_ocean_path(tmp_path, monkeypatch):
    """4 fixes displaced by 5 km (1.4 m/s hops in hourly data: under the spike rule's 3 m/s) are dropped by the
    cleaning's off-track rule; let through it (as a fix it cannot judge, beside a gap, would be), they are left out
    of the search (each touches one of its pairs, a day apart from the first) and the position noise is not read
    from them; without either, the Gaussian answer is zero."""
    from lagda.assimilation.methods import prior_search, track_data
    from lagda.io import clean as cleaning

    extent = _shear_file(tmp_path / "shear.nc")
    with xr.open_dataset(tmp_path / "shear.nc") as ds:
        spiked = ds.load()
    spiked["y"].values[[2, 7, 13, 19], 24 * 5 + 1] += 5e3
    spiked.to_netcdf(tmp_path / "spiked.nc")
    common = AssimilateSettings("linear", {"members": 8}, basis="circular", k_max=4, degree=0, n_grid=24, times=3)
    clean = assimilate_file(tmp_path / "shear.nc", tmp_path / "clean.nc", common)
    cleaned = assimilate_file(tmp_path / "spiked.nc", tmp_path / "cleaned.nc", common)
    assert any(note.startswith("clean: 4 fixes off their track dropped") for note in cleaned.notes)
    monkeypatch.setattr(cleaning, "OFF_TRACK_M", np.inf)
    robust = assimilate_file(tmp_path / "spiked.nc", tmp_path / "robust.nc", common)
    assert not any("outliers" in note for note in clean.notes)
    assert not any("position spikes dropped" in note for note in robust.notes)  # the cleaning kept them
    assert any(note.startswith("linear: position noise judged by the median") for note in robust.notes)
    assert any("linear: 4 of" in note and "velocities left out as outliers" in note for note in robust.notes)
    e_clean = _error_where_the_drifters_are(tmp_path / "clean.nc", extent)
    e_robust = _error_where_the_drifters_are(tmp_path / "robust.nc", extent)
    assert e_robust < 1.5 * e_clean < 0.15
    assert _error_where_the_drifters_are(tmp_path / "cleaned.nc", extent) < 1.5 * e_clean
    monkeypatch.setattr(prior_search, "OUTLIER_K", np.inf)
    monkeypatch.setattr(track_data, "HEAVY_TAIL", np.inf)
    gaussian = assimilate_file(tmp_path / "spiked.nc", tmp_path / "gaussian.nc", common)
    assert "answered zero (no better than it)" in gaussian.diagnostics
