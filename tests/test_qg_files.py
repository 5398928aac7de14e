"""QG truth files (simulate.qg): lagda's own forward model (the Rossby file's coefficients and frequencies), the CF
checker and `read_tracks` (the file), the command's flags and refusals, and the tracks assimilated in a chosen basis.
The flows themselves: tests/test_qg.py.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagda import cli
from lagda.io.formats import read_tracks
from simulate import qg
from simulate.tracks import simulate_tracks

L, NX = 1e6, 16  # the tiny preset's domain (m) and grid, as in tests/test_qg.py
GRID = qg.spectral_grid(NX, L)


@pytest.fixture(scope="module")
def turbulence_file(tmp_path_factory):
    """A tiny two-layer turbulence file made by the CLI (2 flows, fixed lattice release)."""
    out = tmp_path_factory.mktemp("qg") / "turbulence.nc"
    assert cli.main(["simulate", "--flow", "qg", "--qg-preset", "tiny", "--n-samples", "2", "--n-drifters", "9",
                     "--release", "fixed", "--seed", "7", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def anomaly_file(tmp_path_factory):
    """The same in the frame moving with the upper layer (the drifters feel the anomaly only), by the CLI."""
    out = tmp_path_factory.mktemp("qg") / "anomaly.nc"
    assert cli.main(["simulate", "--flow", "qg", "--qg-preset", "tiny", "--n-samples", "2", "--n-drifters", "9",
                     "--release", "fixed", "--seed", "7", "--qg-background", "anomaly", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def rossby_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("qg") / "rossby.nc"
    return qg.write_qg_dataset(qg.tiny("rossby", n_flows=2), out)


def test_rossby_file_is_lagdas_own_model(rossby_file):
    # the file's t = 0 coefficients and Rossby frequencies, run through lagda's forward model, give the QG tracks
    tracks = read_tracks(rossby_file)
    config = qg.tiny("rossby")
    dt = config.obs_interval / config.time_scale_s
    model = simulate_tracks(jnp.asarray(tracks.true_coef), jnp.asarray(tracks.release.reshape(2, -1, 2)),
                            jnp.asarray(tracks.k1), jnp.asarray(tracks.k2), jnp.asarray(tracks.omega),
                            dt / 4, config.n_obs, 4)
    observed = tracks.positions.reshape(2, -1, config.n_obs, 2)
    moved = np.abs(observed[..., -1, :] - tracks.release.reshape(2, -1, 2)).max()
    # the displacements agree to a few per cent (the flow is weakly nonlinear), far below their size
    assert np.abs(np.asarray(model) - observed).max() < 0.05 * moved


def test_file_round_trips_through_read_tracks(turbulence_file):
    import xarray as xr

    config = qg.tiny("turbulence", n_flows=2, n_drifters=9, release="fixed", seed=7)
    tracks = read_tracks(turbulence_file)
    assert tracks.positions.shape == (18, config.n_obs, 2) and tracks.n_field == 2
    assert tracks.mapping.coordinates == "projected" and tracks.mapping.time_scale_s == config.time_scale_s
    np.testing.assert_allclose(tracks.times[0],
                               np.arange(1, config.n_obs + 1) * config.obs_interval / config.time_scale_s)
    np.testing.assert_allclose(tracks.release[:9], np.asarray(qg.release_points(config, None)) / L)  # the same lattice
    np.testing.assert_allclose(tracks.release[9:], tracks.release[:9])
    assert tracks.omega is None and tracks.true_coef is None  # turbulence has no frequencies
    with xr.open_dataset(turbulence_file) as ds:
        assert (ds["u"].dims == ("flow", "truth_time", "grid_y", "grid_x")
                and ds.sizes["truth_time"] == config.n_truth + 1)
        assert ds["u"].attrs["units"] == "m s-1" and ds["psi"].attrs["units"] == "m2 s-1"
        assert ds.attrs["qg_regime"] == "turbulence" and ds.attrs["qg_nx"] == NX
        assert ds.attrs["qg_background"] == "full" and ds.attrs["lagda_qg_format_version"] == "2"
        psi, u, v = (ds[name].values.astype(np.float64) for name in ("psi", "u", "v"))
        background = np.stack([ds["u_background"].values, ds["v_background"].values])  # (2, flow, truth_time)
        coef = ds["proj_coef_re"].values + 1j * ds["proj_coef_im"].values
        k1, k2 = ds["k1"].values, ds["k2"].values
    # pyqg's frame: the drifters feel the upper layer's imposed flow U1 = shear, stored as the background
    np.testing.assert_array_equal(background[0], config.shear)
    np.testing.assert_array_equal(background[1], 0.0)
    # u = -dpsi/dy + u_background, v = dpsi/dx + v_background, spectrally (to float32 storage)
    uv = np.fft.irfftn(np.asarray(qg.spectral_velocity(jnp.fft.rfftn(psi, axes=(-2, -1)), GRID)), s=(NX, NX),
                       axes=(-2, -1))
    uv = uv + background[..., None, None]
    scale = np.abs(u).max()
    np.testing.assert_allclose(uv[0], u, atol=1e-5 * scale)
    np.testing.assert_allclose(uv[1], v, atol=1e-5 * scale)
    np.testing.assert_allclose(coef, qg.project(psi, k1, k2) * config.time_scale_s / L**2, rtol=1e-6,
                               atol=1e-6 * np.abs(coef).max())
    # the drifters' first displacement agrees with the truth's full velocity at the release (3 hours, ~0.5% of L),
    # to a tenth of the anomaly's velocity (the background alone is 10 times larger in this young flow)
    first = (tracks.positions[:9, 0] - tracks.release[:9]) * L / config.obs_interval
    at_release = np.stack([jax.vmap(lambda z: qg.spectral_value(jnp.fft.rfftn(f), z, GRID))(
                               jnp.asarray(tracks.release[:9] * L))
                           for f in (u[0, 0], v[0, 0])], -1)
    anomaly = at_release - background[:, 0, 0]
    np.testing.assert_allclose(first, at_release, atol=0.1 * np.abs(anomaly).max())


@pytest.mark.parametrize("kind", ["turbulence", "rossby"])
def test_files_pass_the_cf_checker(turbulence_file, rossby_file, kind):
    from compliance_checker.runner import CheckSuite

    path = str(turbulence_file if kind == "turbulence" else rossby_file)
    suite = CheckSuite()
    suite.load_all_available_checkers()
    groups, exceptions = suite.run_all(suite.load_dataset(path), ["cf:1.11"])["cf:1.11"]
    report = suite.build_structure("cf:1.11", groups, path)
    errors = [f"{r.name}: {m}" for r in report["high_priorities"] for m in r.msgs]
    assert report["high_count"] == 0 and not errors and not exceptions, (errors, exceptions)
    assert report["scored_points"] > 0


def test_cli_writes_history_and_refuses_an_existing_file(turbulence_file, capsys):
    import netCDF4

    with netCDF4.Dataset(turbulence_file) as nc:
        assert nc.getncattr("history").startswith("lagda simulate --flow qg --qg-preset tiny")
        assert nc.getncattr("featureType") == "trajectory"
    capsys.readouterr()
    assert cli.main(["simulate", "--flow", "qg", "--qg-preset", "tiny", "--out", str(turbulence_file)]) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--stride", "2"], "--stride does not apply to --flow qg"),
    (["--preset", "small"], "--preset does not apply to --flow qg"),
    (["--obs-interval", "5000"], "obs_interval = 5000.0 s is not a multiple of dt = 3600.0 s"),
    (["--k-max", "8"], "k_max must be in [0, 7] for nx = 16"),
    (["--n-drifters", "0"], "n_flows, n_drifters and windows must be >= 1, got 1, 0, 1"),
    (["--qg-windows", "0"], "n_flows, n_drifters and windows must be >= 1, got 1, 8, 0"),
    (["--release-box", "0.5", "0.2", "0", "1"], "release_box must be (x0, x1, y0, y1)"),
], ids=["fourier-flag", "fourier-preset", "obs-interval", "k-max", "drifters", "windows", "release-box"])
def test_bad_qg_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    code = cli.main(["simulate", "--flow", "qg", "--qg-preset", "tiny", *argv, "--out", str(tmp_path / "x.nc")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("lagda simulate: error: ") and message in err[0], err
    assert not list(tmp_path.iterdir())


def test_cli_flags_map_onto_the_window_preset():
    argv = ["simulate", "--flow", "qg", "--qg-preset", "window", "--qg-background", "anomaly",
            "--release-box", "0.1", "0.6", "0.2", "0.9", "--out", "unused.nc"]
    args = cli.build_parser().parse_args(argv)
    args.argv = argv
    expected = qg.window(background="anomaly", release_box=(0.1, 0.6, 0.2, 0.9))
    assert cli.qg_config(args) == expected


def test_qg_flags_need_flow_qg(tmp_path, capsys):
    assert cli.main(["simulate", "--window-days", "3", "--out", str(tmp_path / "x.nc")]) == 2
    assert "--window-days applies only to --flow qg" in capsys.readouterr().err


def _flows(path, flows, out):
    """Writes the flows `flows` of a QG truth file (their tracks and truth) as a file of their own."""
    import xarray as xr

    with xr.open_dataset(path) as ds:
        keep = np.isin(ds["field"].values, flows)
        sub = ds.isel(flow=flows, trajectory=np.flatnonzero(keep)).load()
    sub["field"].values[:] = np.searchsorted(flows, sub["field"].values)
    sub.to_netcdf(out)
    return out


def test_qg_tracks_assimilate_in_a_chosen_basis(anomaly_file, tmp_path, capsys, monkeypatch):
    # the anomaly frame: no background, so the current a basis holds must stay near zero (its climatology's prior)
    import json

    import xarray as xr

    from lagda.assimilation import assimilate as module
    from lagda.assimilation.settings import AssimilateSettings

    summaries, assimilate_file = {}, module.assimilate_file

    def kept(*args, **kwargs):  # the command's summary, whose scores of its linear run are checked below
        summaries["linear"] = assimilate_file(*args, **kwargs)
        return summaries["linear"]

    monkeypatch.setattr(module, "assimilate_file", kept)
    with xr.open_dataset(anomaly_file) as ds:
        assert ds.attrs["qg_background"] == "anomaly" and not np.any(ds["u_background"].values)
    climatology, test = _flows(anomaly_file, [0], tmp_path / "clim.nc"), _flows(anomaly_file, [1], tmp_path / "test.nc")
    out = tmp_path / "result.nc"
    # without the local GP (tests/test_physical.py's jets test it in metres): the total std checked below is then
    # the linear method's own, the field's std with its representation error
    argv = ["assimilate", "--tracks", str(test), "--method", "linear", "--basis", "circular", "--k-max", "3",
            "--degree", "2", "--no-local-gp",
            "--climatology", str(climatology), "--members", "8", "--out", str(out)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "velocity error against the QG truth" in captured.out
    assert "the current the flow leaves out (variance: " in captured.out
    assert "95% bands of u_std, v_std (the field in the basis) cover" in captured.out
    assert "of u_total_std, v_total_std (the velocity the basis leaves out included)" in captured.out
    assert "prior: the climatology's 1 flow:" in captured.err and summaries["linear"].method == "linear"
    from lagda.io.results import read_result

    with xr.open_dataset(out) as ds:
        assert ds["degree"].values.max() == 2 and ds["degree"].attrs["window_length"] == pytest.approx(0.1)
        assert ds["u_mean"].attrs["units"] == "m s-1" and ds["u_total_std"].attrs["units"] == "m s-1"
        (info,) = json.loads(ds.attrs["diagnostics"])
    # the predictive std of the full velocity: sqrt(std^2 + r^2), r the representation std (model units) in m/s
    result = read_result(out)
    lat = result.mapping.from_model(np.zeros_like(result.y), result.y)[1]
    for name, factor in zip(("u", "v"), result.mapping.velocity_factors(lat)):
        added = result.fields[f"{name}_total_std"] ** 2 - result.fields[f"{name}_std"] ** 2  # (field, time, y, x)
        expected = (info["representation_std"] * np.broadcast_to(factor, result.y.shape)) ** 2
        np.testing.assert_allclose(added, np.broadcast_to(expected[:, None], added.shape), rtol=1e-6)
    # the climatology's OU time scale: pairs kept a quarter of it apart, at most every pair
    assert info["pair_spacing"] == pytest.approx(0.25 * info["representation_time"])
    assert 0 < info["pairs_used"] <= info["pairs"]
    # var: any estimate in the basis serves the identity below (its error has no bound); its continuation's
    # half-window stage in a chosen basis is run here and nowhere else
    summaries["var"] = assimilate_file(test, tmp_path / "var.nc", AssimilateSettings(
        "var", {"members": 8, "iterations": 4, "continuation": (0.5, 1.0)}, basis="circular", k_max=3, degree=2,
        climatology=climatology))
    for method, path in (("linear", out), ("var", tmp_path / "var.nc")):
        summary = summaries[method]
        # the truth's fit is the least-squares optimum in the basis on the truth grid and times, so for any
        # estimate in the basis: error^2 = limit^2 + (its distance to the fit)^2 (relative to |truth|^2 and |fit|^2)
        error, to_fit, limit = (summary.scores[k] for k in ("velocity_error_vs_truth", "velocity_error_vs_projection",
                                                     "projection_limit"))
        # strong-constraint var assumes the flow lies in the basis: it fits the unresolved scales
        # (no bound on its error)
        assert limit < error and (method != "linear" or error < 1.0), (method, error)
        assert error**2 == pytest.approx(limit**2 + to_fit**2 * (1 - limit**2), rel=1e-6)
        # only linear models the velocity the basis leaves out: var's result has no predictive std of it
        assert ("u_total_std" in read_result(path).fields) == (method == "linear")
        assert ("velocity_coverage_vs_truth_with_unresolved" in summary.scores) == (method == "linear")


def test_qg_scores_of_posteriors_around_the_truths_fit(anomaly_file):
    """qg_scores against closed forms: the members c_fit +- d/2 (equal weights) have mean c_fit and, at each grid
    velocity, std |w(d)| / 2, so their errors are 0 against the fit and the projection limit against the truth,
    their bands cover the whole fit, and the truth where |w_true - w_fit| <= 1.96 |w(d)| / 2 (basis_fields on the
    truth's cell centres, which the scores must match)."""
    from lagda.assimilation.methods.basis import basis_model, qg_scores
    from lagda.assimilation.posterior import Posterior
    from simulate.qg.projection import basis_fields, truth_in_basis

    tracks = read_tracks(anomaly_file)
    model = basis_model(tracks, "circular", 3, 2)
    degree, current = 2, model.time.current is not None
    k1, k2 = model.k1[:: degree + 1][int(current):], model.k2[:: degree + 1][int(current):]
    truth = truth_in_basis(tracks.gridded_truth, k1, k2, degree, flows=[0, 1], current=current)
    fit, n = truth["coef"], int(tracks.gridded_truth.attrs["qg_nx"])
    d = 0.5 * np.roll(fit, 1, axis=-1)  # a spread unlike the fit itself
    posterior = Posterior(np.stack([fit + d / 2, fit - d / 2], axis=1), np.full((2, 2), 0.5), "test")
    scores = qg_scores(tracks, posterior, model)
    assert scores["velocity_error_vs_projection"] < 1e-12
    assert scores["velocity_error_vs_truth"] == pytest.approx(scores["projection_limit"], rel=1e-9)
    assert scores["velocity_coverage_vs_projection"] == 1.0
    _, du, dv = basis_fields(d, k1, k2, degree, model.time.start, model.time.length, truth["times"], n, current)
    inside = [np.abs(truth[a] - truth[f"{a}_fit"]) <= 1.96 * np.abs(b) / 2 for a, b in (("u", du), ("v", dv))]
    expected = np.mean([(inside[0][f].mean() + inside[1][f].mean()) / 2 for f in range(2)])
    assert 0.05 < expected < 0.95  # the check can tell
    assert scores["velocity_coverage_vs_truth"] == pytest.approx(expected, abs=1e-9)
    assert "velocity_coverage_vs_truth_with_unresolved" not in scores  # no representation error recorded
    # with linear's representation std r per field: the bands mean +- 1.96 sqrt(std^2 + r^2)
    r = np.array([0.3, 0.1]) * np.std(truth["u"])
    widened = qg_scores(tracks, dataclasses.replace(posterior, info=tuple({"representation_std": x} for x in r)),
                        model)["velocity_coverage_vs_truth_with_unresolved"]
    inside = [np.abs(truth[a] - truth[f"{a}_fit"]) <= 1.96 * np.sqrt((b / 2) ** 2 + r[:, None, None, None] ** 2)
              for a, b in (("u", du), ("v", dv))]
    assert widened == pytest.approx(np.mean([(inside[0][f].mean() + inside[1][f].mean()) / 2 for f in range(2)]),
                                    abs=1e-9)
    assert widened > expected
    # a basis finer than the 16^2 truth grid (|k| up to 8) has no fit there: the same members, zero in its extra
    # modes, score the same against the truth, and the note says why the rest is missing
    fine = basis_model(tracks, "circular", 8, 2)
    where = {key: m for m, key in enumerate(zip(fine.k1.tolist(), fine.k2.tolist(), fine.time.degree.tolist()))}
    index = [where[key] for key in zip(model.k1.tolist(), model.k2.tolist(), model.time.degree.tolist())]
    samples = np.zeros((2, 2, fine.n_modes), complex)
    samples[..., index] = posterior.samples
    fine_scores = qg_scores(tracks, Posterior(samples, posterior.weights, "test"), fine)
    assert "projection_limit" not in fine_scores and "|k| < 8" in fine_scores["projection_note"]
    for name in ("velocity_error_vs_truth", "velocity_coverage_vs_truth"):
        assert fine_scores[name] == pytest.approx(scores[name], rel=1e-9), name


def test_a_basis_without_climatology_records_its_choices(turbulence_file, tmp_path, capsys):
    """No --climatology: linear chooses the prior's spectrum and the OU error model from the tracks, says so in the
    notes, the printed diagnostics and the result file, and is never worse than the prior mean (zero, error 1)."""
    import json

    import xarray as xr

    test, out = _flows(turbulence_file, [1], tmp_path / "test.nc"), tmp_path / "r.nc"
    argv = ["assimilate", "--tracks", str(test), "--method", "linear", "--basis", "circular", "--k-max", "3",
            "--degree", "1", "--members", "4", "--out", str(out)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "-fold cross-validation over drifters" in captured.err
    assert "the current the flow leaves out: std " in captured.out
    assert "mean square velocity unexplained" in captured.out
    with xr.open_dataset(out) as ds:
        (info,) = json.loads(ds.attrs["diagnostics"])
    # coordinate search, each coordinate descending from the grid's middle (prior_search.climb): the middle model and
    # at least one neighbour per coordinate, each model once, never more than the 4 time scales and 4 other variances
    # of the grids and one refined variance
    table = info["error_model_table"]
    models = {(row["tau_days"], row["representation_var"]) for row in table}
    assert info["representation_time_source"] == "cross-validation" and 3 <= len(models) == len(table) <= 9
    best = min(table, key=lambda row: row["cv_ratio"])  # the choice: the least CV ratio of every model tried
    assert best["representation_var"] == pytest.approx(info["representation_std"] ** 2, rel=1e-9)
    spectrum = info["prior_log_spectrum"]
    assert set(spectrum) == {"a_per_degree", "b", "c", "k0"} and len(spectrum["a_per_degree"]) == 2
    error = float(captured.out.split("against the QG truth (relative L2 over its grid, times and flows): ")[1][:5])
    assert error <= 1.0 + 1e-3 and (error < 1.0) != info["zero_guard"]


@pytest.mark.parametrize("argv, message", [
    (["--method", "embed", "--basis", "circular"], "no time basis"),
    (["--method", "hybrid", "--basis", "circular", "--climatology", "{file}"],
     "in a chosen basis needs a trained run (--model RUN"),
    (["--method", "hybrid", "--basis", "circular", "--k-max", "3", "--climatology", "{file}", "--model", "{shipped}"],
     "trained on lagda's own flows, not on pairs in a chosen basis"),
    (["--method", "linear", "--climatology", "{file}"], "needs a chosen basis (--basis circular or rectangular)"),
])
def test_basis_refusals_are_one_line(turbulence_file, tmp_path, capsys, argv, message):
    from lagda.examples import DEFAULT_MODEL, shipped

    argv = [a.replace("{file}", str(turbulence_file)).replace("{shipped}", str(shipped(DEFAULT_MODEL))) for a in argv]
    assert cli.main(["assimilate", "--tracks", str(turbulence_file), "--out", str(tmp_path / "r.nc"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "r.nc").exists()


def test_rossby_file_assimilates_with_its_frequencies(rossby_file, tmp_path, capsys):
    assert cli.main(["assimilate", "--tracks", str(rossby_file), "--method", "linear", "--members", "8",
                     "--out", str(tmp_path / "r.nc")]) == 0
    captured = capsys.readouterr()
    assert "frequencies omega_k from the track file" in captured.err and "velocity_rel_l2" in captured.out


def test_tracks_whose_mapping_was_inferred_take_the_climatologys(turbulence_file, tmp_path):
    """Tracks in metres written without lagda's mapping (another tool's file) get an inferred box and time scale;
    a climatology's own mapping replaces them (its prior is per its box length and time unit), a stored one stays."""
    import dataclasses

    from lagda.assimilation.methods.basis import adopt_climatology_mapping
    from lagda.io.physical import infer_mapping
    from lagda.io.tracks import remap_tracks

    climatology = read_tracks(_flows(turbulence_file, [0], tmp_path / "clim.nc"))
    stored = read_tracks(_flows(turbulence_file, [1], tmp_path / "test.nc"))
    m = stored.mapping
    fixes = np.stack(m.from_model(stored.positions[..., 0], stored.positions[..., 1]), axis=-1)
    inferred = infer_mapping(list(fixes), list(m.time_from_model(stored.times)), "projected")
    assert set(inferred.inferred) == {"box", "time_origin", "time_scale"} and inferred.box != m.box
    plain = remap_tracks(stored, inferred)
    adopted, notes = adopt_climatology_mapping(plain, climatology)
    assert len(notes) == 1 and notes[0].startswith("mapping adopted from the climatology") and notes[0] in adopted.notes
    assert adopted.mapping.box == m.box and adopted.mapping.time_scale_s == m.time_scale_s  # the same model domain
    np.testing.assert_allclose(adopted.positions, stored.positions, atol=1e-12)
    first = np.nanmin(stored.times)  # the inferred time origin is the first fix, not the release
    np.testing.assert_allclose(adopted.times, stored.times - first, atol=1e-12)
    assert adopt_climatology_mapping(stored, climatology) == (stored, [])  # a mapping the file states is kept
    given = dataclasses.replace(plain, mapping=dataclasses.replace(plain.mapping, inferred=("time_origin",)))
    assert adopt_climatology_mapping(given, climatology) == (given, [])  # box and time scale given by the user


def test_a_climatology_too_coarse_for_the_basis_is_one_clear_error(turbulence_file, tmp_path, capsys):
    """The default k_max 12 on a climatology of the tiny preset's 16^2 grid: one line that says what to change, before
    anything is written (the truth's fit in the basis would alias above |k| = 8)."""
    climatology, test = (_flows(turbulence_file, [0], tmp_path / "clim.nc"),
                         _flows(turbulence_file, [1], tmp_path / "t.nc"))
    out = tmp_path / "r.nc"
    assert cli.main(["assimilate", "--tracks", str(test), "--method", "linear", "--basis", "circular",
                     "--climatology", str(climatology), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert not out.exists()
    assert "climatology's 16^2 grid resolves |k| < 8, the basis reaches |k| = 12: give --k-max below 8" in error


def test_the_background_current_is_recovered_in_a_chosen_basis(turbulence_file, tmp_path):
    """Drifters feel pyqg's background U1 (here 10 times the tiny flow's anomaly): the basis's uniform current holds
    it, so linear recovers the full velocity, and its degree-0 current is U1 in model units (U1 T / L)."""
    from lagda.assimilation.assimilate import assimilate_file
    from lagda.assimilation.settings import AssimilateSettings
    from lagda.io.results import read_result

    climatology, test = (_flows(turbulence_file, [0], tmp_path / "clim.nc"),
                         _flows(turbulence_file, [1], tmp_path / "t.nc"))
    summary = assimilate_file(test, tmp_path / "r.nc", AssimilateSettings(
        "linear", {"members": 8}, basis="circular", k_max=3, degree=2, climatology=climatology))
    assert summary.scores["velocity_error_vs_truth"] < 0.5  # the prior mean, zero, errs 1
    config = qg.tiny("turbulence")
    result = read_result(tmp_path / "r.nc")
    current = result.coef_mean[0, result.time_basis.current > 0]  # degrees 0..2 of the current
    u1 = qg.background_velocity(config)[0] * config.time_scale_s / config.L
    # U to 5%; V (zero) to the anomaly's RMS speed, about U1 / 10, which the 9 drifters sample for 4 days
    assert abs(current[0].real / u1 - 1) < 0.05 and abs(current[0].imag) < 0.1 * u1


def test_export_places_metres_on_the_sphere_and_plain_writes_no_lagda_attributes(turbulence_file, tmp_path):
    """`export-tracks --centre --plain` (how the GDP-like example is made): the same box lengths on the tangent plane
    at the centre, the same fixes; the plain file holds no mapping, release points or truth, so a reader infers them."""
    from lagda.io.export import export_tracks

    source = read_tracks(turbulence_file)
    placed = export_tracks(turbulence_file, tmp_path / "g.nc", centre=(-40.0, 34.0), start="2025-03-01T00:00:00Z",
                           layout="ragged", plain=True)
    assert placed.mapping.lengths_m == pytest.approx(source.mapping.lengths_m, rel=1e-9)
    assert placed.mapping.centre == pytest.approx((-40.0, 34.0)) and placed.mapping.coordinates == "lonlat"
    np.testing.assert_array_equal(placed.positions, source.positions)  # model units unchanged: the same velocities
    back = read_tracks(tmp_path / "g.nc")
    assert {"box", "time_scale"} <= set(back.mapping.inferred) and back.release is None and back.true_coef is None
    lon, lat = (np.sort(np.ravel(a)[np.isfinite(np.ravel(a))]) for a in
                back.mapping.from_model(back.positions[..., 0], back.positions[..., 1]))
    lon0, lat0 = (np.sort(np.ravel(a)[np.isfinite(np.ravel(a))]) for a in
                  placed.mapping.from_model(placed.positions[..., 0], placed.positions[..., 1]))
    np.testing.assert_allclose(lon, lon0, atol=1e-9)
    np.testing.assert_allclose(lat, lat0, atol=1e-9)
    with pytest.raises(ValueError, match="needs tracks in projected metres"):
        export_tracks("data/example_small.nc", tmp_path / "m.nc", centre=(-40.0, 34.0))


def test_basis_pairs_train_an_encoder_that_hybrid_uses_in_that_basis(turbulence_file, tmp_path):
    """write_basis_pairs: the truth's fit in the basis against the tracks, with the time basis; a set encoder trained
    on them is hybrid's prior in that basis (with a climatology), and refused in another basis or without one."""
    import json

    import xarray as xr

    from lagda.assimilation.assimilate import assimilate_file
    from lagda.assimilation.methods.basis import spatial_modes, write_basis_pairs
    from lagda.assimilation.methods.learned import scorer_from_run
    from lagda.assimilation.settings import AssimilateSettings
    from lagda.learning.config import learned
    from lagda.learning.data import load_paired
    from lagda.learning.train import train
    from simulate.qg.projection import truth_in_basis

    pairs = write_basis_pairs(turbulence_file, tmp_path / "pairs.nc", "circular", 3, 1)
    data = load_paired(pairs)
    stored = read_tracks(turbulence_file)
    with xr.open_dataset(turbulence_file) as ds:
        truth = truth_in_basis(ds, *spatial_modes("circular", 3), 1, current=True)
    np.testing.assert_allclose(data.coef, truth["coef"], rtol=1e-6, atol=1e-7 * np.abs(truth["coef"]).max())
    np.testing.assert_allclose(data.positions, stored.positions.reshape(2, 9, -1, 2), atol=1e-6)
    np.testing.assert_allclose(data.time, stored.times[0])
    spec = data.meta()["time_basis"]
    assert spec["degree"] == truth["time_basis"].degree.tolist() and spec["current"][:2] == [True, True]
    assert spec["length"] == pytest.approx(0.1) and data.k1.size == truth["k1"].size

    run = tmp_path / "run"
    config = learned(set_head="ridge", epochs=1, batch_size=2, similarity="inner", mask_mean_mode=False,
                     eval_library=0, set_rank=8,
                     regime="mixture", regime_max_drifters=9)
    train(config, str(pairs), str(pairs), run, progress=False)
    scorer, _ = scorer_from_run(run)
    assert scorer.modes["time_basis"]["degree"] == spec["degree"]
    climatology, test = (_flows(turbulence_file, [0], tmp_path / "clim.nc"),
                         _flows(turbulence_file, [1], tmp_path / "t.nc"))
    common = dict(method="hybrid", config={"members": 4}, run_dir=run, basis="circular", k_max=3)
    summary = assimilate_file(test, tmp_path / "h.nc", AssimilateSettings(degree=1, climatology=climatology, **common))
    assert np.isfinite(summary.scores["velocity_error_vs_truth"])
    with xr.open_dataset(tmp_path / "h.nc") as ds:
        (info,) = json.loads(ds.attrs["diagnostics"])
    assert info["learned_conditional"] and info["prior_choice"] in range(5) and len(info["prior_log_evidence"]) == 5
    with pytest.raises(ValueError, match="needs --climatology"):
        assimilate_file(test, tmp_path / "n.nc", AssimilateSettings(degree=1, **common))
    with pytest.raises(ValueError, match="is not the one chosen for these tracks"):
        assimilate_file(test, tmp_path / "d.nc", AssimilateSettings(degree=2, climatology=climatology, **common))


def test_hybrid_with_an_uninformative_encoder_is_linear_in_a_chosen_basis(turbulence_file, tmp_path):
    # the inner-product conditional of a zero embedding is the prior itself, N(0, D): every candidate prior is the
    # climatology's, so hybrid's posterior is linear's
    import jax

    from lagda.assimilation.methods.basis import basis_model
    from lagda.assimilation.methods.learned import Scorer
    from lagda.assimilation.methods.registry import Hybrid, Linear

    clim, test = (read_tracks(_flows(turbulence_file, [0], tmp_path / "clim.nc")),
                  read_tracks(_flows(turbulence_file, [1], tmp_path / "t.nc")))
    model = basis_model(test, "circular", 3, 1, clim)
    modes = {"k1": model.k1.tolist(), "k2": model.k2.tolist(),
             "time_basis": {"degree": model.time.degree.tolist(), "start": 0.0, "length": model.time.length}}
    zero = Scorer(lambda positions, times, valid: np.zeros((1, 2 * model.n_modes)), "inner", 1.0, None, None, True,
                  modes)
    hybrid = Hybrid(zero, members=4)(test, model, jax.random.key(0))
    linear = Linear(members=4)(test, model, jax.random.key(0))
    np.testing.assert_allclose(hybrid.mean, linear.mean, rtol=1e-12, atol=1e-14)
    assert hybrid.diagnostics()[0]["prior_choice"] == 0
    # the encoder reads fixes at its training cadence: every other one of these 3-hourly tracks at a 6-hourly one
    from lagda.assimilation.methods.hybrid import at_cadence

    spacing = float(test.times[0, 1] - test.times[0, 0])
    coarse = at_cadence(test, 2 * spacing)
    np.testing.assert_array_equal(np.isfinite(coarse.times[:, ::2]), True)
    np.testing.assert_array_equal(np.isfinite(coarse.times[:, 1::2]), False)
    assert at_cadence(test, spacing) is test
