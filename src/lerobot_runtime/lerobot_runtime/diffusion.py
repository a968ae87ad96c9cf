"""Diffusion Policy inference in plain torch, loading LeRobot's `DiffusionPolicy` weights by name.

Conditioning: for each of the `n_obs_steps` observations, the normalized state, one feature vector
per camera and the environment state (if any) are concatenated; the steps are then flattened into
one global conditioning vector. A camera's feature vector comes from its RGB encoder: optional
resize (bilinear, antialiased), center crop to `crop_shape` (eval behaviour), a ResNet trunk (GroupNorm
or batch norm, `resnet`), a 1x1 conv to `spatial_softmax_num_keypoints` maps, spatial
soft-argmax to (x, y) keypoints on a [-1, 1] grid, then a linear layer with ReLU. Cameras share one
encoder, or have one each (`use_separate_rgb_encoder_per_camera`).

Denoiser: a 1-D conditional UNet over the action horizon (channels = action dims). Residual blocks
of Conv1d-GroupNorm-Mish with FiLM from [timestep embedding, global conditioning] (scale and bias
with `use_film_scale_modulation`, bias only otherwise); stride-2 convs down, transposed convs up,
skip connections concatenated on the way up. Sampling: `diffusion_sampler` (DDPM / DDIM). The
returned actions are the horizon slice `[n_obs_steps - 1, n_obs_steps - 1 + n_action_steps)`, as
LeRobot 0.4.4's `predict_action_chunk` returns them (normalized; the caller unnormalizes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .diffusion_sampler import Sampler, SamplerConfig
from .resnet import FEATURE_CHANNELS, ResNetTrunk

OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
PREFIX = "diffusion."


def _pair(value: Any, name: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        h, w = (int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be [height, width] or null, got {value!r}") from exc
    if h <= 0 or w <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return h, w


@dataclass(frozen=True)
class DiffusionArch:
    n_obs_steps: int
    horizon: int
    n_action_steps: int
    state_dim: int
    env_state_dim: int | None
    action_dim: int
    image_keys: tuple[str, ...]
    image_shape: tuple[int, int, int] | None
    vision_backbone: str
    use_group_norm: bool
    resize_shape: tuple[int, int] | None
    crop_shape: tuple[int, int] | None
    num_keypoints: int
    separate_encoders: bool
    down_dims: tuple[int, ...]
    kernel_size: int
    n_groups: int
    step_embed_dim: int
    film_scale: bool
    sampler: SamplerConfig

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], inputs: dict, outputs: dict) -> DiffusionArch:
        image_keys = tuple(k for k, f in inputs.items() if f.type == "VISUAL")
        state = inputs.get(OBS_STATE)
        env = inputs.get(OBS_ENV_STATE)
        action = next((f for f in outputs.values() if f.type == "ACTION"), None)
        if state is None:
            raise ValueError("diffusion needs an observation.state input")
        if action is None:
            raise ValueError("diffusion config has no ACTION output feature")
        if not image_keys and env is None:
            raise ValueError("diffusion needs at least one image or observation.environment_state input")
        shapes = {inputs[k].shape for k in image_keys}
        if len(shapes) > 1:
            raise ValueError(f"all camera inputs must have the same shape, got {sorted(shapes)}")
        image_shape = next(iter(shapes)) if shapes else None
        if image_shape is not None and (len(image_shape) != 3 or image_shape[0] != 3):
            raise ValueError(f"camera inputs must be (3, H, W), got {image_shape}")
        if cfg.get("pretrained_backbone_weights") and cfg.get("use_group_norm", True):
            raise ValueError("use_group_norm with pretrained_backbone_weights is not a valid LeRobot config")
        down_dims = tuple(int(d) for d in cfg.get("down_dims", (512, 1024, 2048)))
        horizon = int(cfg.get("horizon", 16))
        n_obs = int(cfg.get("n_obs_steps", 2))
        n_act = int(cfg.get("n_action_steps", 8))
        if not down_dims:
            raise ValueError("down_dims must not be empty")
        if horizon % (2 ** len(down_dims)):
            raise ValueError(
                f"horizon {horizon} is not a multiple of 2**len(down_dims) = {2 ** len(down_dims)}"
            )
        if n_obs < 1 or not 1 <= n_act <= horizon - n_obs + 1:
            raise ValueError(
                f"need n_obs_steps >= 1 and 1 <= n_action_steps <= horizon - n_obs_steps + 1 "
                f"(got n_obs_steps {n_obs}, n_action_steps {n_act}, horizon {horizon})"
            )
        resize = _pair(cfg.get("resize_shape"), "resize_shape")
        crop = _pair(cfg.get("crop_shape"), "crop_shape")
        if image_shape is not None and crop is not None:
            h, w = resize or image_shape[1:]
            if crop[0] > h or crop[1] > w:
                raise ValueError(f"crop_shape {crop} does not fit in the {h}x{w} image")
        sampler = SamplerConfig(
            kind=str(cfg.get("noise_scheduler_type", "DDPM")),
            num_train_timesteps=int(cfg.get("num_train_timesteps", 100)),
            num_inference_steps=cfg.get("num_inference_steps"),
            beta_schedule=str(cfg.get("beta_schedule", "squaredcos_cap_v2")),
            beta_start=float(cfg.get("beta_start", 1e-4)),
            beta_end=float(cfg.get("beta_end", 0.02)),
            prediction_type=str(cfg.get("prediction_type", "epsilon")),
            clip_sample=bool(cfg.get("clip_sample", True)),
            clip_sample_range=float(cfg.get("clip_sample_range", 1.0)),
        )
        return cls(
            n_obs_steps=n_obs,
            horizon=horizon,
            n_action_steps=n_act,
            state_dim=state.shape[0],
            env_state_dim=env.shape[0] if env else None,
            action_dim=action.shape[0],
            image_keys=image_keys,
            image_shape=image_shape,
            vision_backbone=str(cfg.get("vision_backbone", "resnet18")),
            use_group_norm=bool(cfg.get("use_group_norm", True)),
            resize_shape=resize,
            crop_shape=crop,
            num_keypoints=int(cfg.get("spatial_softmax_num_keypoints", 32)),
            separate_encoders=bool(cfg.get("use_separate_rgb_encoder_per_camera", False)),
            down_dims=down_dims,
            kernel_size=int(cfg.get("kernel_size", 5)),
            n_groups=int(cfg.get("n_groups", 8)),
            step_embed_dim=int(cfg.get("diffusion_step_embed_dim", 128)),
            film_scale=bool(cfg.get("use_film_scale_modulation", True)),
            sampler=sampler,
        )


# ---------------------------------------------------------------------------- image encoder
class SpatialSoftArgmax(nn.Module):
    """1x1 conv to K maps, softmax over each map, expected (x, y) on a [-1, 1] grid -> (B, K, 2)."""

    def __init__(self, num_keypoints: int):
        super().__init__()
        self.nets = nn.Conv2d(FEATURE_CHANNELS, num_keypoints, kernel_size=1)
        self._grids: dict[tuple[int, int, str], Tensor] = {}

    def grid(self, h: int, w: int, device) -> Tensor:
        key = (h, w, str(device))
        if key not in self._grids:
            # float64 linspace then float32, as LeRobot builds it with numpy
            xs, ys = np.meshgrid(np.linspace(-1.0, 1.0, w), np.linspace(-1.0, 1.0, h))
            grid = np.stack([xs.reshape(-1), ys.reshape(-1)], axis=1)
            self._grids[key] = torch.from_numpy(grid).to(torch.float32).to(device)
        return self._grids[key]

    def forward(self, fmap: Tensor) -> Tensor:
        maps = self.nets(fmap)
        b, k, h, w = maps.shape
        weights = F.softmax(maps.reshape(b * k, h * w), dim=-1)
        return (weights @ self.grid(h, w, maps.device)).view(b, k, 2)


def center_crop(x: Tensor, size: tuple[int, int]) -> Tensor:
    """Center crop of (..., H, W), offsets rounded like torchvision (round half to even)."""
    h, w = x.shape[-2:]
    ch, cw = size
    top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
    return x[..., top : top + ch, left : left + cw]


class RgbEncoder(nn.Module):
    def __init__(self, a: DiffusionArch):
        super().__init__()
        self.resize_shape, self.crop_shape = a.resize_shape, a.crop_shape
        self.backbone = ResNetTrunk(a.vision_backbone, group_norm=a.use_group_norm, names="sequential")
        self.pool = SpatialSoftArgmax(a.num_keypoints)
        self.out = nn.Linear(2 * a.num_keypoints, 2 * a.num_keypoints)

    def forward(self, images: Tensor) -> Tensor:
        x = images
        if self.resize_shape is not None and tuple(x.shape[-2:]) != self.resize_shape:
            x = F.interpolate(x, size=self.resize_shape, mode="bilinear", align_corners=False, antialias=True)
        if self.crop_shape is not None:
            x = center_crop(x, self.crop_shape)
        keypoints = self.pool(self.backbone(x))
        return F.relu(self.out(keypoints.flatten(1)))


# ---------------------------------------------------------------------------- UNet
def timestep_embedding(t: Tensor, dim: int) -> Tensor:
    """Sinusoidal embedding: [sin(t f_i), cos(t f_i)], f_i = 10000^(-i / (dim/2 - 1))."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device) * -(math.log(10000) / (half - 1)))
    angles = t.unsqueeze(-1) * freqs.unsqueeze(0)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


