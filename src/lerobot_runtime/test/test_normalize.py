import pytest
import torch

from lerobot_runtime.normalize import Normalizer


def make(mode, stats):
    return Normalizer(features={"x": "STATE"}, norm_map={"STATE": mode}, stats={"x": stats})


def test_mean_std_exact():
    n = make("MEAN_STD", {"mean": torch.tensor([1.0, -2.0]), "std": torch.tensor([2.0, 0.5])})
    x = torch.tensor([[3.0, -1.0]])
    y = n.normalize("x", x)
    torch.testing.assert_close(y, torch.tensor([[2.0 / (2.0 + 1e-8), 1.0 / (0.5 + 1e-8)]]))
    torch.testing.assert_close(n.unnormalize("x", torch.tensor([[1.0, 2.0]])), torch.tensor([[3.0, -1.0]]))


def test_min_max_maps_to_minus_one_one_and_back():
    n = make("MIN_MAX", {"min": torch.tensor([0.0, -4.0, 1.0]), "max": torch.tensor([2.0, 4.0, 1.0])})
    x = torch.tensor([0.0, 4.0, 1.0])
    y = n.normalize("x", x)
    # equal min and max: denominator becomes eps, so the value maps to -1
    torch.testing.assert_close(y, torch.tensor([-1.0, 1.0, -1.0]))
    torch.testing.assert_close(
        n.unnormalize("x", torch.tensor([0.0, 0.0, 1.0])), torch.tensor([1.0, 0.0, 1.0])
    )


def test_quantiles_use_q01_q99():
    n = make("QUANTILES", {"q01": torch.tensor([-1.0]), "q99": torch.tensor([3.0])})
    torch.testing.assert_close(n.normalize("x", torch.tensor([1.0])), torch.tensor([0.0]))
    torch.testing.assert_close(n.unnormalize("x", torch.tensor([1.0])), torch.tensor([3.0]))


def test_identity_and_missing_stats_pass_through():
    x = torch.tensor([5.0])
    assert n_identity().normalize("x", x) is x
    n = Normalizer(features={"x": "STATE"}, norm_map={"STATE": "MEAN_STD"}, stats={})
    assert n.normalize("x", x) is x


def n_identity():
    return make("IDENTITY", {"mean": torch.tensor([1.0]), "std": torch.tensor([2.0])})


def test_image_stats_broadcast_per_channel():
    n = Normalizer(
        features={"img": "VISUAL"},
        norm_map={"VISUAL": "MEAN_STD"},
        stats={"img": {"mean": torch.tensor([0.5, 0.0, 1.0]).view(3, 1, 1), "std": torch.ones(3, 1, 1)}},
    )
    y = n.normalize("img", torch.full((2, 3, 4, 5), 0.5))
    torch.testing.assert_close(y[:, 0], torch.zeros(2, 4, 5))
    torch.testing.assert_close(y[:, 2], torch.full((2, 4, 5), -0.5))


def test_unknown_mode_and_missing_stat_are_errors():
    with pytest.raises(ValueError, match="'LOG'"):
        make("LOG", {})
    with pytest.raises(ValueError, match=r"\['std'\]"):
        make("MEAN_STD", {"mean": torch.zeros(1)})
