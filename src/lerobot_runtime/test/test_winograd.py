"""Winograd F(2x2, 3x3) convolutions against torch's direct convolution, and inside the ACT backbone."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lerobot_runtime import load_policy, winograd

from .conftest import ACT_SMALL


@pytest.mark.parametrize(
    ("n", "c", "k", "h", "w", "channels_last", "bias"),
    [
        (1, 128, 128, 60, 80, True, True),  # ACT layer2 at 480x640
        (2, 256, 64, 15, 20, False, True),  # odd height: a partial last tile row
        (1, 130, 48, 7, 9, True, False),  # odd both ways, odd channel counts
        (3, 3, 5, 1, 1, False, True),  # a single pixel
    ],
)
def test_matches_direct_convolution(n, c, k, h, w, channels_last, bias):
    g = torch.Generator().manual_seed(h * w + c)
    x = torch.rand((n, c, h, w), generator=g) * 2 - 1
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    weight = torch.randn((k, c, 3, 3), generator=g) * (2.0 / (9 * c)) ** 0.5
    b = torch.randn(k, generator=g) if bias else None
    want = F.conv2d(x, weight, b, 1, 1)
    got = winograd.conv3x3(x, winograd.transform_weight(weight), b)
    assert got.shape == want.shape
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() <= 1e-5 * scale


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"\(C_out, C_in, 3, 3\)"):
        winograd.transform_weight(torch.zeros(4, 4, 5, 5))
    u = winograd.transform_weight(torch.zeros(8, 16, 3, 3))
    with pytest.raises(ValueError, match="expects 16"):
        winograd.conv3x3(torch.zeros(1, 8, 4, 4), u)


def test_only_wide_stride_one_3x3_convs_use_it():
    assert winograd.worthwhile(128, 3, 1, 1) and winograd.worthwhile(512, 3, 1, 1)
    assert not winograd.worthwhile(64, 3, 1, 1)  # layer1: too thin a GEMM to pay off
    assert not winograd.worthwhile(256, 3, 2, 1) and not winograd.worthwhile(256, 1, 1, 0)


def test_act_backbone_gives_the_same_chunk_with_and_without_winograd(act_observations):
    policy = load_policy(ACT_SMALL)
    # ResNet-18: layer2..layer4 have 3 stride-1 3x3 convs each (the first conv of each is stride 2)
    assert policy.set_winograd(True) == 9
    fast = policy.predict_action_chunk(act_observations)
    assert policy.set_winograd(False) == 0
    direct = policy.predict_action_chunk(act_observations)
    assert np.abs(fast - direct).max() <= 1e-5 * max(1.0, np.abs(direct).max())
    assert not np.array_equal(fast, direct)  # it did take the other path
