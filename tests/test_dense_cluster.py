"""The dense-deployment benchmark's pieces (experiments.basin.dense_cluster): its flow, its binned means, its
scoring."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from experiments.basin import dense_cluster as dc


def test_the_flow_is_divergence_free_and_the_current_far_from_its_eddies():
    flow = dc.Flow()
    rng = np.random.default_rng(0)
    x, y, h = rng.uniform(-300e3, 300e3, 50), rng.uniform(-300e3, 300e3, 50), 10.0
    du = (flow.velocity(x + h, y, 3e5)[0] - flow.velocity(x - h, y, 3e5)[0]) / (2 * h)
    dv = (flow.velocity(x, y + h, 3e5)[1] - flow.velocity(x, y - h, 3e5)[1]) / (2 * h)
    shear = np.abs((flow.velocity(x, y + h, 3e5)[0] - flow.velocity(x, y - h, 3e5)[0]) / (2 * h))
    assert np.max(np.abs(du + dv)) < 1e-6 * np.max(shear)
    np.testing.assert_allclose(flow.velocity(np.array([5e6]), np.array([5e6]), 0.0), [[0.05], [0.02]], atol=1e-12)


def test_a_map_equal_to_the_truth_scores_zero_and_binned_means_follow_the_drifters(tmp_path):
    # five drifters for two days: a map holding the truth at its cells errs 0 and its tiny bands cover nothing
    # but exact values; the binned means of the drifters' velocities are close to the truth where they are
    tracks = dc.make(tmp_path / "dense.csv", drifters=5, days=2)
    lon, lat = -88.2 + 0.05 * np.arange(9), 27.8 + 0.05 * np.arange(9)
    days = np.array([0.0, 86400.0, 2 * 86400.0])
    times = dc.START + days.astype("timedelta64[s]")
    bu, bv = dc.binned(tracks, lon, lat, times)
    fixed = np.isfinite(bu)
    assert fixed.sum() >= 5
    lon2, lat2 = np.meshgrid(lon, lat)
    truth = np.stack([np.stack(dc.Flow().on_cells(lon2, lat2, t)) for t in days], axis=1)
    store = tmp_path / "map.nc"
    shape = truth[0].shape
    xr.Dataset({"u": (("time", "lat", "lon"), truth[0]), "v": (("time", "lat", "lon"), truth[1]),
                "u_std": (("time", "lat", "lon"), np.full(shape, 1e-9)),
                "v_std": (("time", "lat", "lon"), np.full(shape, 1e-9)),
                "n_fixes": (("time", "lat", "lon"), fixed.astype(np.int32))},
               coords={"time": times, "lat": lat, "lon": lon}).to_netcdf(store)
    scores = dc.score(store, tracks)
    assert scores["cell_days"] == fixed.sum() and scores["error"] == pytest.approx(0.0, abs=1e-12)
    assert scores["coverage"] == 1.0
    assert scores["binned_error"] < 0.2  # a cell's drifters are up to 2.5 km off its centre, and 12 h off its time
