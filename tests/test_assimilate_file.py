"""`assimilate_file`'s contract in Python: its options in one AssimilateSettings, the method's settings in one config
object, checked when the settings are made (before any track file is read); each refusal one ValueError line."""

import dataclasses
import types

import pytest

from lagda.arguments import on_command_line
from lagda.assimilation.assimilate import AssimilationSummary, assimilate_file
from lagda.assimilation.methods.config import HybridConfig, LinearConfig, VarConfig
from lagda.assimilation.methods.registry import METHODS, method_config
from lagda.assimilation.settings import AssimilateSettings


def test_another_method_s_config_is_refused_when_the_settings_are_made():
    with pytest.raises(ValueError, match="^method var takes a VarConfig, got a LinearConfig$"):
        AssimilateSettings("var", LinearConfig())
    with pytest.raises(ValueError, match="^method linear takes a LinearConfig, got a HybridConfig$"):
        AssimilateSettings("linear", HybridConfig())  # a subclass is another method's
    with pytest.raises(ValueError, match="option top_k does not apply to method linear"):
        AssimilateSettings("linear", {"top_k": 3})
    AssimilateSettings(config={"top_k": 3})  # no method yet: checked once the tracks have chosen it


def test_the_settings_name_the_value_refused_as_the_user_gave_it():
    with pytest.raises(ValueError, match=r"^n_grid=1: must be at least 2$"):
        AssimilateSettings(n_grid=1)
    with on_command_line("assimilate"), pytest.raises(ValueError, match=r"^--n-grid 1: must be at least 2$"):
        AssimilateSettings(n_grid=1)


def test_the_settings_are_frozen_and_default_to_the_command_s_defaults():
    settings = AssimilateSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.n_grid = 8
    assert (settings.method, settings.n_grid, settings.seed, settings.k_max, settings.degree) == (None, 32, 0, 12, 3)
    assert settings.low_pass and settings.local_gp and not settings.keep_undrogued


def test_a_config_and_its_dict_give_the_same_settings():
    assert method_config("var", {"iterations": 7})[0] == VarConfig(iterations=7)
    assert method_config("var", VarConfig(iterations=7)) == (VarConfig(iterations=7), [])
    config, notes = method_config("var", {"var_iterations": 7})  # a deprecated name: the same field, a note
    assert config == VarConfig(iterations=7) and notes == ["option var_iterations is deprecated (removed in the next "
                                                           "release): use iterations"]


def test_an_existing_output_is_refused_in_one_line(tmp_path):
    out = tmp_path / "r.nc"
    out.write_bytes(b"kept")
    with pytest.raises(ValueError, match=r"exists; pass overwrite=True to replace it$"):
        assimilate_file(tmp_path / "missing.nc", out, AssimilateSettings("linear"))
    assert out.read_bytes() == b"kept"


def test_a_method_without_a_chosen_basis_refuses_a_model_with_one():
    """Method.__call__ checks what assimilate_file checks early: the same line."""
    model = types.SimpleNamespace(time=object())  # a chosen basis: the model has a time basis
    with pytest.raises(ValueError, match="^embed compares tracks with a trained model's flows, which have no time "
                                         "basis: use linear, var, enkf or sample with a chosen basis$"):
        METHODS["embed"](object())(None, model)
    METHODS["linear"].check_basis(True)  # linear works in a chosen basis: no error


def test_the_summary_is_typed():
    names = [field.name for field in dataclasses.fields(AssimilationSummary)]
    assert names == ["method", "fields", "seconds", "notes", "warnings", "diagnostics", "scores", "projection_note"]
    summary = AssimilationSummary("linear", 2, 1.5, ("a note",), (), "linear: ...")
    assert summary.scores == {} and summary.projection_note is None
    with pytest.raises(TypeError):
        summary["fields"]  # no dict access: the fields are attributes


def test_a_field_s_outliers_and_zero_guard_become_notes():
    from lagda.assimilation.assimilate import method_notes

    one = types.SimpleNamespace(n_field=1, info=({"velocity_outliers_note": "8 of 1280 left out", "cv_ratio": 0.1},))
    assert method_notes("linear", one) == ("linear: 8 of 1280 left out",)
    two = types.SimpleNamespace(n_field=2, info=({"zero_guard_note": "zero"},
                                                 {"velocity_outliers_note": "2 left out", "zero_guard_note": "zero"}))
    assert method_notes("linear", two) == ("linear: field 0: zero", "linear: field 1: 2 left out",
                                           "linear: field 1: zero")
    assert method_notes("linear", types.SimpleNamespace(n_field=1, info=({"cv_ratio": 0.5},))) == ()
