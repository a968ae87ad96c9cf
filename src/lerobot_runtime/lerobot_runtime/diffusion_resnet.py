"""ResNet-18/34 trunk of Diffusion Policy's image encoder, loading LeRobot's state-dict names.

LeRobot keeps torchvision's ResNet children up to `layer4` in an `nn.Sequential`, so the weights are
named by position: `0` = conv1, `1` = bn1, `4`..`7` = layer1..layer4 (`4.0.conv1.weight`,
`5.0.downsample.1.weight`, ...). With `use_group_norm` (LeRobot's default for diffusion) every batch
norm is replaced by a GroupNorm with `channels // 16` groups (weight and bias only); otherwise the
batch norms run in eval mode on their running statistics, which is an affine map folded into the
preceding convolution at load time.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NORM_EPS = 1e-5  # nn.BatchNorm2d and nn.GroupNorm default
BLOCKS_PER_LAYER = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}
FEATURE_CHANNELS = 512
_BN_KEYS = ("weight", "bias", "running_mean", "running_var")
_GN_KEYS = ("weight", "bias")


class ConvNorm(nn.Module):
    """Bias-free conv + norm: GroupNorm applied after the conv, or eval batch norm folded into it."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, padding: int, group_norm: bool):
        super().__init__()
        self.stride, self.padding, self.group_norm = stride, padding, group_norm
        self.groups = out_ch // 16
        self.weight = nn.Parameter(torch.zeros(out_ch, in_ch, kernel, kernel), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(out_ch), requires_grad=False)  # folded BN shift
        if group_norm:
            self.norm_weight = nn.Parameter(torch.ones(out_ch), requires_grad=False)
            self.norm_bias = nn.Parameter(torch.zeros(out_ch), requires_grad=False)

    def keys(self, conv: str, norm: str) -> list[str]:
        return [f"{conv}.weight"] + [f"{norm}.{s}" for s in (_GN_KEYS if self.group_norm else _BN_KEYS)]

    def load(self, state: Mapping[str, Tensor], conv: str, norm: str) -> None:
        for key in self.keys(conv, norm):
            if key not in state:
                raise KeyError(key)
        w = state[f"{conv}.weight"].to(torch.float32)
        if w.shape != self.weight.shape:
            raise ValueError(f"{conv}.weight has shape {tuple(w.shape)}, expected {tuple(self.weight.shape)}")
        n = self.weight.shape[0]
        for s in _GN_KEYS if self.group_norm else _BN_KEYS:
            if tuple(state[f"{norm}.{s}"].shape) != (n,):
                raise ValueError(f"{norm}.{s} has shape {tuple(state[f'{norm}.{s}'].shape)}, expected ({n},)")
        if self.group_norm:
            self.weight.copy_(w)
            self.norm_weight.copy_(state[f"{norm}.weight"])
            self.norm_bias.copy_(state[f"{norm}.bias"])
            return
        scale = state[f"{norm}.weight"] * (state[f"{norm}.running_var"] + NORM_EPS).rsqrt()
        self.weight.copy_(w * scale.reshape(-1, 1, 1, 1))
        self.bias.copy_(state[f"{norm}.bias"] - state[f"{norm}.running_mean"] * scale)

    def forward(self, x: Tensor) -> Tensor:
        if self.group_norm:
            x = F.conv2d(x, self.weight, None, self.stride, self.padding)
            return F.group_norm(x, self.groups, self.norm_weight, self.norm_bias, NORM_EPS)
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class Block(nn.Module):
    """ResNet basic block: two 3x3 conv-norms and an identity (or 1x1 conv-norm) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, group_norm: bool):
        super().__init__()
        self.conv1 = ConvNorm(in_ch, out_ch, 3, stride, 1, group_norm)
        self.conv2 = ConvNorm(out_ch, out_ch, 3, 1, 1, group_norm)
        self.shortcut = (
            ConvNorm(in_ch, out_ch, 1, stride, 0, group_norm) if stride != 1 or in_ch != out_ch else None
        )

    def parts(self, prefix: str) -> list[tuple[ConvNorm, str, str]]:
        out = [
            (self.conv1, f"{prefix}.conv1", f"{prefix}.bn1"),
            (self.conv2, f"{prefix}.conv2", f"{prefix}.bn2"),
        ]
        if self.shortcut is not None:
            out.append((self.shortcut, f"{prefix}.downsample.0", f"{prefix}.downsample.1"))
        return out

    def forward(self, x: Tensor) -> Tensor:
        skip = x if self.shortcut is None else self.shortcut(x)
        y = self.conv2(F.relu(self.conv1(x)))
        return F.relu(y + skip)


class ResNetTrunk(nn.Module):
    """ResNet up to `layer4`: (B, 3, H, W) -> (B, 512, ~H/32, ~W/32)."""

    def __init__(self, variant: str = "resnet18", group_norm: bool = True):
        super().__init__()
        if variant not in BLOCKS_PER_LAYER:
            raise ValueError(
                f"vision_backbone {variant!r} is not implemented natively (supported: {sorted(BLOCKS_PER_LAYER)})"
            )
        self.stem = ConvNorm(3, 64, 7, 2, 3, group_norm)
        stages, in_ch = [], 64
        for i, n_blocks in enumerate(BLOCKS_PER_LAYER[variant]):
            out_ch = 64 * 2**i
            blocks = [Block(in_ch, out_ch, 1 if i == 0 else 2, group_norm)]
            blocks += [Block(out_ch, out_ch, 1, group_norm) for _ in range(n_blocks - 1)]
            stages.append(nn.Sequential(*blocks))
            in_ch = out_ch
        self.stages = nn.ModuleList(stages)

    def _parts(self, prefix: str) -> list[tuple[ConvNorm, str, str]]:
        parts = [(self.stem, f"{prefix}0", f"{prefix}1")]
        for si, stage in enumerate(self.stages):
            for bi, block in enumerate(stage):
                parts += block.parts(f"{prefix}{4 + si}.{bi}")
        return parts

    def required_keys(self, prefix: str) -> list[str]:
        return [k for module, conv, norm in self._parts(prefix) for k in module.keys(conv, norm)]

    @torch.no_grad()
    def load(self, state: Mapping[str, Tensor], prefix: str) -> None:
        for module, conv, norm in self._parts(prefix):
            module.load(state, conv, norm)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.stem(x)), kernel_size=3, stride=2, padding=1)
        for stage in self.stages:
            x = stage(x)
        return x
