"""Track files: CF DSG round trip, the other layouts read to the same Tracks, refusals."""

import dataclasses

import netCDF4
import numpy as np
import pytest
import xarray as xr

from lagda.io.formats import read_tracks
from lagda.io.tracks import (
    FILL,
    Tracks,
    check_fits_model,
    tracks_from_dataset,
    write_tracks,
)
from simulate.config import small
from simulate.flow import rectangular_modes
from simulate.schema import encoding, to_dataset

DT = 1e-4


def _tracks(lengths=(5, 3, 4), fields=(0, 0, 1), ids=("a", "b", "c"), shared_time=False, **truth):
    """Returns canonical Tracks with tracks of the given lengths, times j * 2 dt, j = 1.."""
    rng = np.random.default_rng(0)
    n_obs = max(lengths)
    pos = np.full((len(lengths), n_obs, 2), np.nan)
    time = np.full((len(lengths), n_obs), np.nan)
    for i, n in enumerate(lengths):
        pos[i, :n] = 0.5 + np.cumsum(rng.normal(scale=0.1, size=(n, 2)), axis=0)
        time[i, :n] = 2 * DT * np.arange(1, n + 1)
    return Tracks(pos, time, np.array(fields, np.int64), np.array(ids), release=rng.uniform(size=(len(lengths), 2)),
                  **truth)