class ConvGNMish(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, groups: int):
        super().__init__()
        self.block = nn.ModuleList(
            [nn.Conv1d(cin, cout, kernel, padding=kernel // 2), nn.GroupNorm(groups, cout)]
        )

    def forward(self, x: Tensor) -> Tensor:
        conv, norm = self.block
        return F.mish(norm(conv(x)))


class FiLMResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, cond_dim: int, kernel: int, groups: int, film_scale: bool):
        super().__init__()
        self.cout, self.film_scale = cout, film_scale
        self.conv1 = ConvGNMish(cin, cout, kernel, groups)
        self.cond_encoder = nn.ModuleDict({"1": nn.Linear(cond_dim, 2 * cout if film_scale else cout)})
        self.conv2 = ConvGNMish(cout, cout, kernel, groups)
        self.residual_conv = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x: Tensor, cond: Tensor) -> Tensor:
        y = self.conv1(x)
        film = self.cond_encoder["1"](F.mish(cond)).unsqueeze(-1)
        if self.film_scale:
            y = film[:, : self.cout] * y + film[:, self.cout :]
        else:
            y = y + film
        y = self.conv2(y)
        return y + (x if self.residual_conv is None else self.residual_conv(x))


class ConditionalUnet1d(nn.Module):
    def __init__(self, a: DiffusionArch, global_cond_dim: int):
        super().__init__()
        e = a.step_embed_dim
        self.step_embed_dim = e
        self.diffusion_step_encoder = nn.ModuleDict({"1": nn.Linear(e, 4 * e), "3": nn.Linear(4 * e, e)})
        cond_dim = e + global_cond_dim
        dims = [a.action_dim, *a.down_dims]
        pairs = list(zip(dims[:-1], dims[1:], strict=True))

        def res(cin, cout):
            return FiLMResBlock(cin, cout, cond_dim, a.kernel_size, a.n_groups, a.film_scale)

        self.down_modules = nn.ModuleList()
        for i, (cin, cout) in enumerate(pairs):
            stage = {"0": res(cin, cout), "1": res(cout, cout)}
            if i < len(pairs) - 1:
                stage["2"] = nn.Conv1d(cout, cout, 3, 2, 1)
            self.down_modules.append(nn.ModuleDict(stage))
        mid = a.down_dims[-1]
        self.mid_modules = nn.ModuleList([res(mid, mid), res(mid, mid)])
        # one up stage per down stage but the first; each upsamples (LeRobot's layout)
        self.up_modules = nn.ModuleList()
        for cout, cin in reversed(pairs[1:]):
            self.up_modules.append(
                nn.ModuleDict(
                    {
                        "0": res(2 * cin, cout),
                        "1": res(cout, cout),
                        "2": nn.ConvTranspose1d(cout, cout, 4, 2, 1),
                    }
                )
            )
        d0 = a.down_dims[0]
        # the final block uses 8 groups whatever n_groups is, as LeRobot's does
        self.final_conv = nn.ModuleDict(
            {"0": ConvGNMish(d0, d0, a.kernel_size, 8), "1": nn.Conv1d(d0, a.action_dim, 1)}
        )

    def forward(self, x: Tensor, t: Tensor, global_cond: Tensor) -> Tensor:
        enc = self.diffusion_step_encoder
        temb = enc["3"](F.mish(enc["1"](timestep_embedding(t, self.step_embed_dim))))
        cond = torch.cat([temb, global_cond], dim=-1)
        h = x.transpose(1, 2)  # (B, action_dim, T)
        skips = []
        for stage in self.down_modules:
            h = stage["1"](stage["0"](h, cond), cond)
            skips.append(h)
            if "2" in stage:
                h = stage["2"](h)
        for block in self.mid_modules:
            h = block(h, cond)
        for stage in self.up_modules:
            h = torch.cat((h, skips.pop()), dim=1)
            h = stage["2"](stage["1"](stage["0"](h, cond), cond))
        h = self.final_conv["1"](self.final_conv["0"](h))
        return h.transpose(1, 2)


