"""Round trips with the ecosystem's real tools: clouddrift writes and reads, Parcels v4 advects.

- a ragged array written by clouddrift (with and without CF attributes) is read by lagda;
- lagda's ragged export is read back by clouddrift;
- Parcels v4 advects drifters in a lagda flow sampled on a lon/lat grid; lagda reads its Parquet
  output (and the v3 zarr layout converted from it) and recovers the flow in m/s.
"""

import numpy as np
import pytest
import xarray as xr

from lagda.assimilation import AssimilateSettings, assimilate_file
from lagda.io.formats import read_tracks
from lagda.io.physical import Mapping, parse_time, physical_fields
from lagda.io.results import read_result
from lagda.io.tracks import Tracks, write_tracks
from simulate.flow import rectangular_modes, velocity_basis

BOX = (10.0, 12.0, 40.0, 42.0)
START = "2025-01-01T00:00:00"
TIME_SCALE = 1e6  # seconds per model time unit
K1, K2 = rectangular_modes((-1, 1), (-1, 1))


def _truth():
    """Returns a steady flow of the 9 modes |k1|, |k2| <= 1 (coefficients with the prior's decay)."""
    rng = np.random.default_rng(0)
    coef = (rng.normal(size=9) + 1j * rng.normal(size=9)) * (1.0 + K1**2 + K2**2) ** -1.5
    coef[(K1 == 0) & (K2 == 0)] = 0.0
    return coef


def _model_velocity(coef, points):
    """Returns the model velocity `(n, 2)` of a steady flow (the 9 modes) at model points `(n, 2)`."""
    basis = velocity_basis(points, 0.0, K1, K2, np.zeros(9))
    return basis @ np.concatenate([coef.real, coef.imag])


def _physical_track_arrays():
    """Returns ids, rowsize, time (datetime64), lon, lat of 3 drifters: hourly, with a gap."""
    mapping = Mapping(BOX, "lonlat", parse_time(START), TIME_SCALE)
    ids = np.array([101, 102, 103])
    hours = [np.arange(24.0), np.r_[np.arange(10.0), np.arange(15.0, 30.0)], np.arange(0.0, 48.0, 6.0)]
    lon, lat, time = [], [], []
    for i, h in enumerate(hours):
        t = h * 3600 / TIME_SCALE
        a, b = mapping.from_model(0.2 + 0.3 * i + 2.0 * t, 0.5 + np.sin(t * 40) / 10)
        lon.append(a)
        lat.append(b)
        time.append((mapping.time_from_model(t) * 1e9).astype("datetime64[ns]"))
    return ids, np.array([len(h) for h in hours]), np.concatenate(time), np.concatenate(lon), np.concatenate(lat)


@pytest.mark.parametrize("with_attributes", [True, False], ids=["cf-attributes", "bare"])
def test_a_ragged_array_written_by_clouddrift_is_read(tmp_path, with_attributes):
    from clouddrift.raggedarray import RaggedArray

    ids, rowsize, time, lon, lat = _physical_track_arrays()
    attrs = {"rowsize": {"sample_dimension": "obs", "long_name": "number of observations per trajectory"},
             "id": {"cf_role": "trajectory_id"}, "lon": {"units": "degrees_east"}, "lat": {"units": "degrees_north"},
             "time": {}} if with_attributes else {}
    ra = RaggedArray(coords={"id": ids, "time": time}, metadata={"rowsize": rowsize}, data={"lon": lon, "lat": lat},
                     attrs_global={"Conventions": "CF-1.6", "featureType": "trajectory"} if with_attributes else {},
                     attrs_variables=attrs, name_dims={"traj": "rows", "obs": "obs"},
                     coord_dims={"id": "traj", "time": "obs"},
                     var_dims={"rowsize": ["traj"], "lon": ["obs"], "lat": ["obs"]})
    ra.to_xarray().to_netcdf(tmp_path / "cd.nc")
    if with_attributes:
        tracks = read_tracks(tmp_path / "cd.nc", box=BOX, time_scale=TIME_SCALE)
    else:
        with pytest.warns(UserWarning, match="assumed a contiguous ragged array"):
            tracks = read_tracks(tmp_path / "cd.nc", box=BOX, time_scale=TIME_SCALE)
    assert tracks.trajectory_id.tolist() == [101, 102, 103] and tracks.n_field == 1
    mapping = tracks.mapping
    splits = np.cumsum(rowsize)[:-1]
    for i, (a, b) in enumerate(zip(np.split(lon, splits), np.split(lat, splits))):
        n = rowsize[i]
        np.testing.assert_allclose(tracks.positions[i, :n], np.stack(mapping.to_model(a, b), -1), atol=1e-12)
    # the 6-hourly drifter keeps its spacing and the gap of the second stays a gap
    np.testing.assert_allclose(np.diff(tracks.times[2, :8]) * TIME_SCALE, 6 * 3600, rtol=1e-9)
    assert np.diff(tracks.times[1, :25]).max() * TIME_SCALE == pytest.approx(6 * 3600)


