"""The background product (lagda.io.background) on small synthetic files: geostrophy against a Gaussian eddy's
closed form and its convergence order, interpolation exact on linear fields across conventions, NaN where the
product has nothing to say, errors, and the product's own error std."""

import pickle

import numpy as np
import pytest
import xarray as xr

from lagda.io.background import GRAVITY, OMEGA, Background, geostrophic_velocity
from lagda.io.physical import EARTH_RADIUS_M

DAY = 86400.0
T0 = 1577836800.0  # 2020-01-01T00:00:00Z
DEGREE_M = EARTH_RADIUS_M * np.pi / 180


def write(path, variables: dict, lon, lat, days=(0.0,), units="m/s", dims=("time", "lat", "lon"), **coords):
    """Writes `variables` {name: values `dims`} (units attrs `units`) on the axes to netCDF; returns the path."""
    times = np.datetime64("2020-01-01T00:00:00", "ns") + (np.asarray(days) * DAY * 1e9).astype("timedelta64[ns]")
    data = {name: xr.DataArray(np.asarray(values, np.float64), dims=dims, attrs={"units": units} if units else {})
            for name, values in variables.items()}
    xr.Dataset(data, {"time": times, "lat": np.asarray(lat, float), "lon": np.asarray(lon, float), **coords}) \
        .to_netcdf(path)
    return str(path)


def coriolis(lat):
    return 2 * OMEGA * np.sin(np.deg2rad(lat))


# A Gaussian eddy eta = A exp(-(X^2 + Y^2) / (2 L^2)), X = R cos(lat_c) (lon - lon_c), Y = R (lat - lat_c) (radians)
EDDY = {"A": 0.2, "L": 50e3, "lon_c": 10.0, "lat_c": 40.0}


def eddy(lon, lat):
    """Returns (eta, u, v) of the eddy at `lon`, `lat` (degrees): its height and geostrophic velocity in closed form."""
    sx, sy = EDDY["L"] / (DEGREE_M * np.cos(np.deg2rad(EDDY["lat_c"]))), EDDY["L"] / DEGREE_M  # degrees
    eta = EDDY["A"] * np.exp(-0.5 * ((lon - EDDY["lon_c"]) / sx) ** 2 - 0.5 * ((lat - EDDY["lat_c"]) / sy) ** 2)
    eta_lon, eta_lat = -eta * (lon - EDDY["lon_c"]) / sx ** 2, -eta * (lat - EDDY["lat_c"]) / sy ** 2  # per degree
    u = -GRAVITY / coriolis(lat) * eta_lat / DEGREE_M
    v = GRAVITY / coriolis(lat) * eta_lon / (DEGREE_M * np.cos(np.deg2rad(lat)))
    return eta, u, v


def eddy_errors(tmp_path, spacing_m: float, lon, lat) -> np.ndarray:
    """Returns |computed - closed form| of u and v at the points, the eddy sampled every `spacing_m` metres."""
    half = 6 * EDDY["L"]
    lat_axis = EDDY["lat_c"] + np.arange(-half, half + spacing_m / 2, spacing_m) / DEGREE_M
    lon_axis = EDDY["lon_c"] + np.arange(-half, half + spacing_m / 2, spacing_m) / (
        DEGREE_M * np.cos(np.deg2rad(EDDY["lat_c"])))
    eta = eddy(lon_axis[None, :], lat_axis[:, None])[0]
    path = write(tmp_path / f"eddy_{spacing_m:g}.nc", {"adt": eta[None]}, lon_axis, lat_axis, units="m")
    u, v = Background.open(path).velocity(lon, lat, np.full(lon.shape, T0))
    _, u_true, v_true = eddy(lon, lat)
    return np.abs(np.concatenate([u - u_true, v - v_true]))


@pytest.fixture(scope="module")
def eddy_points():
    """Scattered points within 3 L of the eddy's centre."""
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-3 * EDDY["L"], 3 * EDDY["L"], (2, 500))
    return EDDY["lon_c"] + x / (DEGREE_M * np.cos(np.deg2rad(EDDY["lat_c"]))), EDDY["lat_c"] + y / DEGREE_M


