"""Assimilation results: gridded posterior moments against closed forms, file round trip."""

import dataclasses

import jax
import netCDF4
import numpy as np
import pytest

from lagda.assimilation.fields import grid_posterior, posterior_result
from lagda.assimilation.methods.linear_gaussian import gaussian_estimate
from lagda.assimilation.model import flow_model, to_complex
from lagda.assimilation.posterior import Posterior, stack_estimates
from lagda.io.results import read_result, write_result
from lagda.io.tracks import Tracks
from simulate.flow import circular_modes, grid_fields, in_time, rectangular_modes

K1, K2 = rectangular_modes((-1, 1), (-1, 1))
OMEGA = np.linspace(-3.0, 3.0, 9)
TIMES = np.array([0.0, 0.05, 0.1])
N = 8


def _complex(rng, shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def test_single_member_posterior_has_zero_std_and_exact_mean():
    c = _complex(np.random.default_rng(0), (2, 1, 9))
    out = grid_posterior(Posterior(c, np.ones((2, 1)), "test"), K1, K2, OMEGA, TIMES, N)
    expected = grid_fields(c[:, 0], K1, K2, OMEGA, TIMES, N)
    for name, exp in zip(("psi", "u", "v"), expected):
        assert out[f"{name}_mean"].shape == (2, 3, N, N)
        np.testing.assert_allclose(out[f"{name}_mean"], exp, atol=1e-12)
        np.testing.assert_array_equal(out[f"{name}_std"], 0.0)


@pytest.mark.parametrize("batch", [1, 64])
def test_symmetric_two_member_std_is_the_perturbation_field(batch):
    # members c0 +- d with weights 1/2: mean field f(c0), std |f(d)| pointwise (f is linear)
    rng = np.random.default_rng(1)
    c0, d = _complex(rng, (1, 9)), _complex(rng, (1, 9))
    post = Posterior(np.stack([c0 + d, c0 - d], axis=1), np.full((1, 2), 0.5), "test")
    out = grid_posterior(post, K1, K2, OMEGA, TIMES, N, batch=batch)
    for name, f0, fd in zip(("psi", "u", "v"), grid_fields(c0, K1, K2, OMEGA, TIMES, N),
                            grid_fields(d, K1, K2, OMEGA, TIMES, N)):
        np.testing.assert_allclose(out[f"{name}_mean"], f0, atol=1e-10)
        np.testing.assert_allclose(out[f"{name}_std"], np.abs(fd), atol=1e-10)


def test_weighted_std_matches_monte_carlo_formula():
    rng = np.random.default_rng(2)
    samples = _complex(rng, (1, 5, 9))
    w = rng.uniform(size=(1, 5))
    w /= w.sum()
    out = grid_posterior(Posterior(samples, w, "test"), K1, K2, OMEGA, TIMES, N, batch=2)  # 5 members, padded batches
    u = np.asarray(grid_fields(samples[0], K1, K2, OMEGA, TIMES, N)[1])  # (member, time, y, x)
    mean = np.einsum("m,mtyx->tyx", w[0], u)
    std = np.sqrt(np.einsum("m,mtyx->tyx", w[0], (u - mean) ** 2))
    np.testing.assert_allclose(out["u_std"][0], std, atol=1e-10)


@pytest.mark.parametrize("case", ["frequencies", "steady", "legendre-with-current"])
def test_exact_std_of_a_gaussian_is_that_of_its_root_as_members(case):
    """For cov = R R^T (r columns), the 2r members mean +- sqrt(r) R_j of weight 1 / 2r have exactly the variance of
    N(mean, cov) in every linear functional: the exact spreads (from cov) equal those members' weighted spreads."""
    k1, k2, omega, time = K1, K2, OMEGA, None
    if case == "steady":
        omega = np.zeros(len(K1))
    elif case == "legendre-with-current":
        c1, c2 = circular_modes(2.0)
        current = np.arange(len(c1) + 1) == 0
        k1, k2, omega, time = in_time(np.r_[0, c1], np.r_[0, c2], np.zeros(len(c1) + 1), 2, 0.0, 0.1, current)
    rng = np.random.default_rng(4)
    n, r = len(k1), 5
    root, mean = rng.normal(size=(2 * n, r)), _complex(rng, (1, n))
    dev = to_complex(np.sqrt(r) * root.T)  # (r, mode)
    members = np.concatenate([mean + dev, mean - dev])[None]
    weights = np.full((1, 2 * r), 0.5 / r)
    exact = Posterior(members, weights, "test", cov=(root @ root.T)[None])
    sampled = Posterior(members, weights, "test")
    for a, b in ((exact.std_re, sampled.std_re), (exact.std_im, sampled.std_im)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    out, reference = (grid_posterior(p, k1, k2, omega, TIMES, N, time=time) for p in (exact, sampled))
    for name in reference:
        scale = np.abs(reference[name]).max()
        np.testing.assert_allclose(out[name], reference[name], atol=1e-10 * scale, err_msg=name)


def test_a_phase_shifted_covariance_is_that_of_the_shifted_coefficients():
    """c' = c exp(i phase) (a field moved by half a cell, `at_cell_centres`): for cov = R R^T, the shifted
    covariance is R' R'^T of the shifted columns."""
    from lagda.assimilation.methods.basis import _phase_shifted

    rng = np.random.default_rng(6)
    root, phase = rng.normal(size=(18, 4)), rng.uniform(-np.pi, np.pi, 9)
    shifted = to_complex(root.T) * np.exp(1j * phase)  # (column, mode)
    root_shifted = np.concatenate([shifted.real, shifted.imag], axis=1).T
    np.testing.assert_allclose(_phase_shifted(root @ root.T, phase), root_shifted @ root_shifted.T, atol=1e-12)


def test_a_gaussian_estimate_keeps_its_covariance():
    cov = np.diag(np.arange(1.0, 19.0))
    estimate = gaussian_estimate(jax.random.key(0), np.zeros(18), cov, 8)
    post = stack_estimates([estimate, estimate], "linear", [1.0, 1.0])
    np.testing.assert_array_equal(post.cov, [cov, cov])
    np.testing.assert_allclose(post.std_im, np.sqrt(np.arange(10.0, 19.0))[None].repeat(2, 0), rtol=1e-15)
    mixed = stack_estimates([estimate, dataclasses.replace(estimate, cov=None)], "linear", [1.0, 1.0])
    assert mixed.cov is None  # the spreads of every field from the samples
    with pytest.raises(ValueError, match="cov"):
        Posterior(post.samples, post.weights, "linear", cov=post.cov[:, :4, :4])


def _write(path, post, tracks=None, attrs=None, n_modes=9):
    """Writes the result file of `post` in the 3 x 3 model (the first `n_modes` modes) at TIMES on the N grid."""
    model = flow_model(K1[:n_modes], K2[:n_modes], OMEGA[:n_modes], np.ones(n_modes), 1e-4)
    write_result(path, posterior_result(post, model, TIMES, N, tracks, attrs))


def _posterior(retrieval=True):
    rng = np.random.default_rng(3)
    samples = _complex(rng, (2, 4, 9))
    w = np.full((2, 4), 0.25)
    extra = dict(candidates=samples[:, :3], candidate_weights=np.full((2, 3), 1 / 3)) if retrieval else {}
    return Posterior(samples, w, "retrieve" if retrieval else "enkf", seconds=np.array([0.5, 0.25]), **extra)


def test_result_file_round_trips(tmp_path):
    post = _posterior()
    time = np.array([[1e-4, 2e-4, 3e-4], [1e-4, 2e-4, np.nan]])
    tracks = Tracks(np.arange(12.0).reshape(2, 3, 2) / 10, time, np.array([0, 1]), np.array(["a", "b"]),
                    true_coef=np.ones((2, 9), complex), release=np.full((2, 2), 0.75))
    path = tmp_path / "r.nc"
    _write(path, post, tracks, {"model_run": "runs/x"})
    res = read_result(path)
    np.testing.assert_allclose(res.coef_mean, post.mean, atol=1e-15)
    np.testing.assert_allclose(res.coef_std_re, post.std_re, atol=1e-15)
    np.testing.assert_allclose(res.coef_std_im, post.std_im, atol=1e-15)
    np.testing.assert_array_equal(res.candidates, post.candidates)
    np.testing.assert_array_equal(res.candidate_weights, post.candidate_weights)
    np.testing.assert_array_equal(res.seconds, post.seconds)
    np.testing.assert_array_equal(res.k1, K1)
    np.testing.assert_array_equal(res.omega, OMEGA)
    np.testing.assert_array_equal(res.time, TIMES)
    np.testing.assert_array_equal(res.x, np.arange(N) / N)
    fields = grid_posterior(post, K1, K2, OMEGA, TIMES, N)
    for name, value in fields.items():
        np.testing.assert_allclose(res.fields[name], value, atol=1e-14)
    assert res.method == "retrieve" and res.attrs["model_run"] == "runs/x" and res.attrs["Conventions"] == "CF-1.11"
    np.testing.assert_array_equal(res.tracks.positions, tracks.positions)
    np.testing.assert_array_equal(res.tracks.times, tracks.times)
    assert res.tracks.trajectory_id.tolist() == ["a", "b"]
    np.testing.assert_array_equal(res.true_coef, tracks.true_coef)
    with netCDF4.Dataset(path) as nc:
        assert nc["candidate_coef_re"].dimensions == ("field", "rank", "mode")
        assert nc["psi_std"].dimensions == ("field", "model_time", "y", "x")
        assert "lagda_version" in nc.ncattrs() and "history" in nc.ncattrs()
        for var in nc.variables.values():
            assert getattr(var, "long_name", ""), var.name
            if var.name != "track_id":
                assert hasattr(var, "units"), var.name
    assert sorted(f.name for f in tmp_path.iterdir()) == ["r.nc"]  # no hidden .r.nc.tmp-PID left


def test_result_without_candidates_or_tracks(tmp_path):
    _write(tmp_path / "r.nc", _posterior(retrieval=False))
    res = read_result(tmp_path / "r.nc")
    assert res.candidates is None and res.tracks is None and res.true_coef is None
    with netCDF4.Dataset(tmp_path / "r.nc") as nc:
        assert "rank" not in nc.dimensions


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="modes"):
        _write(tmp_path / "r.nc", _posterior(), n_modes=4)
    assert not list(tmp_path.iterdir())
    (tmp_path / "x.nc").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a netCDF"):
        read_result(tmp_path / "x.nc")
    with pytest.raises(FileNotFoundError):
        read_result(tmp_path / "none.nc")


def test_wrapped_segments_drop_missing_points_and_break_reduced_tracks_at_wraps():
    from simulate.plot import wrapped_segments

    x = np.array([0.8, 0.95, np.nan, 0.1, 0.2])  # already reduced mod 1, one missing point
    pieces = wrapped_segments(x, np.array([0.5, 0.5, 0.5, 0.5, 0.6]))
    assert [px.tolist() for px, _ in pieces] == [[0.8, 0.95], [0.1, 0.2]]
    assert wrapped_segments(np.full(3, np.nan), np.zeros(3)) == []


def test_plot_assimilation_writes_png(tmp_path):
    from lagda.assimilation.plot import plot_assimilation

    post = _posterior()
    tracks = Tracks(np.cumsum(np.full((2, 20, 2), 0.07), axis=1), np.tile(np.arange(1, 21) * 1e-3, (2, 1)),
                    np.array([0, 1]), np.array([1, 2]), true_coef=post.mean)
    _write(tmp_path / "r.nc", post, tracks)
    out = plot_assimilation(tmp_path / "r.nc", tmp_path / "fig.png", field=1)
    assert (tmp_path / "fig.png").stat().st_size > 10_000 and out.endswith("fig.png")
    with pytest.raises(ValueError, match="out of range"):
        plot_assimilation(tmp_path / "r.nc", tmp_path / "bad.png", field=5)
    assert not (tmp_path / "bad.png").exists()


def test_figure_shows_true_and_recovered_psi_on_one_scale_with_their_error(tmp_path):
    from lagda.assimilation.plot import assimilation_figure

    post = _posterior(retrieval=False)
    truth = _complex(np.random.default_rng(7), (2, 9))
    _write(tmp_path / "r.nc", post)
    res = read_result(tmp_path / "r.nc")
    fig = assimilation_figure(res, truth=truth, field=1, time_index=1)
    (true_im,), (mean_im,), (error_im,), (std_im,) = (ax.get_images() for ax in fig.axes[:4])
    assert true_im.get_clim() == mean_im.get_clim() == error_im.get_clim()
    psi_true = np.asarray(grid_fields(truth[1:], K1, K2, OMEGA, TIMES[1:2], N)[0])[0, 0]
    psi_mean = res.fields["psi_mean"][1, 1]
    # psi is drawn without its spatial mean (mode (0, 0), which moves no drifter)
    np.testing.assert_allclose(true_im.get_array(), psi_true - psi_true.mean(), atol=1e-12)
    np.testing.assert_allclose(error_im.get_array(), (psi_mean - psi_mean.mean()) - (psi_true - psi_true.mean()),
                               atol=1e-12)
    assert np.max(np.abs(error_im.get_array())) <= error_im.get_clim()[1]  # nothing clipped
    titles = [ax.get_title() for ax in assimilation_figure(res, truth=None, field=1).axes if ax.get_title()]
    assert titles == ["posterior mean psi and velocity", "posterior std of velocity"]  # no truth: no true, no error
    # a result with the total predictive std (the velocity the basis leaves out): the band to read is drawn
    res.fields.update({f"{c}_total_std": 2.0 * res.fields[f"{c}_std"] for c in ("u", "v")})
    std_ax = assimilation_figure(res, truth=None, field=1, time_index=1).axes[1]
    assert std_ax.get_title() == "total predictive std of velocity"
    np.testing.assert_allclose(std_ax.get_images()[0].get_array(),
                               2.0 * np.hypot(res.fields["u_std"][1, 1], res.fields["v_std"][1, 1]))


# ---------------------------------------------------------------- lagda assimilate: argument errors


def test_cli_assimilate_missing_tracks_is_one_line_exit_2(tmp_path, capsys):
    from lagda.cli import main

    code = main(["assimilate", "--tracks", str(tmp_path / "none.nc"), "--method", "enkf", "--out",
                 str(tmp_path / "r.nc")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("lagda assimilate: error: no such track file")
    assert not list(tmp_path.iterdir())


def test_cli_assimilate_bad_method_and_existing_output(tmp_path, capsys):
    from lagda.cli import main

    (tmp_path / "t.csv").write_text("id,time,x,y\n")
    code = main(["assimilate", "--tracks", str(tmp_path / "t.csv"), "--method", "magic", "--out",
                 str(tmp_path / "r.nc")])
    assert code == 2 and "invalid choice: 'magic'" in capsys.readouterr().err
    (tmp_path / "r.nc").write_text("keep me")
    code = main(["assimilate", "--tracks", str(tmp_path / "t.csv"), "--method", "enkf", "--out",
                 str(tmp_path / "r.nc")])
    err = capsys.readouterr().err
    assert code == 2 and "--overwrite" in err and err.count("\n") == 1
    assert (tmp_path / "r.nc").read_text() == "keep me"
    code = main(["assimilate", "--tracks", str(tmp_path / "t.csv"), "--model", str(tmp_path / "norun"), "--out",
                 str(tmp_path / "s.nc")])
    assert code == 2 and "no such model run directory" in capsys.readouterr().err


def test_cli_assimilate_help_names_the_default_model(capsys):
    from lagda.cli import main

    assert main(["assimilate", "--method", "hybrid", "--help"]) == 0
    out = capsys.readouterr().out
    assert "lagda/shipped/learned/" in out and "--members" in out and "--n-grid" in out and "--noise-std" in out
    assert "--bank-size" in out and "--refine" in out and "--hybrid-refine" not in out  # old names: accepted, not shown


def test_previous_option_names_are_accepted_with_a_deprecation_note():
    from lagda.assimilation.methods.registry import make_method
    from lagda.cli import _given_method_options, build_parser

    args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--method", "hybrid",
                                      "--hybrid-refine", "none", "--members", "8"])
    options = _given_method_options(args)
    assert options == {"hybrid_refine": "none", "members": 8}
    hybrid = make_method("hybrid", options, encoder=object())
    assert hybrid.config.refine == "none" and hybrid.config.members == 8
    assert hybrid.notes == ("option hybrid_refine is deprecated (removed in the next release): use refine",)
    var = make_method("var", {"var_iterations": 3, "var_sigma_floor": 1e-5})
    assert var.config.iterations == 3 and var.config.sigma_floor == 1e-5 and len(var.notes) == 2
    with pytest.raises(ValueError, match="option fd_lag does not apply to method var"):
        make_method("var", {"fd_lag": 2})
    args = build_parser().parse_args(["assimilate", "--tracks", "t.nc", "--out", "r.nc", "--method", "var",
                                      "--top-k", "3"])
    with pytest.raises(ValueError, match="--top-k does not apply to --method var"):
        _given_method_options(args)


def test_cli_assimilate_method_options_are_validated(tmp_path, capsys):
    from lagda.cli import main

    (tmp_path / "t.csv").write_text("id,time,x,y\n" + "".join(f"a,{0.01 * k},{0.1 + 0.01 * k},0.5\n" for k in range(5)))
    for flag, value, message in (("--noise-std", "-1", "noise_std must be >= 0"),
                                 ("--bank-size", "0", "bank_size must be in"), ("--top-k", "0", "top_k must be in")):
        code = main(["assimilate", "--tracks", str(tmp_path / "t.csv"), flag, value, "--out", str(tmp_path / "r.nc")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_cli_assimilate_learned_method_defaults_to_the_shipped_model(tmp_path, capsys):
    import netCDF4

    from lagda.cli import main
    from lagda.examples import shipped
    from lagda.learning.model import run_identity

    code = main(["assimilate", "--tracks", str(shipped("example_tracks.nc")), "--method", "retrieve", "--bank-size",
                 "2000",
                 "--top-k", "4", "--n-grid", "4", "--out", str(tmp_path / "r.nc")])
    assert code == 0 and "wrote" in capsys.readouterr().out
    with netCDF4.Dataset(tmp_path / "r.nc") as nc:  # the run is recorded by name and content hash
        assert nc.model_run == run_identity(shipped("learned")) and nc.dimensions["rank"].size == 4


def test_result_times_daily_for_physical_tracks_a_count_or_a_step():
    from lagda.assimilation.fields import MAX_TIMES, result_times
    from lagda.io.physical import Mapping

    day = 86400.0
    times = np.tile(np.arange(1, 24 * 60 + 1) * 3600.0 / (600 * day), (2, 1))  # hourly over 60 days, T = 600 days
    tracks = Tracks(np.zeros((2, times.shape[1], 2)), times, np.zeros(2, np.int64), np.arange(2),
                    mapping=Mapping((0.0, 1e6, 0.0, 1e6), "projected", 0.0, 600 * day))
    daily, note = result_times(tracks)
    np.testing.assert_allclose(daily * 600, np.arange(61))  # days 0..60: whole days from the window's start
    assert note.startswith("grid times daily")
    six_hourly, _ = result_times(tracks, "6h")
    np.testing.assert_allclose(np.diff(six_hourly) * 600 * day, 6 * 3600.0)
    assert len(six_hourly) == 241  # a step asked for may give more than the default cap
    with pytest.raises(ValueError, match="choose a longer step"):
        result_times(tracks, "1min")
    assert len(result_times(tracks, "12")[0]) == 12 and result_times(tracks, 5)[0][-1] == times.max()
    long = dataclasses.replace(tracks, times=times * 4)  # a 240-day window: every 2 days, at most MAX_TIMES
    assert len(result_times(long)[0]) <= MAX_TIMES and "every 2 days" in result_times(long)[1]
    model = dataclasses.replace(tracks, mapping=None)
    assert len(result_times(model)[0]) == 11
    for bad in ("6x", "1", "0h"):
        with pytest.raises(ValueError):
            result_times(tracks if bad != "1" else model, bad)
    with pytest.raises(ValueError, match="physical tracks"):
        result_times(model, "6h")
