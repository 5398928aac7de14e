"""Dataset generation: chunk-size independence, one compile, resume, --like, the forward model."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from lagda.testing import count_compiles
from simulate import generate, schema
from simulate.config import small
from simulate.tracks import simulate_tracks

# K = 9 modes, 200 RK4 steps of dt 1e-4, 10 fields
CONFIG = small(n_samples=10, k1_min=-1, k1_max=1, k2_min=-1, k2_max=1, t_final=0.02, chunk_size=3, seed=5)
ARRAYS = ("coef_re", "coef_im", "x0", "y0", "x", "y", "omega", "k1", "k2", "time", "prior_scale")


def read(path):
    with schema.open_dataset(path, load=True) as ds:
        return ds


def assert_same_data(a, b):
    """Data and settings identical (history and chunk_size may differ)."""
    for name in ARRAYS:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
        assert a[name].dtype == b[name].dtype, name


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = generate.generate_dataset(CONFIG, tmp_path_factory.mktemp("ref") / "ref.nc")
    return read(path)


def test_returns_path_of_a_valid_file(reference, tmp_path):
    assert schema.config_from_attrs(reference) == CONFIG
    assert reference["x"].dtype == np.float32
    assert reference.sizes == {"sample": 10, "drifter": 1, "obs": 200, "mode": 9}
    assert not list(tmp_path.iterdir())


def test_tracks_are_the_forward_model_of_the_stored_coefficients(reference):
    """Each stored track is simulate_tracks of the stored c from the stored release point."""
    ds = reference
    coef = jnp.asarray(ds["coef_re"].values + 1j * ds["coef_im"].values, jnp.complex64)
    release = jnp.asarray(np.stack([ds["x0"].values, ds["y0"].values], -1), jnp.float32)
    positions = simulate_tracks(coef, release, jnp.asarray(ds["k1"].values), jnp.asarray(ds["k2"].values),
                                jnp.asarray(ds["omega"].values, jnp.float32), CONFIG.dt, CONFIG.n_obs, 1)
    np.testing.assert_allclose(ds["x"].values, positions[..., 0], atol=1e-6)
    np.testing.assert_allclose(ds["y"].values, positions[..., 1], atol=1e-6)
    assert np.all(ds["x0"].values == 0.75)


VARIANTS = {"float32": {}, "float64": {"precision": "float64"},
            "noisy-random-release": {"diffusivity": 0.01, "obs_noise": 0.001, "release": "random", "n_drifters": 3}}


@pytest.fixture(scope="module")
def chunk3(tmp_path_factory, reference):
    """Files of each variant made with chunk size 3 (the float32 one is the reference)."""
    files, traces = {"float32": reference}, {}
    for name in ("float64", "noisy-random-release"):
        path = tmp_path_factory.mktemp(name) / "a.nc"
        with count_compiles("draws") as compiled:
            files[name] = read(generate.generate_dataset(dataclasses.replace(CONFIG, **VARIANTS[name]), path))
        traces[name] = compiled["count"]
    return files, traces


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_same_seed_same_file_whatever_the_chunk_size(variant, chunk3, tmp_path):
    config = dataclasses.replace(CONFIG, chunk_size=5, **VARIANTS[variant])
    b = read(generate.generate_dataset(config, tmp_path / "b.nc"))
    assert_same_data(chunk3[0][variant], b)
    assert b["x"].dtype == np.dtype(config.precision)


def test_chunks_and_shards_of_sizes_that_split_the_vector_loops_give_the_same_file(tmp_path):
    """300 fields in chunks of 150 or in two shards against one chunk of 300: compiled for those batch sizes, 8 of
    the 300 tracks differed in their last bit; every chunk is now compiled for a multiple of generate.PAD fields."""
    from simulate import small

    config = small(n_samples=300, seed=5)
    whole = read(generate.generate_dataset(config, tmp_path / "whole.nc"))
    halves = read(generate.generate_dataset(dataclasses.replace(config, chunk_size=150), tmp_path / "halves.nc"))
    assert_same_data(whole, halves)
    shards = [generate.generate_dataset(config, tmp_path / f"s{i}.nc", shard=(i, 2)) for i in range(2)]
    joined = xr.concat([read(p) for p in shards], dim="sample")
    for name in ("x", "y"):
        np.testing.assert_array_equal(joined[name].values, whole[name].values)


def test_float64_shares_the_draws_of_float32(chunk3):
    a, b = chunk3[0]["float32"], chunk3[0]["float64"]
    np.testing.assert_array_equal(b["coef_re"].values, a["coef_re"].values)
    np.testing.assert_allclose(b["x"].values, a["x"].values, atol=1e-4)


def test_one_compilation_for_a_multi_chunk_run(chunk3):
    """Chunks of 3, 3, 3 and 1 (padded to 3), with static settings no other test uses."""
    assert chunk3[1]["noisy-random-release"] == 1


def test_observation_noise_is_added_after_integration(reference, tmp_path):
    noisy = read(generate.generate_dataset(dataclasses.replace(CONFIG, obs_noise=0.01), tmp_path / "n.nc"))
    np.testing.assert_array_equal(noisy["coef_re"].values, reference["coef_re"].values)
    error = np.concatenate([(noisy[v] - reference[v]).values.ravel() for v in ("x", "y")])
    assert abs(np.std(error) / 0.01 - 1) < 0.1  # 4000 draws: std estimate good to ~2%
    assert abs(np.mean(error)) < 0.001


def test_random_release_is_uniform_on_the_torus(chunk3):
    ds = chunk3[0]["noisy-random-release"]
    x0, y0 = ds["x0"].values, ds["y0"].values
    assert x0.shape == (10, 3) and len(np.unique(x0)) == 30
    assert np.all((0 <= x0) & (x0 < 1) & (0 <= y0) & (y0 < 1))
    np.testing.assert_allclose(ds["x"].values[..., 0], x0, atol=0.02)  # first obs one step after release


def test_resume_after_interruption_gives_the_uninterrupted_file(reference, tmp_path):
    out = tmp_path / "r.nc"

    def interrupt_after_first_chunk(done, total):
        if done >= CONFIG.chunk_size:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate.generate_dataset(CONFIG, out, progress=interrupt_after_first_chunk)
    partial = generate.partial_dir(out)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["r.nc.partial"]
    assert sorted(p.name for p in partial.iterdir()) == ["chunk_000000.npz", "manifest.json"]
    with pytest.raises(ValueError, match="pass --resume to continue it or --overwrite"):
        generate.generate_dataset(CONFIG, out)
    with pytest.raises(ValueError, match=r"cannot resume: .*different settings \(seed\)"):
        generate.generate_dataset(dataclasses.replace(CONFIG, seed=6), out, resume=True)
    calls = []
    generate.generate_dataset(CONFIG, out, resume=True, progress=lambda d, t: calls.append(d))
    assert calls == [3, 6, 9, 10]  # resumed after the first chunk
    assert_same_data(read(out), reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]


def test_no_output_left_after_a_failed_write(monkeypatch, tmp_path):
    def failing_write(self, store, **kwargs):
        raise OSError("disk full")  # the temporary file is open and holds the header

    monkeypatch.setattr(xr.Dataset, "dump_to_store", failing_write)
    with pytest.raises(OSError, match="disk full"):
        generate.generate_dataset(CONFIG, tmp_path / "f.nc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.nc.partial"]  # kept for --resume


def test_existing_output_and_unwritable_path_fail_before_computing(reference, tmp_path):
    def no_progress(done, total):
        raise AssertionError("computing started")

    existing = tmp_path / "e.nc"
    existing.write_bytes(b"keep me")
    with pytest.raises(ValueError, match="already exists: pass --overwrite"):
        generate.generate_dataset(CONFIG, existing, progress=no_progress)
    assert existing.read_bytes() == b"keep me"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    for out in (tmp_path / "missing" / "a.nc", not_a_dir / "a.nc"):
        with pytest.raises(ValueError, match="cannot write"):
            generate.generate_dataset(CONFIG, out, progress=no_progress)


def test_fixed_frequency_seed_shares_omega_across_seeds(reference, tmp_path):
    other = read(generate.generate_dataset(dataclasses.replace(CONFIG, seed=99), tmp_path / "o.nc"))
    np.testing.assert_array_equal(other["omega"].values, reference["omega"].values)
    assert not np.array_equal(other["coef_re"].values, reference["coef_re"].values)
    shifted = generate.dataset_modes(dataclasses.replace(CONFIG, frequency_seed=1))[2]
    assert not np.array_equal(shifted, reference["omega"].values)


def test_like_copies_modes_and_frequencies(reference, tmp_path):
    edited = reference.assign(omega=reference["omega"] + 1.0)  # frequencies no seed would draw
    like = tmp_path / "like.nc"
    edited.to_netcdf(like, encoding=schema.encoding(edited))
    out = read(generate.generate_dataset(dataclasses.replace(CONFIG, seed=1), tmp_path / "o.nc", like=like))
    np.testing.assert_array_equal(out["omega"].values, edited["omega"].values)
    np.testing.assert_array_equal(out["prior_scale"].values, reference["prior_scale"].values)
    with pytest.raises(ValueError, match="k1_min = -2 conflicts with k1_min = -1 of the --like file"):
        generate.generate_dataset(dataclasses.replace(CONFIG, k1_min=-2), tmp_path / "c.nc", like=like)


def test_wander_statistics_on_hand_made_tracks(reference):
    ds = reference.copy(deep=True)
    ds["x"][:] = 0.75
    ds["y"][:] = 0.75
    ds["x"][:5, 0, -1] = 1.05  # five of ten tracks end 0.3 away, outside the unit square
    stats = generate.wander_statistics(ds)
    assert stats["fraction_leaving"] == 0.5
    assert stats["median_displacement"] == pytest.approx(0.15, abs=1e-6)


def test_wrapped_segments_break_where_the_track_wraps():
    from simulate.plot import wrapped_segments

    x = np.array([0.8, 0.95, 1.05, 1.2, 0.9])
    y = np.array([0.5, 0.2, -0.1, -0.2, -0.3])
    pieces = wrapped_segments(x, y)
    assert [len(px) for px, _ in pieces] == [2, 2, 1]  # cells (0,0), (1,-1), (0,-1)
    np.testing.assert_allclose(pieces[1][0], [0.05, 0.2])
    np.testing.assert_allclose(pieces[1][1], [0.9, 0.8])
    assert all(np.all((0 <= px) & (px < 1) & (0 <= py) & (py < 1)) for px, py in pieces)


def test_fig13_script_draws_the_samples(reference, tmp_path):
    from matplotlib.image import imread

    from experiments.learning import fig13_samples as module

    path = tmp_path / "d.nc"
    reference.to_netcdf(path, encoding=schema.encoding(reference))
    out = tmp_path / "fig.png"
    assert module.main(["--data", str(path), "--n", "2", "--out", str(out)]) == 0
    image = imread(out)
    assert image.shape[1] > 1.8 * image.shape[0]  # two panels side by side
    assert image[..., :3].std() > 0.1  # not blank


def test_shards_join_into_the_single_run_bit_for_bit(reference, tmp_path):
    """Three shards (4, 3, 3 fields; another chunk size) opened as one equal the whole run."""
    config = dataclasses.replace(CONFIG, chunk_size=2)
    paths = [generate.generate_dataset(config, tmp_path / f"s{i}.nc", shard=(i, 3)) for i in (2, 0, 1)]
    alone = read(paths[1])
    assert alone.sizes["sample"] == 3 and int(alone.attrs["lagda_sample_start"]) == 0
    np.testing.assert_array_equal(alone["x"].values, reference["x"].values[:3])
    with schema.open_dataset(paths, load=True) as joined:
        assert_same_data(joined, reference)
        assert schema.config_from_attrs(joined) == config and "lagda_shard_count" not in joined.attrs
    with pytest.raises(ValueError, match=r"missing \[1\]"):
        schema.open_dataset(paths[:2])
    other = generate.generate_dataset(dataclasses.replace(config, seed=6), tmp_path / "other.nc", shard=(1, 3))
    with pytest.raises(ValueError, match="different runs .*seed"):
        schema.open_dataset([paths[0], paths[1], other])
    with pytest.raises(ValueError, match="not a shard"):
        schema.open_dataset([paths[0], tmp_path / "s0.nc", generate.generate_dataset(CONFIG, tmp_path / "whole.nc")])
    with pytest.raises(ValueError, match="shard 3/3"):
        generate.generate_dataset(config, tmp_path / "bad.nc", shard=(3, 3))


def test_training_files_join_shards_and_merge_releases(reference, tmp_path):
    """join_files: the shards of one run (a glob) joined along samples, a random-release file's drifters merged."""
    from lagda.learning.data import join_files, load_paired

    for i in range(2):
        generate.generate_dataset(CONFIG, tmp_path / f"fixed-{i}.nc", shard=(i, 2))
    random = generate.generate_dataset(dataclasses.replace(CONFIG, release="random", n_drifters=2),
                                       tmp_path / "random.nc")
    data = join_files([str(tmp_path / "fixed-*.nc"), random])
    whole = load_paired(generate.generate_dataset(CONFIG, tmp_path / "whole.nc"))
    assert data.positions.shape == (10, 3, 200, 2)
    np.testing.assert_array_equal(data.coef, whole.coef)
    np.testing.assert_array_equal(data.positions[:, :1], whole.positions)
    np.testing.assert_array_equal(data.positions[:, 1:], load_paired(random).positions)
    from lagda.learning.data import as_paired

    shards = as_paired(str(tmp_path / "fixed-*.nc"))  # one quoted glob, as `lagda train --train 'fixed-*.nc'` passes
    np.testing.assert_array_equal(shards.positions, whole.positions)