def test_geostrophy_matches_the_gaussian_eddy_within_the_second_order_bound(tmp_path, eddy_points):
    """On a grid of spacing h, the centred difference errs by h^2/6 |eta'''| <= 0.23 A h^2 / L^3, that is 0.38
    (h/L)^2 of the largest speed U = (g/f) A / (L sqrt(e)) (max |eta'| = 0.61 A/L); bilinear interpolation adds
    h^2/8 |u''| per direction, 2 x 0.28 (h/L)^2 U: together under (h/L)^2 U (f and cos(lat) vary over R, not L)."""
    spacing = EDDY["L"] / 10
    errors = eddy_errors(tmp_path, spacing, *eddy_points)
    speed = GRAVITY * EDDY["A"] / (coriolis(EDDY["lat_c"]) * EDDY["L"]) * np.exp(-0.5)
    assert errors.max() < (spacing / EDDY["L"]) ** 2 * speed
    assert errors.max() > 0.05 * (spacing / EDDY["L"]) ** 2 * speed  # the bound is not vacuous


def test_geostrophy_converges_at_second_order(tmp_path, eddy_points):
    coarse = eddy_errors(tmp_path, EDDY["L"] / 8, *eddy_points)
    fine = eddy_errors(tmp_path, EDDY["L"] / 16, *eddy_points)
    order = np.log2(np.sqrt(np.mean(coarse ** 2)) / np.sqrt(np.mean(fine ** 2)))
    assert order == pytest.approx(2.0, abs=0.2)


def test_geostrophic_velocity_is_nan_near_the_equator_and_on_land():
    lon, lat = np.arange(0.0, 4.0), np.arange(-8.0, 9.0, 2.0)
    eta = np.repeat(0.01 * lon[None, :], len(lat), axis=0)
    eta[:, 3] = np.nan  # a land column: the column next to it takes a one-sided difference
    u, v = geostrophic_velocity(eta, lon, lat)
    band = np.abs(lat) < 5
    assert np.all(np.isnan(u[band])) and np.all(np.isnan(v[band])) and np.all(np.isnan(v[:, 3]))
    expected = GRAVITY / coriolis(lat[~band]) * 0.01 / (DEGREE_M * np.cos(np.deg2rad(lat[~band])))
    np.testing.assert_allclose(v[~band, :3], np.repeat(expected[:, None], 3, axis=1), rtol=1e-12)
    np.testing.assert_allclose(u[~band, :3], 0.0, atol=1e-15)


def linear(lon, lat, days, coefficients):
    """A field linear in longitude (0..360), latitude and days."""
    a, b, c, d = coefficients
    return a + b * lon + c * lat + d * days


U_CM, V_CM = (5.0, 0.3, -0.2, 2.0), (-3.0, -0.1, 0.4, -1.0)  # cm/s, per degree, per degree, per day


@pytest.fixture(scope="module")
def linear_file(tmp_path_factory):
    """Velocities in cm/s linear in lon, lat and time on lon 300..358 (0..360), latitude decreasing, 3 days."""
    lon, lat, days = np.arange(300.0, 360.0, 2.0), np.arange(50.0, 29.0, -1.5), np.array([0.0, 1.0, 2.0])
    grid = np.meshgrid(days, lat, lon, indexing="ij")
    values = {"u": linear(grid[2], grid[1], grid[0], U_CM), "v": linear(grid[2], grid[1], grid[0], V_CM)}
    return write(tmp_path_factory.mktemp("linear") / "linear.nc", values, lon, lat, days, units="cm s-1")


def test_linear_fields_are_interpolated_exactly_in_any_longitude_convention(linear_file):
    background = Background.open(linear_file)
    lon = np.array([-10.0, 350.0, -59.3, 301.7, -2.0])
    lat = np.array([40.25, 40.25, 31.1, 49.9, 30.5])
    days = np.array([0.4, 0.4, 1.75, 0.0, 2.0])
    u, v = background.velocity(lon, lat, T0 + days * DAY)
    east = lon % 360
    np.testing.assert_allclose(u, 0.01 * linear(east, lat, days, U_CM), rtol=1e-12)
    np.testing.assert_allclose(v, 0.01 * linear(east, lat, days, V_CM), rtol=1e-12)
    assert u.dtype == np.float64 and u.shape == (5,)
    assert background.extent == (300.0, 358.0, 30.5, 50.0, T0 - 0.5 * DAY, T0 + 2.5 * DAY)
    assert any("flipped" in note for note in background.notes)


