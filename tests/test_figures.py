"""The figures of `lagda assimilate --plot` (and what they share with `lagda map --plot`): the day shown
(`--plot-day`, default the middle of the window), an arrow scale key in m/s, a dated title, colour bars with
quantity and unit, land drawn; a bad `--plot-day` is one error line, exit 2, and nothing written.

The map's own figure is checked on the demo's map in tests/test_demo.py."""

import numpy as np
import pytest
from matplotlib.quiver import QuiverKey

from lagda import examples
from lagda.assimilation import plot as plot_module
from lagda.assimilation.fields import posterior_result
from lagda.assimilation.model import flow_model
from lagda.assimilation.plot import day_index, key_speed, plot_assimilation, plot_time_index
from lagda.assimilation.posterior import Posterior
from lagda.cli import main
from lagda.io.formats import read_tracks
from lagda.io.physical import Mapping, box_of_size, parse_time
from simulate.flow import rectangular_modes

DAYS = np.arange("2025-03-01", "2025-03-31", dtype="datetime64[D]").astype("datetime64[s]")


@pytest.mark.parametrize("speeds, key", [
    pytest.param([0.01, 0.03, 0.08, 0.12], 0.1, id="tenths of m/s"),
    pytest.param([0.3, 0.4, 0.45], 0.2, id="a two"),
    pytest.param([2.0, 6.0, 7.0], 5.0, id="a five"),
    pytest.param([np.nan, 0.0], 1.0, id="no speed: 1"),
])
def test_key_speed_is_a_round_speed_at_most_the_long_arrows(speeds, key):
    assert key_speed(np.array(speeds)) == pytest.approx(key)


def test_day_index_is_the_nearest_day_and_refuses_days_outside_in_one_line():
    assert day_index(DAYS, "2025-03-15T10:00") == 14 and day_index(DAYS, "2025-03-30T11:00") == 29
    for day, words in (("2025-04-01", "outside the map's days, 2025-03-01 to 2025-03-30"),
                       ("March 5", "not a date")):
        with pytest.raises(ValueError, match=words) as info:
            day_index(DAYS, day, "the map")
        assert str(info.value).startswith(f"plot_day={day!r}: ") and "\n" not in str(info.value)  # from Python


def test_plot_time_index_defaults_to_the_middle_and_needs_dates():
    mapping = Mapping(box_of_size((-40.0, 34.0), (1e6, 1e6), "lonlat"), "lonlat", parse_time("2025-03-01"), 86400.0)
    model_times = np.arange(30.0)  # daily from 2025-03-01 (a day per model time unit)
    assert plot_time_index(mapping, model_times, None) == 15 == plot_time_index(None, model_times, None)
    assert plot_time_index(mapping, model_times, "2025-03-03") == 2
    with pytest.raises(ValueError, match="model units, without dates"):
        plot_time_index(None, model_times, "2025-03-03")


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    """(folder, the figure drawn) of `plot_assimilation(..., day="2025-03-10")` of a result on the shipped gdp_like
    drifters (lon/lat, March 2025): a made-up posterior in a 3 x 3 Fourier basis (the figure, not a method, is
    under test; a method's compilation would cost a minute)."""
    folder, drawn = tmp_path_factory.mktemp("plot_day"), []
    tracks = read_tracks(examples.path("gdp_like"))
    k1, k2 = rectangular_modes((-1, 1), (-1, 1))
    rng = np.random.default_rng(0)
    posterior = Posterior(1e-2 * (rng.normal(size=(1, 4, 9)) + 1j * rng.normal(size=(1, 4, 9))),
                          np.full((1, 4), 0.25), "linear", seconds=np.array([0.1]))
    model_times = np.linspace(np.nanmin(tracks.times), np.nanmax(tracks.times), 30)
    result = posterior_result(posterior, flow_model(k1, k2, np.zeros(9), np.ones(9), 1e-4), model_times, 16, tracks)

    def keep(*args, **kwargs):
        drawn.append(figure(*args, **kwargs))
        return drawn[-1]

    figure = plot_module.assimilation_figure
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plot_module, "assimilation_figure", keep)
        plot_assimilation(result, folder / "fig.png", tracks, day="2025-03-10")
    (fig,) = drawn
    return folder, fig


def test_assimilate_plot_day_draws_that_day_with_a_key_units_and_land(plotted):
    folder, fig = plotted
    assert (folder / "fig.png").stat().st_size > 20_000
    title = fig._suptitle.get_text()
    assert title.startswith("lagda assimilation (linear), 2025-03-10 ")
    assert "2025-03-10" in title and title.endswith("UTC") and "field" not in title  # one field: not named
    mean, std = fig.axes[:2]
    (key,) = [artist for artist in mean.artists if isinstance(artist, QuiverKey)]
    assert key.text.get_text().endswith(" m/s") and 0.0 < key.U < 1.0
    colour_bars = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert colour_bars == [r"$\psi$ - spatial mean (m$^2$/s)", "std of velocity (m/s)"]
    assert all(len(ax.get_images()) == 2 for ax in (mean, std))  # the field and the land over it
    assert mean.get_xlabel() == "longitude (degrees east)"


@pytest.mark.parametrize("extra, words", [
    pytest.param(["--plot", "FIG", "--plot-day", "March 5"], "--plot-day March 5: not a date", id="not a date"),
    pytest.param(["--plot", "FIG", "--plot-day", "2030-01-01"], "--plot-day 2030-01-01: outside the result's days",
                 id="outside the window"),
    pytest.param(["--plot-day", "2025-03-10"], "--plot-day 2025-03-10 needs --plot", id="without --plot"),
])
def test_a_bad_plot_day_is_one_line_exit_2_and_nothing_written(extra, words, tmp_path, capsys):
    argv = ["assimilate", "--tracks", str(examples.path("gdp_like")), "--out", str(tmp_path / "r.nc"),
            *[str(tmp_path / "fig.png") if word == "FIG" else word for word in extra]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"lagda assimilate: error: {words}"), err
    assert not list(tmp_path.iterdir())


def test_a_plot_day_of_model_unit_tracks_is_refused(tmp_path, capsys):
    assert main(["assimilate", "--method", "linear", "--tracks", str(examples.path("example_tracks")), "--out",
                 str(tmp_path / "r.nc"), "--plot", str(tmp_path / "fig.png"), "--plot-day", "2025-03-10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "these tracks are in model units, without dates" in err
    assert not list(tmp_path.iterdir())
