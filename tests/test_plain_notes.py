"""The notes `lagda assimilate` and `lagda map` print on drifter files (longitude/latitude) speak a drifter user's
words: no model units or internal names (INTERNAL), one line each of at most MAX_NOTE characters, counts in their
number ("1 tile", "2 tiles"; never "1 tiles")."""

import re

import numpy as np
import pytest

import lagda.examples
from lagda.io.clean import CleanReport
from lagda.io.lowpass import low_pass
from lagda.mapping.check import check_lines
from lagda.mapping.methods.basis import local_gp_summary
from lagda.mapping.methods.objective import objective_summary
from lagda.mapping.run import map_archive
from lagda.mapping.settings import MapSettings

# the model's units and lagda's internal names: none may reach a note on a drifter file
INTERNAL = ("OU tau", "OU ", "CV ratio", "twiced", "circular basis", "circular modes", "placement attributes",
            "local GP", "model units", "domain length", "k_max", "Legendre", "representation error", "vel noise",
            "pos noise", "ocean path", "zero guard", "flow basis", "basis field", "omega", "tile_records", "n_fixes",
            "E|c", "k0", "t = 0", "model time 0.1", "spatial modes")
MAX_NOTE = 180  # characters of a note's text (after "lagda map: note: ")
MODEL_NUMBER = re.compile(r"\d\.?\d*e[-+]\d")  # 6.9541e-05: a model-unit number (physical ones read in m/s, km, days)
ONE_PLURAL = re.compile(r"(?<![\d.,])1 (?:[a-z-]+ )?(tiles|segments|fixes|trajectories|velocities|drifters|flows|"
                        r"times|spikes|days)\b")


def plain_faults(lines, max_length: int = MAX_NOTE) -> list[str]:
    """Returns what is wrong with note lines: an internal name, a model-unit number, a line longer than
    `max_length` or of several lines, "1 tiles"; [] when they are plain."""
    faults = []
    for line in lines:
        faults += [f"{name!r} in: {line}" for name in INTERNAL if name in line]
        faults += [f"model-unit number in: {line}"] if MODEL_NUMBER.search(line) else []
        faults += [f"{len(line)} characters: {line}"] if len(line) > max_length or "\n" in line else []
        faults += [f"plural: {line}"] if ONE_PLURAL.search(line) else []
    return faults


def test_the_checker_finds_each_fault_it_looks_for():
    """The check below can fail: each kind of fault it guards against, as the notes once had them."""
    assert plain_faults(["2 tiles mapped", "flow: waves down to 40 km, of degree 0-3 in time over 29.96 days"]) == []
    for bad in ("lag 1 (order 2), velocities, OU tau 0.0134, std 1.13, CV ratio 0.803", "local GP in 1 tiles",
                "dt 6.9541e-05 guessed", "low-pass: ... twiced: inertial oscillations and tides removed", "x" * 200,
                "flow basis: the uniform current and circular modes k_max 14.4", "1 of 1 segments span less"):
        assert plain_faults([bad]), bad


def test_counts_of_one_and_two_take_their_number():
    one = [objective_summary([{"velocities": 3}]), *local_gp_summary([{"local_gp": _fitted()}]),
           *CleanReport(short_trajectories_dropped=1, short_trajectory_fixes_dropped=1, exact_duplicates_dropped=1,
                        trajectories_sorted=1, spikes_dropped=1, lone_fixes_dropped=1).notes(),
           *check_lines({"velocities": 1, "drifters": 1, "outside": 0, "no_value": 0, "error": 0.5, "rms_m_s": 0.05,
                         "speed_rms_m_s": 0.1, "coverage_95": 1.0}, 1, 2)]
    hours = np.arange(25.0) * 3600.0  # one day of hourly fixes: too short for 15.6 h and 24.84 h at 50 N
    one.append(low_pass(hours, np.linspace(0.0, 0.1, 25), np.full(25, 50.0), [0])[2])
    assert plain_faults(one) == []
    assert one[0].startswith("1 tile mapped") and "in 1 tile:" in one[1] and "1 daily velocity," in one[-2]
    assert "1 trajectory with fewer than 3 fixes dropped (1 fix)" in " ".join(one)
    assert one[-1].endswith("1 of 1 segment too short for them: a straight line")
    two = [objective_summary([{"velocities": 3}, {"velocities": 0}]),
           *local_gp_summary([{"local_gp": _fitted()}, {"local_gp": _fitted()}, {"local_gp": "too few"}])]
    assert two[0].startswith("2 tiles mapped: 1 from drifter velocities, 1 with none")
    assert "in 2 of 3 tiles:" in two[1] and "1 with too few velocities" in two[1]


def _fitted() -> dict:
    """A tile's local GP record (lagda.assimilation.local_gp.local_gp_correction's)."""
    return {"velocities": 40, "ell_km": 20.0, "tau_days": 4.0, "std_m_s": 0.02, "span_h": 6.0, "beyond_drifters": 0.0}


@pytest.mark.slow
def test_the_notes_of_both_commands_on_the_shipped_drifters_are_plain(tmp_path):
    """`lagda assimilate` and `lagda map --withhold` on the shipped GDP-like file (8 drifters, lon/lat, hourly):
    every note in physical words, the decisions a user may change named with their options."""
    from lagda.assimilation.assimilate import assimilate_file

    tracks = lagda.examples.path("gdp_like")
    summary = assimilate_file(tracks, tmp_path / "r.nc")
    assert plain_faults(summary.notes) == []
    assert plain_faults([summary.diagnostics], max_length=240) == []  # stdout's line of what the method decided
    said = " ".join(summary.notes)
    for option in ("--method", "--box", "--no-low-pass", "--k-max", "--degree", "--times", "--no-local-gp"):
        assert option in said, option
    assert "m/s" in summary.diagnostics and "days" in summary.diagnostics
    notes = []
    settings = MapSettings(period=("2025-03-05", "2025-03-09"), withhold=0.25)
    map_archive(tracks, tmp_path / "m.zarr", settings, workers=1, progress=False,
                say=lambda line: notes.append(line.removeprefix("note: ")))
    assert plain_faults(notes) == []
    assert any(line.startswith("withheld drifters (25%, 2 of 8): ") for line in notes)
    assert any(line.startswith("withheld, where the map") and "binned mean" in line for line in notes)