def test_outside_the_box_or_the_period_is_nan(linear_file):
    background = Background.open(linear_file)
    lon = np.array([359.0, 299.0, 320.0, 320.0, 320.0, 320.0, 320.0, np.nan])
    lat = np.array([40.0, 40.0, 51.0, 30.0, 40.0, 40.0, 40.0, 40.0])
    days = np.array([1.0, 1.0, 1.0, 1.0, 2.4, 2.6, -0.6, 1.0])
    u, _ = background.velocity(lon, lat, T0 + days * DAY)
    assert np.all(np.isnan(u[[0, 1, 2, 3, 5, 6, 7]]))
    assert u[4] == pytest.approx(0.01 * linear(320.0, 40.0, 2.0, U_CM), rel=1e-12)  # within half a step: the last


def test_land_propagates_as_nan(tmp_path):
    lon, lat = np.arange(0.0, 6.0), np.arange(40.0, 46.0)
    u = np.ones((1, 6, 6))
    u[0, 2, 3] = np.nan  # land at (3E, 42N)
    background = Background.open(write(tmp_path / "land.nc", {"uo": u, "vo": u}, lon, lat))
    points = np.array([[3.5, 42.5], [2.5, 41.5], [3.0, 43.0], [2.0, 42.0], [0.5, 44.5]])
    speed, _ = background.velocity(points[:, 0], points[:, 1], np.full(5, T0))
    np.testing.assert_array_equal(np.isnan(speed), [True, True, False, False, False])  # on a node: its own value


def test_a_global_product_interpolates_across_the_seam(tmp_path):
    lon, lat = np.arange(1.0, 360.0, 2.0), np.array([-60.0, 60.0])
    u = np.broadcast_to(lon / 100, (1, 2, len(lon)))
    background = Background.open(write(tmp_path / "global.nc", {"uo": u, "vo": 0 * u}, lon, lat))
    east, _ = background.velocity([0.0, 359.5, -0.5, 180.0], [0.0] * 4, [T0] * 4)
    np.testing.assert_allclose(east, [0.5 * (3.59 + 0.01), 0.75 * 3.59 + 0.25 * 0.01, 0.75 * 3.59 + 0.25 * 0.01,
                                      1.8], rtol=1e-12)
    assert background.extent[:2] == (1.0, 361.0)


@pytest.mark.parametrize("names", [("err_ugos", "err_vgos"), ("err_ugosa", "err_vgosa")], ids=["own", "duacs"])
def test_error_std_from_the_product_velocity_errors(tmp_path, names):
    """DUACS states the mapping error of its velocities as err_ugosa/err_vgosa, next to ugos/vgos."""
    lon, lat = np.arange(0.0, 3.0), np.arange(40.0, 43.0)
    zero, one = np.zeros((1, 3, 3)), np.ones((1, 3, 3))
    with_errors = write(tmp_path / "errors.nc", {"ugos": zero, "vgos": zero, names[0]: 0.03 * one,
                                                names[1]: 0.04 * one}, lon, lat)
    error = Background.open(with_errors).error_std([1.5, 9.0], [41.5, 41.5], [T0, T0])
    np.testing.assert_allclose(error[0], np.sqrt((0.03 ** 2 + 0.04 ** 2) / 2), rtol=1e-12)
    assert np.isnan(error[1])
    without = write(tmp_path / "no_errors.nc", {"ugos": zero, "vgos": zero}, lon, lat)
    assert Background.open(without).error_std([1.5], [41.5], [T0]) is None


def test_error_std_from_a_height_error_through_geostrophy(tmp_path):
    """A uniform height error sigma through the centred difference, neighbours independent: the derivative's std
    is sigma / (sqrt(2) h) on each axis."""
    lon, lat = np.arange(0.0, 5.0) * 0.25, 45.0 + np.arange(0.0, 5.0) * 0.25
    sigma = 0.02
    path = write(tmp_path / "sla.nc", {"sla": np.zeros((1, 5, 5)), "err_sla": np.full((1, 5, 5), sigma)}, lon, lat,
                 units="m")
    background = Background.open(path)
    error = background.error_std([0.5], [45.5], [T0])
    h_y, h_x = 0.25 * DEGREE_M, 0.25 * DEGREE_M * np.cos(np.deg2rad(45.5))
    u_error, v_error = (GRAVITY / coriolis(45.5) * sigma / (np.sqrt(2) * h) for h in (h_y, h_x))
    np.testing.assert_allclose(error, np.sqrt((u_error ** 2 + v_error ** 2) / 2), rtol=1e-12)
    assert any("anomaly" in note for note in background.notes)