def assert_same(a: Tracks, b: Tracks, release=True):
    np.testing.assert_array_equal(a.positions, b.positions)
    np.testing.assert_array_equal(a.times, b.times)
    np.testing.assert_array_equal(a.field, b.field)
    assert a.field.dtype == b.field.dtype == np.int64
    assert list(a.trajectory_id) == list(b.trajectory_id)
    if release:
        np.testing.assert_array_equal(a.release, b.release)
    for name in ("true_coef", "k1", "k2", "omega"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_array_equal(x, y)


def test_dsg_round_trip_is_strict_cf(tmp_path):
    tracks = _tracks(true_coef=np.array([[1 + 2j, 0.5j], [3.0, -1j]]), k1=np.array([0, 1]), k2=np.array([1, 0]),
                     omega=np.array([0.5, -2.0]))
    path = tmp_path / "t.nc"
    write_tracks(tracks, path)
    assert_same(read_tracks(path), tracks)
    with netCDF4.Dataset(path) as nc:
        assert nc.getncattr("featureType") == "trajectory"
        assert nc.getncattr("Conventions").startswith("CF-")
        assert set(nc["x"].dimensions) == {"trajectory", "obs"} and nc["time"].dimensions == ("trajectory", "obs")
        roles = [v for v in nc.variables.values() if getattr(v, "cf_role", None) == "trajectory_id"]
        assert len(roles) == 1 and roles[0].dimensions == ("trajectory",)
        for name in ("x", "y", "time"):
            var = nc[name]
            assert var.units == "1" and var.long_name and var._FillValue == FILL
            var.set_auto_mask(False)
            raw = var[:]
            assert np.all(raw[1, 3:] == FILL) and np.all(raw[2, 4:] == FILL)  # padding of shorter tracks
        assert "time" in nc["x"].coordinates.split() and "time" in nc["y"].coordinates.split()
        for var in nc.variables.values():
            assert getattr(var, "long_name", ""), var.name
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.nc"]  # no hidden .t.nc.tmp-PID left


def test_int_ids_and_no_release_round_trip(tmp_path):
    tracks = dataclasses.replace(_tracks(ids=(7, 3, 11)), release=None)
    write_tracks(tracks, tmp_path / "t.nc")
    back = read_tracks(tmp_path / "t.nc")
    assert back.trajectory_id.dtype == np.int64 and back.release is None
    assert_same(back, tracks, release=False)


def _write_orthogonal(tracks: Tracks, path):
    shared = tracks.times[np.argmax(np.sum(np.isfinite(tracks.times), axis=1))]
    ds = xr.Dataset(
        {"x": (("trajectory", "obs"), tracks.positions[..., 0]), "y": (("trajectory", "obs"), tracks.positions[..., 1]),
         "field": ("trajectory", tracks.field), "x0": ("trajectory", tracks.release[:, 0]),
         "y0": ("trajectory", tracks.release[:, 1])},
        coords={"time": ("obs", shared, {"units": "1"}),
                "trajectory": ("trajectory", tracks.trajectory_id.astype(object), {"cf_role": "trajectory_id"})},
        attrs={"featureType": "trajectory"},
    )
    ds.to_netcdf(path)


def _write_ragged(tracks: Tracks, path, count="rowsize", dims=("traj", "obs")):
    n = np.sum(np.isfinite(tracks.times), axis=1)
    keep = np.isfinite(tracks.times)
    ds = xr.Dataset(
        {count: (dims[0], n, {"sample_dimension": dims[1], "long_name": "number of observations"}),
         "id": (dims[0], tracks.trajectory_id.astype(object), {"cf_role": "trajectory_id"}),
         "field": (dims[0], tracks.field), "x0": (dims[0], tracks.release[:, 0]), "y0": (dims[0], tracks.release[:, 1]),
         "lon_like": (dims[1], tracks.positions[..., 0][keep], {"axis": "X"}),  # found by axis attribute
         "y": (dims[1], tracks.positions[..., 1][keep]), "time": (dims[1], tracks.times[keep], {"units": "1"})},
        attrs={"featureType": "trajectory"},
    )
    ds.to_netcdf(path)


def test_orthogonal_layout_reads_like_dsg(tmp_path):
    tracks = _tracks()
    _write_orthogonal(tracks, tmp_path / "o.nc")
    assert_same(read_tracks(tmp_path / "o.nc"), tracks)


@pytest.mark.parametrize("count,dims", [("rowsize", ("traj", "obs")), ("rowSize", ("trajectory", "observation"))])
def test_contiguous_ragged_layout_reads_like_dsg(tmp_path, count, dims):
    tracks = _tracks()
    _write_ragged(tracks, tmp_path / "r.nc", count, dims)
    assert_same(read_tracks(tmp_path / "r.nc"), tracks)


def test_csv_reads_like_dsg(tmp_path):
    tracks = _tracks()
    lines = ["id,time,x,y,field"]
    for i, tid in enumerate(tracks.trajectory_id):
        for j in np.flatnonzero(np.isfinite(tracks.times[i])):
            t, (x, y) = float(tracks.times[i, j]), tracks.positions[i, j].tolist()
            lines.append(f"{tid},{t!r},{x!r},{y!r},{tracks.field[i]}")
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    assert_same(read_tracks(tmp_path / "t.csv"), tracks, release=False)
    # without a field column each trajectory is its own field
    (tmp_path / "n.csv").write_text("\n".join(",".join(line.split(",")[:4]) for line in lines) + "\n")
    np.testing.assert_array_equal(read_tracks(tmp_path / "n.csv").field, [0, 1, 2])


def test_missing_field_means_one_field_per_trajectory(tmp_path):
    tracks = _tracks()
    path = tmp_path / "t.nc"
    write_tracks(tracks, path)
    with xr.open_dataset(path, decode_times=False) as ds:
        ds.load()
    ds.drop_vars("field").to_netcdf(tmp_path / "nofield.nc")
    np.testing.assert_array_equal(read_tracks(tmp_path / "nofield.nc").field, [0, 1, 2])


def _lagda_dataset(n_sample=3, n_drifter=2, n_obs=6):
    """Returns a schema-valid lagda dataset (simulate.schema.to_dataset) with random contents."""
    rng = np.random.default_rng(1)
    config = small(n_samples=n_sample, n_drifters=n_drifter, t_final=n_obs * DT, k1_min=-1, k1_max=1, k2_min=-1,
                   k2_max=1)
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    return to_dataset(config, k1=k1, k2=k2, omega=rng.normal(size=9), prior_scale=np.ones(9),
                      coef=rng.normal(size=(n_sample, 9)) + 1j * rng.normal(size=(n_sample, 9)),
                      release=rng.uniform(size=(n_sample, n_drifter, 2)),
                      positions=rng.normal(size=(n_sample, n_drifter, n_obs, 2)), history="test")


def test_lagda_dataset_reader(tmp_path):
    ds = _lagda_dataset()
    ds.to_netcdf(tmp_path / "d.nc", encoding=encoding(ds))
    tracks = read_tracks(tmp_path / "d.nc")
    assert tracks.positions.shape == (6, 6, 2) and tracks.n_field == 3
    np.testing.assert_array_equal(tracks.field, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(tracks.positions[3, :, 1], ds["y"].values[1, 1].astype(np.float64))
    np.testing.assert_array_equal(tracks.times[5], ds["time"].values)
    np.testing.assert_array_equal(tracks.true_coef, ds["coef_re"].values + 1j * ds["coef_im"].values)
    np.testing.assert_array_equal(tracks.release[2], [ds["x0"].values[1, 0], ds["y0"].values[1, 0]])
    np.testing.assert_array_equal(tracks.k1, ds["k1"].values)
    sub = tracks_from_dataset(ds, samples=[2], drifters=[1])
    assert sub.trajectory_id.tolist() == ["s2d1"] and sub.true_coef.shape == (1, 9)
    broken = ds.drop_vars("x0")
    broken.to_netcdf(tmp_path / "broken.nc", encoding=encoding(broken))
    with pytest.raises(ValueError, match="not a valid lagda dataset"):
        read_tracks(tmp_path / "broken.nc")
    np.testing.assert_array_equal(sub.positions[0, :, 0], ds["x"].values[2, 1])
    # truth survives export to a DSG track file
    write_tracks(tracks, tmp_path / "t.nc")
    assert_same(read_tracks(tmp_path / "t.nc"), tracks)
    one = tracks.for_field(1)
    assert one.n_field == 1 and one.trajectory_id.tolist() == ["s1d0", "s1d1"]
    np.testing.assert_array_equal(one.true_coef[0], tracks.true_coef[1])


@pytest.mark.parametrize("content", [b"\x89HDF\r\n\x1a\ngarbage" * 10, b"CDF\x01" + bytes(50), b"hello,world\n1,2\n",
                                     b"\x00\x01binary"])
def test_foreign_or_corrupted_file_is_one_value_error(tmp_path, content):
    path = tmp_path / "bad.nc"
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        read_tracks(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_netcdf_without_featuretype_or_other_feature_is_refused(tmp_path):
    xr.Dataset({"x": ("n", np.zeros(3))}).to_netcdf(tmp_path / "a.nc")
    with pytest.raises(ValueError, match="not a track file"):
        read_tracks(tmp_path / "a.nc")
    xr.Dataset({"x": ("n", np.zeros(3))}, attrs={"featureType": "timeSeries"}).to_netcdf(tmp_path / "b.nc")
    with pytest.raises(ValueError, match="timeSeries"):
        read_tracks(tmp_path / "b.nc")
    with pytest.raises(FileNotFoundError):
        read_tracks(tmp_path / "missing.nc")


def test_parcels_feature_type_is_accepted_with_a_note(tmp_path):
    tracks = _tracks()
    _write_orthogonal(tracks, tmp_path / "o.nc")
    with xr.open_dataset(tmp_path / "o.nc") as ds:
        ds.load()
    ds.attrs = {"feature_type": "trajectory"}
    ds.to_netcdf(tmp_path / "p.nc")
    with pytest.warns(UserWarning, match="featureType"):
        assert_same(read_tracks(tmp_path / "p.nc"), tracks)


def test_check_fits_model_accepts_and_warns():
    tracks = _tracks()
    assert check_fits_model(tracks, DT) == []
    pos = tracks.positions.copy()
    pos[0, 2] = np.nan
    time = tracks.times.copy()
    time[0, 3:5] += 4 * DT  # a gap
    warns = check_fits_model(dataclasses.replace(tracks, positions=pos, times=time), DT)
    assert any("missing" in w for w in warns) and any("gap" in w for w in warns)


def test_check_fits_model_refusals():
    tracks = _tracks()
    nan = tracks.positions.copy()
    nan[1] = np.nan
    with pytest.raises(ValueError, match="no valid observation"):
        check_fits_model(dataclasses.replace(tracks, positions=nan), DT)
    short = tracks.positions.copy()
    short[1, 1:] = np.nan
    with pytest.raises(ValueError, match="at least 3"):
        check_fits_model(dataclasses.replace(tracks, positions=short), DT)
    with pytest.raises(ValueError, match="not a multiple"):
        check_fits_model(tracks, 3 * DT)
    k1, k2 = np.array([0, 1]), np.array([1, 0])
    with_modes = dataclasses.replace(tracks, k1=k1, k2=k2, omega=np.array([1.0, 2.0]))
    assert check_fits_model(with_modes, DT, k1, k2, np.array([1.0, 2.0])) == []
    with pytest.raises(ValueError, match="frequencies"):
        check_fits_model(with_modes, DT, k1, k2, np.array([1.0, 2.5]))
    with pytest.raises(ValueError, match="modes"):
        check_fits_model(with_modes, DT, np.array([0, 1, 1]), np.array([1, 0, 1]), None)
