"""ResNet-18/34 up to `layer4` in plain torch: ACT's backbone and Diffusion Policy's image encoder trunk.

Weights load by the checkpoint's own names. ACT keeps torchvision's (``names="torchvision"``:
`conv1.weight`, `bn1.running_var`, `layer2.0.downsample.0.weight`, ...). Diffusion keeps torchvision's
children up to `layer4` in an `nn.Sequential`, so its weights are named by position
(``names="sequential"``: `0` = conv1, `1` = bn1, `4`..`7` = layer1..layer4, `5.0.downsample.1.weight`).
Batch norm (frozen in ACT, in eval mode in Diffusion) is an affine map (scale = w / sqrt(var + 1e-5),
shift = b - mean * scale), folded into the preceding convolution at load time: one conv with bias
instead of a conv and an elementwise pass. With ``group_norm`` (LeRobot's default for Diffusion) every
batch norm is a GroupNorm with `channels // 16` groups (weight and bias only), applied after the conv.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import winograd

NORM_EPS = 1e-5  # torchvision.ops.FrozenBatchNorm2d, nn.BatchNorm2d and nn.GroupNorm default
BLOCKS_PER_LAYER = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}
FEATURE_CHANNELS = 512
_BN_KEYS = ("weight", "bias", "running_mean", "running_var")
_GN_KEYS = ("weight", "bias")


class ConvNorm(nn.Module):
    """Bias-free conv + norm: batch norm folded into the conv, or GroupNorm applied after it."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, padding: int, group_norm: bool):
        super().__init__()
        self.stride, self.padding, self.group_norm = stride, padding, group_norm
        self.groups = out_ch // 16
        self.weight = nn.Parameter(torch.zeros(out_ch, in_ch, kernel, kernel), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(out_ch), requires_grad=False)  # folded BN shift
        if group_norm:
            self.norm_weight = nn.Parameter(torch.ones(out_ch), requires_grad=False)
            self.norm_bias = nn.Parameter(torch.zeros(out_ch), requires_grad=False)
        # Winograd F(2x2, 3x3) weights where that beats the direct convolution (see runtime.winograd)
        self.winograd_ok = not group_norm and winograd.worthwhile(in_ch, kernel, stride, padding)
        self.use_winograd = False
        self.register_buffer("winograd_u", None, persistent=False)

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
        self.winograd_u = winograd.transform_weight(self.weight.detach()) if self.winograd_ok else None

    def forward(self, x: Tensor) -> Tensor:
        if self.group_norm:
            x = F.conv2d(x, self.weight, None, self.stride, self.padding)
            return F.group_norm(x, self.groups, self.norm_weight, self.norm_bias, NORM_EPS)
        if self.use_winograd and self.winograd_u is not None:
            return winograd.conv3x3(x, self.winograd_u, self.bias)
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class Block(nn.Module):
    """ResNet basic block: two 3x3 conv-norms and an identity (or 1x1 conv-norm) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, group_norm: bool):
        super().__init__()
        self.conv1 = ConvNorm(in_ch, out_ch, 3, stride, 1, group_norm)
        self.conv2 = ConvNorm(out_ch, out_ch, 3, 1, 1, group_norm)
        self.downsample = (
            ConvNorm(in_ch, out_ch, 1, stride, 0, group_norm) if stride != 1 or in_ch != out_ch else None
        )

    def parts(self, prefix: str) -> list[tuple[ConvNorm, str, str]]:
        out = [
            (self.conv1, f"{prefix}.conv1", f"{prefix}.bn1"),
            (self.conv2, f"{prefix}.conv2", f"{prefix}.bn2"),
        ]
        if self.downsample is not None:
            out.append((self.downsample, f"{prefix}.downsample.0", f"{prefix}.downsample.1"))
        return out

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.conv1(x), inplace=True)
        out = self.conv2(out)
        out += identity
        return F.relu(out, inplace=True)


class ResNetTrunk(nn.Module):
    """ResNet up to `layer4`: (B, 3, H, W) -> (B, 512, ~H/32, ~W/32)."""

    def __init__(self, variant: str = "resnet18", group_norm: bool = False, names: str = "torchvision"):
        super().__init__()
        if variant not in BLOCKS_PER_LAYER:
            raise ValueError(
                f"vision_backbone {variant!r} is not implemented natively (supported: {sorted(BLOCKS_PER_LAYER)})"
            )
        self.names = names
        self.stem = ConvNorm(3, 64, 7, 2, 3, group_norm)
        layers, in_ch = [], 64
        for i, n_blocks in enumerate(BLOCKS_PER_LAYER[variant]):
            out_ch = 64 * 2**i
            blocks = [Block(in_ch, out_ch, 1 if i == 0 else 2, group_norm)]
            blocks += [Block(out_ch, out_ch, 1, group_norm) for _ in range(n_blocks - 1)]
            layers.append(nn.Sequential(*blocks))
            in_ch = out_ch
        self.layers = nn.ModuleList(layers)

    def _parts(self, prefix: str) -> list[tuple[ConvNorm, str, str]]:
        torchvision = self.names == "torchvision"
        stem = ("conv1", "bn1") if torchvision else ("0", "1")
        parts = [(self.stem, prefix + stem[0], prefix + stem[1])]
        for li, layer in enumerate(self.layers):
            name = f"layer{li + 1}" if torchvision else str(4 + li)
            for bi, block in enumerate(layer):
                parts += block.parts(f"{prefix}{name}.{bi}")
        return parts

    def required_keys(self, prefix: str) -> list[str]:
        return [k for module, conv, norm in self._parts(prefix) for k in module.keys(conv, norm)]

    @torch.no_grad()
    def load(self, state: Mapping[str, Tensor], prefix: str) -> None:
        for module, conv, norm in self._parts(prefix):
            module.load(state, conv, norm)

    def set_winograd(self, enabled: bool) -> int:
        """Run the 3x3 stride-1 convs where it pays (>= 128 channels) as Winograd F(2x2, 3x3);
        returns how many convs do."""
        n = 0
        for m in self.modules():
            if isinstance(m, ConvNorm):
                m.use_winograd = enabled and m.winograd_u is not None
                n += m.use_winograd
        return n

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.stem(x), inplace=True), kernel_size=3, stride=2, padding=1)
        for layer in self.layers:
            x = layer(x)
        return x