def test_lagdas_ragged_export_is_read_back_by_clouddrift(tmp_path):
    from clouddrift.ragged import unpack
    from clouddrift.raggedarray import RaggedArray

    ids, rowsize, time, lon, lat = _physical_track_arrays()
    mapping = Mapping(BOX, "lonlat", parse_time(START), TIME_SCALE)
    splits = np.cumsum(rowsize)[:-1]
    seconds = time.astype("datetime64[ns]").astype(np.int64) / 1e9
    tracks = Tracks(np.full((3, rowsize.max(), 2), np.nan), np.full((3, rowsize.max()), np.nan), np.zeros(3, np.int64),
                    ids, mapping=mapping)
    for i, (a, b, s) in enumerate(zip(np.split(lon, splits), np.split(lat, splits), np.split(seconds, splits))):
        tracks.positions[i, : len(a)] = np.stack(mapping.to_model(a, b), -1)
        tracks.times[i, : len(a)] = mapping.time_to_model(s)
    write_tracks(tracks, tmp_path / "export.nc", layout="ragged")
    ra = RaggedArray.from_netcdf(str(tmp_path / "export.nc"), rows_dim_name="traj", obs_dim_name="obs")
    variables = {**ra.coords, **ra.data, **ra.metadata}
    np.testing.assert_array_equal(variables["rowsize"], rowsize)
    np.testing.assert_array_equal(variables["id"], ids)
    for mine, theirs in zip(np.split(lon, splits), unpack(np.asarray(variables["lon"]), variables["rowsize"])):
        np.testing.assert_allclose(theirs, mine, atol=1e-12)
    for mine, theirs in zip(np.split(time, splits), unpack(np.asarray(variables["time"]), variables["rowsize"])):
        np.testing.assert_array_equal(theirs.astype("datetime64[s]"), mine.astype("datetime64[s]"))


@pytest.fixture(scope="module")
def parcels_run(tmp_path_factory):
    """Parcels v4 advects 16 drifters for 2 days in the lagda flow `_truth()` sampled on a lon/lat grid.

    The flow is periodic, so it is sampled over the box and its 8 periodic neighbours (model
    coordinates -1..2) and drifters may leave the box. Returns the Parquet file, its v3 zarr
    conversion and the mapping.
    """
    import parcels
    from parcels import convert

    directory = tmp_path_factory.mktemp("parcels")
    mapping = Mapping(BOX, "lonlat", parse_time(START), TIME_SCALE)
    n = 32  # grid points per box side: bilinear interpolation error ~ (2 pi / n)^2 / 8 = 0.5% for |k| = 1
    grid = np.arange(-n, 2 * n + 1) / n
    xx, yy = np.meshgrid(grid, grid)
    w = _model_velocity(_truth(), np.stack([xx.ravel(), yy.ravel()], -1)).reshape(*xx.shape, 2)
    phys = physical_fields({"u_mean": w[..., 0], "v_mean": w[..., 1]}, mapping, grid)
    lon, lat = mapping.from_model(grid, grid)
    times = np.array(["2025-01-01", "2025-01-10"], dtype="datetime64[ns]")  # steady: the same field twice
    dims = ("time", "depth", "lat", "lon")
    stack = lambda f: np.broadcast_to(f, (2, 1, *f.shape)).astype(np.float32)
    ds = xr.Dataset({"uo": (dims, stack(phys["u_mean"])), "vo": (dims, stack(phys["v_mean"]))},
                    coords={"time": times, "depth": [0.0],
                            "lat": ("lat", lat, {"axis": "Y", "standard_name": "latitude", "units": "degrees_north"}),
                            "lon": ("lon", lon, {"axis": "X", "standard_name": "longitude", "units": "degrees_east"})})
    fieldset = parcels.FieldSet.from_sgrid_conventions(
        convert.copernicusmarine_to_sgrid(fields={"U": ds["uo"], "V": ds["vo"]}), mesh="spherical")
    start = np.linspace(0.15, 0.85, 4)
    x0, y0 = (v.ravel() for v in np.meshgrid(start, start))
    release_lon, release_lat = mapping.from_model(x0, y0)
    pset = parcels.ParticleSet(fieldset, x=release_lon, y=release_lat, t=np.full(16, np.datetime64(START)))
    parquet = directory / "drifters.parquet"
    output = parcels.ParticleFile(parquet, outputdt=np.timedelta64(1, "h"))
    pset.execute([parcels.kernels.AdvectionRK4], dt=np.timedelta64(15, "m"), runtime=np.timedelta64(2, "D"),
                 output_file=output, verbose_progress=False)
    zarr = directory / "drifters.zarr"
    parcels.particlefile_to_v3_zarr(parquet, zarr)
    return parquet, zarr, mapping