# ---------------------------------------------------------------------------- the model
class DiffusionModel(nn.Module):
    """Normalized observation history -> normalized action chunk (B, n_action_steps, action_dim)."""

    def __init__(self, a: DiffusionArch):
        super().__init__()
        self.arch = a
        n_cam = len(a.image_keys)
        if n_cam and a.separate_encoders:
            self.rgb_encoder = nn.ModuleList(RgbEncoder(a) for _ in range(n_cam))
        elif n_cam:
            self.rgb_encoder = RgbEncoder(a)
        else:
            self.rgb_encoder = None
        per_step = a.state_dim + n_cam * 2 * a.num_keypoints + (a.env_state_dim or 0)
        self.unet = ConditionalUnet1d(a, per_step * a.n_obs_steps)
        self.sampler = Sampler(a.sampler)
        for p in self.parameters():
            p.requires_grad_(False)

    def _backbones(self) -> list[tuple[ResNetTrunk, str]]:
        if self.rgb_encoder is None:
            return []
        if isinstance(self.rgb_encoder, nn.ModuleList):
            return [(enc.backbone, f"rgb_encoder.{i}.backbone.") for i, enc in enumerate(self.rgb_encoder)]
        return [(self.rgb_encoder.backbone, "rgb_encoder.backbone.")]

    def _plain_params(self) -> dict[str, Tensor]:
        return {n: p for n, p in self.named_parameters() if ".backbone." not in f".{n}"}

    def expected_keys(self, prefix: str = PREFIX) -> list[str]:
        keys = [prefix + n for n in self._plain_params()]
        for trunk, sub in self._backbones():
            keys += trunk.required_keys(prefix + sub)
        return keys

    @torch.no_grad()
    def load_lerobot_state(self, state: Mapping[str, Tensor], prefix: str = PREFIX) -> None:
        for name, param in self._plain_params().items():
            tensor = state[prefix + name]
            if tensor.shape != param.shape:
                raise ValueError(
                    f"{prefix + name} has shape {tuple(tensor.shape)}, expected {tuple(param.shape)}"
                )
            param.copy_(tensor.to(torch.float32))
        for trunk, sub in self._backbones():
            trunk.load(state, prefix + sub)

    def to(self, *args, **kwargs):
        out = super().to(*args, **kwargs)
        self.sampler.to(next(self.parameters()).device)
        return out

    def global_conditioning(self, batch: Mapping[str, Tensor]) -> Tensor:
        """batch: state (B, S, D), each camera (B, S, 3, H, W), env state (B, S, E) -> (B, S * per-step dim)."""
        a = self.arch
        state = batch[OBS_STATE]
        b, s = state.shape[:2]
        feats = [state]
        if a.image_keys:
            if isinstance(self.rgb_encoder, nn.ModuleList):
                per_cam = [
                    enc(batch[k].flatten(0, 1)).view(b, s, -1)
                    for enc, k in zip(self.rgb_encoder, a.image_keys, strict=True)
                ]
            else:
                # all cameras and steps through the shared encoder at once, camera index innermost
                images = torch.stack([batch[k] for k in a.image_keys], dim=2)
                out = self.rgb_encoder(images.flatten(0, 2))
                per_cam = list(out.view(b, s, len(a.image_keys), -1).unbind(2))
            feats += per_cam
        if a.env_state_dim:
            feats.append(batch[OBS_ENV_STATE])
        return torch.cat(feats, dim=-1).flatten(1)

    def forward(
        self,
        batch: Mapping[str, Tensor],
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        a = self.arch
        cond = self.global_conditioning(batch)
        b = cond.shape[0]
        shape = (b, a.horizon, a.action_dim)
        if noise is not None and tuple(noise.shape) != shape:
            raise ValueError(
                f"noise must have shape {shape} (B, horizon, action_dim), got {tuple(noise.shape)}"
            )
        actions = self.sampler.sample(
            lambda x, t: self.unet(x, t, cond), shape, device=cond.device, noise=noise, generator=generator
        )
        start = a.n_obs_steps - 1
        return actions[:, start : start + a.n_action_steps]
