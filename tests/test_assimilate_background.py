"""`lagda assimilate --background FILE` (lagda.assimilation.background) on tiny synthetic drifters: a uniform current
as the product with a Gaussian eddy the drifters see and it does not; drifters in exactly the product's flow; the
refusals, each one line before any work; and the command end to end.

The drifters are integrated here by RK4 in longitude/latitude (10-minute steps, 3-hourly fixes, no low-pass) in a
flow given in closed form, and the basis is small (k_max 5, degree 0: steady flows) so that each run takes about a
second.
"""

import numpy as np
import pytest
import xarray as xr

import lagda
from lagda.arguments import on_command_line
from lagda.assimilation.assimilate import assimilate_file
from lagda.assimilation.settings import AssimilateSettings
from lagda.cli import main
from lagda.io.physical import EARTH_RADIUS_M
from tests.test_plain_notes import plain_faults

DEGREE_M = EARTH_RADIUS_M * np.pi / 180
T0 = np.datetime64("2020-01-01T00:00:00", "s")
CENTRE = (-30.0, 40.0)  # lon, lat of the eddy and of the box: the open North Atlantic
BOX = (-32.0, -28.0, 38.5, 41.5)  # 341 x 334 km, no land
CURRENT = (0.05, 0.0)  # the uniform background current, m/s east and north
EDDY = {"V": 0.2, "L": 30e3}  # psi = -V L exp(-r^2 / 2 L^2): a swirl of 0.12 m/s at r = L
SOLID = 3e-6  # test 2's solid-body rotation rate, 1/s (about 0.1 m/s at 30 km)
SMALL = {"box": BOX, "k_max": 5.0, "degree": 0, "low_pass": False, "n_grid": 16}


def plane(lon, lat):
    """Returns (x, y) metres on the tangent plane at CENTRE."""
    return (lon - CENTRE[0]) * DEGREE_M * np.cos(np.deg2rad(CENTRE[1])), (lat - CENTRE[1]) * DEGREE_M


def eddy(lon, lat):
    """Returns the eddy's velocity (u, v) m/s: u = -d psi/dy, v = d psi/dx."""
    x, y = plane(lon, lat)
    g = np.exp(-(x**2 + y**2) / (2 * EDDY["L"] ** 2))
    return -EDDY["V"] * y / EDDY["L"] * g, EDDY["V"] * x / EDDY["L"] * g


def current_and_eddy(lon, lat):
    u, v = eddy(lon, lat)
    return CURRENT[0] + u, CURRENT[1] + v


def current_and_rotation(lon, lat):
    """A uniform current plus a solid-body rotation: linear in longitude and latitude, so that the product's
    bilinear interpolation of it is exact."""
    x, y = plane(lon, lat)
    return CURRENT[0] - SOLID * y, CURRENT[1] + SOLID * x


def drift(flow, lon, lat, days: float = 4.0, step_s: float = 600.0, every_s: float = 3 * 3600.0):
    """Returns lon, lat `(drifter, obs)` and seconds `(obs,)` of drifters from (lon, lat) in `flow` (m/s), RK4."""
    def rate(a, b):
        u, v = flow(a, b)
        return u / (DEGREE_M * np.cos(np.deg2rad(b))), v / DEGREE_M

    lon, lat = np.array(lon, float), np.array(lat, float)
    kept, stride = [(lon, lat)], int(every_s / step_s)
    for n in range(1, int(round(days * 86400 / step_s)) + 1):
        k1 = rate(lon, lat)
        k2 = rate(lon + step_s / 2 * k1[0], lat + step_s / 2 * k1[1])
        k3 = rate(lon + step_s / 2 * k2[0], lat + step_s / 2 * k2[1])
        k4 = rate(lon + step_s * k3[0], lat + step_s * k3[1])
        lon = lon + step_s / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        lat = lat + step_s / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        if n % stride == 0:
            kept.append((lon, lat))
    return np.array([k[0] for k in kept]).T, np.array([k[1] for k in kept]).T, np.arange(len(kept)) * every_s


def write_tracks(path, lon, lat, seconds) -> str:
    """Writes the drifters as a CSV of id,time,lon,lat; returns the path."""
    rows = ["id,time,lon,lat"]
    for d in range(lon.shape[0]):
        rows += [f"d{d},{T0 + np.timedelta64(int(s), 's')}Z,{a:.7f},{b:.7f}"
                 for s, a, b in zip(seconds, lon[d], lat[d])]
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    return str(path)


def write_product(path, flow, centre=CENTRE) -> str:
    """Writes `flow` on a 0.25-degree grid 4 degrees about `centre` each way, at two times around the window
    (steady), as uo, vo (m/s); returns the path."""
    lon, lat = centre[0] + np.arange(-4.0, 4.01, 0.25), centre[1] + np.arange(-4.0, 4.01, 0.25)
    u, v = flow(*np.meshgrid(lon, lat))
    times = np.array([T0 - np.timedelta64(1, "D"), T0 + np.timedelta64(10, "D")]).astype("datetime64[ns]")
    variables = {name: (("time", "lat", "lon"), np.stack([value, value]), {"units": "m/s"})
                 for name, value in (("uo", u), ("vo", v))}
    xr.Dataset(variables, {"time": times, "lat": lat, "lon": lon}).to_netcdf(path)
    return str(path)


