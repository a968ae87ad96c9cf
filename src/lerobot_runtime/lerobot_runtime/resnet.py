"""ResNet-18/34 feature extractor in plain torch, loading torchvision-named weights.

The backbone LeRobot's ACT uses is torchvision's ResNet with FrozenBatchNorm2d, cut after
`layer4`. Frozen batch norm is an affine map (scale = w / sqrt(var + 1e-5), shift = b - mean*scale),
so it is folded into the preceding convolution at load time: one conv with bias instead of a conv
and an elementwise pass. State dict names follow torchvision (`conv1.weight`, `bn1.running_var`,
`layer2.0.downsample.0.weight`, ...), so a LeRobot checkpoint loads by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import winograd

FROZEN_BN_EPS = 1e-5  # torchvision.ops.FrozenBatchNorm2d default
BLOCKS_PER_LAYER = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}
FEATURE_CHANNELS = 512


class FoldedConv(nn.Module):
    """A bias-free conv followed by frozen batch norm, folded into one conv with bias."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, padding: int):
        super().__init__()
        self.stride, self.padding = stride, padding
        self.weight = nn.Parameter(torch.zeros(out_ch, in_ch, kernel, kernel), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(out_ch), requires_grad=False)
        # Winograd F(2x2, 3x3) weights where that beats the direct convolution (see runtime.winograd)
        self.winograd_ok = winograd.worthwhile(in_ch, kernel, stride, padding)
        self.use_winograd = False
        self.register_buffer("winograd_u", None, persistent=False)

    def load_folded(self, state: Mapping[str, Tensor], conv: str, bn: str) -> None:
        w = state[f"{conv}.weight"].to(torch.float32)
        scale = state[f"{bn}.weight"] * (state[f"{bn}.running_var"] + FROZEN_BN_EPS).rsqrt()
        shift = state[f"{bn}.bias"] - state[f"{bn}.running_mean"] * scale
        if w.shape != self.weight.shape:
            raise ValueError(f"{conv}.weight has shape {tuple(w.shape)}, expected {tuple(self.weight.shape)}")
        self.weight.copy_(w * scale.reshape(-1, 1, 1, 1))
        self.bias.copy_(shift)
        self.winograd_u = winograd.transform_weight(self.weight.detach()) if self.winograd_ok else None

    def forward(self, x: Tensor) -> Tensor:
        if self.use_winograd and self.winograd_u is not None:
            return winograd.conv3x3(x, self.winograd_u, self.bias)
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = FoldedConv(in_ch, out_ch, 3, stride, 1)
        self.conv2 = FoldedConv(out_ch, out_ch, 3, 1, 1)
        self.downsample = FoldedConv(in_ch, out_ch, 1, stride, 0) if stride != 1 or in_ch != out_ch else None

    def load(self, state: Mapping[str, Tensor], prefix: str) -> None:
        self.conv1.load_folded(state, f"{prefix}.conv1", f"{prefix}.bn1")
        self.conv2.load_folded(state, f"{prefix}.conv2", f"{prefix}.bn2")
        if self.downsample is not None:
            self.downsample.load_folded(state, f"{prefix}.downsample.0", f"{prefix}.downsample.1")

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.conv1(x), inplace=True)
        out = self.conv2(out)
        out += identity
        return F.relu(out, inplace=True)


class ResNetFeatures(nn.Module):
    """ResNet trunk returning the `layer4` feature map (B, 512, H/32, W/32)."""

    def __init__(self, variant: str = "resnet18"):
        super().__init__()
        if variant not in BLOCKS_PER_LAYER:
            raise ValueError(
                f"vision backbone {variant!r} is not implemented natively (supported: {sorted(BLOCKS_PER_LAYER)})"
            )
        self.stem = FoldedConv(3, 64, 7, 2, 3)
        layers, in_ch = [], 64
        for i, n_blocks in enumerate(BLOCKS_PER_LAYER[variant]):
            out_ch = 64 * 2**i
            blocks = [BasicBlock(in_ch, out_ch, 1 if i == 0 else 2)]
            blocks += [BasicBlock(out_ch, out_ch, 1) for _ in range(n_blocks - 1)]
            layers.append(nn.Sequential(*blocks))
            in_ch = out_ch
        self.layers = nn.ModuleList(layers)

    def required_keys(self, prefix: str) -> list[str]:
        keys = [f"{prefix}conv1.weight"] + [f"{prefix}bn1.{s}" for s in _BN_STATS]
        for li, layer in enumerate(self.layers):
            for bi, block in enumerate(layer):
                p = f"{prefix}layer{li + 1}.{bi}"
                for c in ("1", "2"):
                    keys.append(f"{p}.conv{c}.weight")
                    keys += [f"{p}.bn{c}.{s}" for s in _BN_STATS]
                if block.downsample is not None:
                    keys.append(f"{p}.downsample.0.weight")
                    keys += [f"{p}.downsample.1.{s}" for s in _BN_STATS]
        return keys

    @torch.no_grad()
    def load(self, state: Mapping[str, Tensor], prefix: str) -> None:
        sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        self.stem.load_folded(sub, "conv1", "bn1")
        for li, layer in enumerate(self.layers):
            for bi, block in enumerate(layer):
                block.load(sub, f"layer{li + 1}.{bi}")

    def set_winograd(self, enabled: bool) -> int:
        """Run the 3x3 stride-1 convs where it pays (>= 128 channels) as Winograd F(2x2, 3x3);
        returns how many convs do."""
        n = 0
        for m in self.modules():
            if isinstance(m, FoldedConv):
                m.use_winograd = enabled and m.winograd_u is not None
                n += m.use_winograd
        return n

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.stem(x), inplace=True)
        x = F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        for layer in self.layers:
            x = layer(x)
        return x


_BN_STATS = ("weight", "bias", "running_mean", "running_var")