def test_parcels_v4_output_is_assimilated_and_recovers_the_flow_in_m_per_s(parcels_run, tmp_path):
    parquet, _, mapping = parcels_run
    tracks = read_tracks(parquet, box=BOX, time_scale=TIME_SCALE)
    assert tracks.n_trajectory == 16 and tracks.n_field == 1 and np.sum(np.isfinite(tracks.times[0])) == 49
    np.testing.assert_allclose(np.diff(tracks.times[0]) * TIME_SCALE, 3600.0, rtol=1e-9)  # hourly output
    # a model's flow, steady, 2-day tracks: no inertial loop or tide to take out, and the low-pass's two windows
    # (45 h at 41 N) would average each track whole
    summary = assimilate_file(parquet, tmp_path / "r.nc", AssimilateSettings("linear", n_grid=16, box=BOX,
                                                                           time_scale=TIME_SCALE, low_pass=False))
    assert any("steady model" in note for note in summary.notes)
    res = read_result(tmp_path / "r.nc")
    assert res.mapping is not None and res.mapping.box == BOX
    # the recovered velocity at every fix against the flow Parcels advected, both in m/s
    fixes = tracks.positions[np.all(np.isfinite(tracks.positions), axis=-1)]
    basis = velocity_basis(fixes, 0.0, res.k1, res.k2, res.omega)
    recovered = basis @ np.concatenate([res.coef_mean[0].real, res.coef_mean[0].imag])
    true = _model_velocity(_truth(), fixes)
    fu, fv = mapping.velocity_factors(mapping.from_model(fixes[:, 0], fixes[:, 1])[1])
    scale = np.stack([fu, fv], -1)
    error = np.sqrt(np.mean(np.sum(((recovered - true) * scale) ** 2, -1)))
    rms = np.sqrt(np.mean(np.sum((true * scale) ** 2, -1)))
    assert 0.1 < rms < 2.0  # m/s: an ocean current
    # Parcels interpolates the gridded field bilinearly (~0.5%) and its sphere's radius is 0.07% shorter
    assert error < 0.02 * rms, (error, rms)


def test_parcels_v3_zarr_layout_reads_like_the_parquet(parcels_run):
    parquet, zarr, _ = parcels_run
    from_parquet = read_tracks(parquet, box=BOX, time_scale=TIME_SCALE)
    from_zarr = read_tracks(zarr, box=BOX, time_scale=TIME_SCALE)  # Parcels' own feature_type: a note, no warning
    assert any(note.startswith("Parcels ") and "feature_type read as CF's featureType" in note
               for note in from_zarr.notes)
    np.testing.assert_allclose(from_zarr.positions, from_parquet.positions, atol=1e-12)
    np.testing.assert_allclose(from_zarr.times, from_parquet.times, atol=1e-12)
    assert from_zarr.trajectory_id.tolist() == from_parquet.trajectory_id.tolist()