def lattice(n: int, half_m: float):
    """Returns lon, lat `(n * n,)` of drifters on an n x n lattice of half-width `half_m` metres about CENTRE."""
    side = np.linspace(-half_m, half_m, n)
    x, y = (a.ravel() for a in np.meshgrid(side, side))
    return CENTRE[0] + x / (DEGREE_M * np.cos(np.deg2rad(CENTRE[1]))), CENTRE[1] + y / DEGREE_M


def distance_to_fixes(lon2, lat2, lon, lat):
    """Returns the distance `(lat, lon)` in metres from each cell to the nearest of the fixes lon, lat `(n,)`."""
    x, y = plane(lon2[..., None], lat2[..., None])
    fx, fy = plane(lon, lat)
    return np.sqrt((x - fx) ** 2 + (y - fy) ** 2).min(axis=-1)


@pytest.fixture(scope="module")
def eddy_case(tmp_path_factory):
    """16 drifters about the eddy in the current, the current alone as the product, and the result with and
    without it."""
    folder = tmp_path_factory.mktemp("eddy")
    lon, lat, seconds = drift(current_and_eddy, *lattice(4, 60e3))
    tracks = write_tracks(folder / "tracks.csv", lon, lat, seconds)
    product = write_product(folder / "current.nc", lambda a, b: (np.full_like(a, CURRENT[0]),
                                                                 np.full_like(a, CURRENT[1])))
    results = {}
    for name, background in (("with", product), ("without", None)):
        summary = assimilate_file(tracks, folder / f"{name}.nc", AssimilateSettings(**SMALL, background=background))
        results[name] = (xr.load_dataset(folder / f"{name}.nc"), summary)
    return (lon, lat, seconds), results


def test_far_from_the_drifters_the_result_is_the_background_and_near_them_the_eddy_is_better_recovered(eddy_case):
    """Far (over 100 km from every fix, where the eddy is under 1e-6 m/s) the truth is the background. The result's
    departure from it there is not exactly zero: the departure is fitted in Fourier modes of the periodic box, each
    spanning the box, so it is the modes' extrapolation of the eddy the drifters saw. It is bounded by its own 95%
    band at every far cell (measured: the band over 8 times the departure), and its RMS by a fifth of the RMS eddy
    velocity at the fixes (measured: 0.09 of it; 0.13 without the background). Near the drifters (within 20 km of a
    fix that day) the error against current + eddy is smaller with the background than without (measured 0.0028 and
    0.0037 m/s)."""
    (lon, lat, seconds), results = eddy_case
    seen = np.sqrt(np.mean(np.square(eddy(lon, lat))))  # RMS eddy velocity at the fixes, m/s
    near_error, far = {}, None
    for name, (ds, summary) in results.items():
        lon2, lat2 = np.meshgrid(ds.lon.values, ds.lat.values)
        days = (ds.time.values - T0) / np.timedelta64(1, "s")
        true_u, true_v = current_and_eddy(lon2, lat2)
        away = (distance_to_fixes(lon2, lat2, lon.ravel(), lat.ravel()) > 100e3) & (np.hypot(*eddy(lon2, lat2)) < 1e-6)
        errors, departures, bands = [], [], []
        for k, day in enumerate(days):
            today = np.abs(seconds - day) <= 12 * 3600
            near = distance_to_fixes(lon2, lat2, lon[:, today].ravel(), lat[:, today].ravel()) < 20e3
            u, v = ds.u.values[k], ds.v.values[k]
            errors += [(u - true_u)[near], (v - true_v)[near]]
            departures += [(u - CURRENT[0])[away], (v - CURRENT[1])[away]]
            bands += [1.96 * ds.u_total_std.values[k][away], 1.96 * ds.v_total_std.values[k][away]]
        near_error[name] = np.sqrt(np.mean(np.concatenate(errors) ** 2))
        if name == "with":
            far, band = np.concatenate(departures), np.concatenate(bands)
            assert far.size > 100  # the box holds cells far from every drifter
            assert np.all(np.abs(far) <= band)
            assert np.sqrt(np.mean(far**2)) < 0.2 * seen, (np.sqrt(np.mean(far**2)), seen)
    assert near_error["with"] < near_error["without"], near_error
    notes = results["with"][1].notes
    assert ("background current.nc, its velocities: the prior mean; the drifters correct its departure, and far from "
            "them u, v are the background") in notes
    ours = [line for line in notes
            if line.startswith(("background current.nc", "background: psi", "background: u_std"))]
    assert len(ours) == 3 and plain_faults(ours) == [], ours  # in a drifter user's words
    assert not any(line.startswith("background") for line in results["without"][1].notes)
    assert "background current.nc" in results["with"][0].attrs["settings_notes"]