def test_velocities_preferred_shallowest_level_and_a_model_calendar(tmp_path):
    lon, lat, depth = np.arange(0.0, 3.0), np.arange(40.0, 43.0), np.array([10.0, 0.5, 50.0])
    u = np.ones((2, 3, 3, 3)) * np.array([0.2, 0.1, 0.3])[None, :, None, None]
    ds = xr.Dataset({"uo": (("time", "depth", "lat", "lon"), u, {"units": "m s-1"}),
                     "vo": (("time", "depth", "lat", "lon"), -u, {"units": "m s-1"}),
                     "zos": (("time", "lat", "lon"), np.zeros((2, 3, 3)), {"units": "m"})},
                    {"time": ("time", [0.0, 1.0], {"units": "days since 2001-03-01", "calendar": "noleap"}),
                     "depth": depth, "lat": lat, "lon": lon})
    ds.to_netcdf(tmp_path / "model.nc", encoding={"time": {"dtype": "float64"}})
    background = Background.open(tmp_path / "model.nc")
    u, v = background.velocity([1.0], [41.0], [np.datetime64("2001-03-01T12:00", "s").astype(float)])
    assert (u[0], v[0]) == pytest.approx((0.1, -0.1), rel=1e-12)
    text = "\n".join(background.notes)
    assert "shallowest" in text and "zos" in text and "noleap" in text


def test_anomalies_are_said_and_yield_to_a_full_height(tmp_path):
    lon, lat = np.arange(0.0, 3.0), np.arange(40.0, 43.0)
    anomalies = {"ugosa": np.ones((1, 3, 3)), "vgosa": np.ones((1, 3, 3))}
    background = Background.open(write(tmp_path / "anomaly.nc", anomalies, lon, lat))
    assert any("not the full current" in note for note in background.notes)
    eta = np.repeat(0.01 * lat[None, :, None], 3, axis=2)
    background = Background.open(write(tmp_path / "full.nc", {**anomalies, "adt": eta}, lon, lat, units="m"))
    u, v = background.velocity([1.0], [41.0], [T0])
    expected = -GRAVITY / coriolis(41.0) * 0.01 / DEGREE_M
    assert (u[0], v[0]) == pytest.approx((expected, 0.0), rel=1e-12, abs=1e-15)
    assert any("computed from the full height adt" in note for note in background.notes)


def test_a_zarr_store_reads_and_the_background_pickles(tmp_path):
    lon, lat = np.arange(0.0, 3.0), np.arange(40.0, 43.0)
    store = tmp_path / "store.zarr"
    xr.open_dataset(write(tmp_path / "f.nc", {"uo": np.ones((1, 3, 3)), "vo": np.ones((1, 3, 3))}, lon, lat)) \
        .to_zarr(store, zarr_format=2)
    background = pickle.loads(pickle.dumps(Background.open(store)))
    assert background.velocity([1.0], [41.0], [T0])[0] == pytest.approx([1.0])


def test_unusable_files_raise_one_clear_error(tmp_path):
    lon, lat = np.arange(0.0, 3.0), np.arange(40.0, 43.0)
    with pytest.raises(FileNotFoundError):
        Background.open(tmp_path / "absent.nc")
    path = write(tmp_path / "temperature.nc", {"temperature": np.zeros((1, 3, 3))}, lon, lat, units="degC")
    with pytest.raises(ValueError, match="it has temperature; accepted: velocities ugos/vgos") as error:
        Background.open(path)
    assert "\n" not in str(error.value)
    path = write(tmp_path / "furlongs.nc", {"u": np.zeros((1, 3, 3)), "v": np.zeros((1, 3, 3))}, lon, lat,
                 units="furlong/fortnight")
    with pytest.raises(ValueError, match="units 'furlong/fortnight'; accepted: m s-1"):
        Background.open(path)
    xr.Dataset({"adt": (("lat", "lon"), np.zeros((3, 3)), {"units": "m"})}, {"lat": lat, "lon": lon}) \
        .to_netcdf(tmp_path / "timeless.nc")
    with pytest.raises(ValueError, match="no time coordinate"):
        Background.open(tmp_path / "timeless.nc")
    xr.Dataset({"adt": (("time", "a", "b"), np.zeros((1, 3, 3)), {"units": "m"})}, {"time": [0.0]}) \
        .to_netcdf(tmp_path / "no_lon.nc")
    with pytest.raises(ValueError, match="no longitude coordinate"):
        Background.open(tmp_path / "no_lon.nc")


def test_points_of_different_shapes_are_refused(linear_file):
    with pytest.raises(ValueError, match=r"one shape \(n,\): got \(2,\), \(3,\), \(2,\)"):
        Background.open(linear_file).velocity([0.0, 1.0], [40.0, 41.0, 42.0], [T0, T0])
