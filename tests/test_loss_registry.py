"""lagda.learning.loss_registry: the losses by name are the ones a TrainConfig and `lagda train --loss` accept, and
their flags are the settings' and the model's."""
from typing import get_args

import pytest

from lagda.cli import build_parser
from lagda.learning.config import STATEFUL_LOSSES, LossKind, tiny
from lagda.learning.loss_registry import LOSSES, PerPairState


def test_the_registry_names_the_losses_a_config_accepts():
    assert tuple(LOSSES) == get_args(LossKind)
    assert all(loss.name == name for name, loss in LOSSES.items())
    for name in LOSSES:
        assert tiny(loss=name, learn_tau=False).loss == name


def test_the_stateful_losses_are_the_ones_the_settings_restrict():
    stateful = tuple(name for name, loss in LOSSES.items() if loss.stateful)
    assert stateful == STATEFUL_LOSSES
    assert all(isinstance(LOSSES[name], PerPairState) for name in stateful)
    assert [name for name, loss in LOSSES.items() if loss.set_kernel] == ["kernel_set"]


def test_an_unknown_loss_is_refused_in_one_line_naming_the_known_ones():
    with pytest.raises(ValueError) as refused:
        tiny(loss="triplet")
    assert str(refused.value) == f"loss must be one of {tuple(LOSSES)}, got 'triplet'"


def test_lagda_train_offers_the_registry_losses(capsys):
    for name in LOSSES:
        assert build_parser().parse_args(["train", "--train", "t.nc", "--run-dir", "r", "--loss", name]).loss == name
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["train", "--train", "t.nc", "--run-dir", "r", "--loss", "triplet"])
    assert exited.value.code == 2
    assert "argument --loss: invalid choice: 'triplet'" in capsys.readouterr().err