@pytest.fixture(scope="module")
def exact_case(tmp_path_factory):
    """9 drifters in exactly the product's flow (a current and a solid-body rotation, interpolated exactly)."""
    folder = tmp_path_factory.mktemp("exact")
    tracks = write_tracks(folder / "tracks.csv", *drift(current_and_rotation, *lattice(3, 50e3)))
    return tracks, write_product(folder / "flow.nc", current_and_rotation)


def test_drifters_in_exactly_the_background_flow_leave_the_background_as_it_is(exact_case):
    """Their velocities less the product's are zero but for the RK4 and the finite differences' errors (the flow is
    linear in lon, lat: its bilinear interpolation is exact), so the fitted departure is zero, or of their size,
    everywhere: the result (lagda.assimilate, the Python API) is the product on every cell and day, to 1e-3 m/s
    (measured 8e-5) against speeds up to 0.75 m/s (without the background the fit errs 0.5 m/s at the corners)."""
    tracks, product = exact_case
    result = lagda.assimilate(tracks, background=product, say=None, **SMALL)
    lon2, lat2 = np.meshgrid(result.lon.values, result.lat.values)
    true_u, true_v = current_and_rotation(lon2, lat2)
    assert np.abs(result.u.values - true_u).max() < 1e-3 and np.abs(result.v.values - true_v).max() < 1e-3
    assert np.hypot(true_u, true_v).max() > 0.5  # the product is not at rest


def test_a_method_or_tracks_that_cannot_take_a_background_are_refused_in_one_line_before_any_work(tmp_path,
                                                                                                  exact_case):
    tracks, product = exact_case
    with pytest.raises(ValueError, match=r"^background='x.nc': the prior mean of the linear method in a chosen "
                                         r"basis \(the default on longitude/latitude drifters\), not of method='var'$"):
        AssimilateSettings("var", background="x.nc")
    with on_command_line("assimilate"), pytest.raises(ValueError, match=r"^--background x.nc with --climatology "
                                                                        r"qg.nc: the climatology's prior"):
        AssimilateSettings(background="x.nc", climatology="qg.nc")
    with pytest.raises(FileNotFoundError, match=r"^background='missing.nc': no such file or Zarr store$"):
        assimilate_file(tracks, tmp_path / "r.nc", AssimilateSettings(background="missing.nc"))
    from lagda.testing import make_twin, write_twin_tracks

    model_units = str(tmp_path / "twin.nc")
    write_twin_tracks(make_twin(n_field=1, n_drifter=1, n_obs=10), model_units)
    with pytest.raises(ValueError, match=r"^background='.*flow.nc': a product on longitude and latitude, for "
                                         r"longitude/latitude drifters; these tracks are in model units$"):
        assimilate_file(model_units, tmp_path / "r.nc", AssimilateSettings("linear", background=product))
    with pytest.raises(ValueError, match=r"^background='.*flow.nc': the linear method fits the departure from it "
                                         r"with its error model along the tracks"):
        assimilate_file(tracks, tmp_path / "r.nc", AssimilateSettings(config={"representation": "white"},
                                                                      background=product, **SMALL))
    elsewhere = write_product(tmp_path / "elsewhere.nc", current_and_rotation, (CENTRE[0] + 20, CENTRE[1]))
    with pytest.raises(ValueError, match=r"^background='.*elsewhere.nc': no value at any of the 297 fixes \(it "
                                         r"covers lon -14..-6, lat 36..44, .*; the fixes lie in lon -30.7"):
        assimilate_file(tracks, tmp_path / "r.nc", AssimilateSettings(background=elsewhere, **SMALL))
    assert not (tmp_path / "r.nc").exists()


def test_the_command_takes_a_background_and_says_so(tmp_path, exact_case, capsys):
    """`lagda assimilate --background` end to end (lagda.cli.main, as `python -m lagda` runs it, in this process: a
    new one would spend seconds importing): the notes printed, the result written; a missing product refused in one
    line with the flag, nothing written."""
    tracks, product = exact_case
    out = tmp_path / "r.nc"
    argv = ["assimilate", "--tracks", tracks, "--background", product, "--out", str(out), "--box", *map(str, BOX),
            "--k-max", "5", "--degree", "0", "--n-grid", "8", "--no-low-pass"]
    assert main(argv) == 0
    said = capsys.readouterr()
    assert ("lagda assimilate: note: background flow.nc, its velocities: the prior mean; the drifters correct its "
            "departure, and far from them u, v are the background\n") in said.err
    assert "lagda assimilate: note: background: psi and the coefficients are the departure's alone\n" in said.err
    assert said.out.startswith(f"wrote {out}: method linear")
    with xr.open_dataset(out) as ds:
        assert ds.u.dims == ("time", "lat", "lon") and "flow.nc" in ds.attrs["settings_notes"]
    missing = str(tmp_path / "none.nc")
    assert main([*argv[:3], "--background", missing, "--out", str(tmp_path / "s.nc")]) == 2
    assert capsys.readouterr().err == f"lagda assimilate: error: --background {missing}: no such file or Zarr store\n"
    assert not (tmp_path / "s.nc").exists()
