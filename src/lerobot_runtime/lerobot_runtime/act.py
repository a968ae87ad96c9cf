"""ACT (Action Chunking Transformer) inference in plain torch, loading LeRobot's ACT weights by name.

Inference path only: the VAE encoder is used in training alone (at inference the latent is zero),
so its weights are present in the checkpoint but not needed here. Tokens are laid out as in LeRobot:
[latent, robot state?, env state?, camera features (h*w per camera, row-major)], with learned 1-D
position embeddings for the first group and fixed 2-D sinusoidal embeddings for the camera
features. The decoder queries are zeros plus learned position embeddings (one per chunk step).
Tensors are batch-first here (LeRobot is sequence-first); the maths is the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .resnet import FEATURE_CHANNELS, ResNetTrunk

OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"


@dataclass(frozen=True)
class ACTArch:
    dim_model: int
    n_heads: int
    dim_feedforward: int
    n_encoder_layers: int
    n_decoder_layers: int
    latent_dim: int
    chunk_size: int
    pre_norm: bool
    activation: str
    vision_backbone: str
    replace_final_stride_with_dilation: bool
    state_dim: int | None
    env_state_dim: int | None
    action_dim: int
    image_keys: tuple[str, ...]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], inputs: dict, outputs: dict) -> ACTArch:
        image_keys = tuple(k for k, f in inputs.items() if f.type == "VISUAL")
        state = next((f for f in inputs.values() if f.type == "STATE" and f.name == OBS_STATE), None)
        env = next((f for f in inputs.values() if f.type == "ENV" and f.name == OBS_ENV_STATE), None)
        action = next((f for f in outputs.values() if f.type == "ACTION"), None)
        if action is None:
            raise ValueError("ACT config has no ACTION output feature")
        if not image_keys and env is None:
            raise ValueError("ACT needs at least one image or observation.environment_state input")
        return cls(
            dim_model=int(cfg.get("dim_model", 512)),
            n_heads=int(cfg.get("n_heads", 8)),
            dim_feedforward=int(cfg.get("dim_feedforward", 3200)),
            n_encoder_layers=int(cfg.get("n_encoder_layers", 4)),
            n_decoder_layers=int(cfg.get("n_decoder_layers", 1)),
            latent_dim=int(cfg.get("latent_dim", 32)),
            chunk_size=int(cfg.get("chunk_size", 100)),
            pre_norm=bool(cfg.get("pre_norm", False)),
            activation=str(cfg.get("feedforward_activation", "relu")),
            vision_backbone=str(cfg.get("vision_backbone", "resnet18")),
            replace_final_stride_with_dilation=bool(cfg.get("replace_final_stride_with_dilation", False)),
            state_dim=state.shape[0] if state else None,
            env_state_dim=env.shape[0] if env else None,
            action_dim=action.shape[0],
            image_keys=image_keys,
        )


def _activation(name: str):
    table = {"relu": F.relu, "gelu": F.gelu, "glu": F.glu}
    if name not in table:
        raise ValueError(f"feedforward_activation {name!r} is not one of {sorted(table)}")
    return table[name]


class Attention(nn.Module):
    """Multi-head attention with torch.nn.MultiheadAttention's parameter layout (packed in_proj)."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim_model {dim} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim), requires_grad=False)
        self.in_proj_bias = nn.Parameter(torch.empty(3 * dim), requires_grad=False)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        b, lq, d = q.shape
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        h = self.n_heads
        qh = F.linear(q, w_q, b_q).view(b, lq, h, d // h).transpose(1, 2)
        kh = F.linear(k, w_k, b_k).view(b, k.shape[1], h, d // h).transpose(1, 2)
        vh = F.linear(v, w_v, b_v).view(b, v.shape[1], h, d // h).transpose(1, 2)
        out = F.scaled_dot_product_attention(qh, kh, vh)
        return self.out_proj(out.transpose(1, 2).reshape(b, lq, d))


class EncoderLayer(nn.Module):
    def __init__(self, a: ACTArch):
        super().__init__()
        self.self_attn = Attention(a.dim_model, a.n_heads)
        self.linear1 = nn.Linear(a.dim_model, a.dim_feedforward)
        self.linear2 = nn.Linear(a.dim_feedforward, a.dim_model)
        self.norm1 = nn.LayerNorm(a.dim_model)
        self.norm2 = nn.LayerNorm(a.dim_model)
        self.act = _activation(a.activation)
        self.pre_norm = a.pre_norm

    def forward(self, x: Tensor, pos: Tensor) -> Tensor:
        if self.pre_norm:
            y = self.norm1(x)
            qk = y + pos
            x = x + self.self_attn(qk, qk, y)
            return x + self.linear2(self.act(self.linear1(self.norm2(x))))
        qk = x + pos
        x = self.norm1(x + self.self_attn(qk, qk, x))
        return self.norm2(x + self.linear2(self.act(self.linear1(x))))


class DecoderLayer(nn.Module):
    def __init__(self, a: ACTArch):
        super().__init__()
        self.self_attn = Attention(a.dim_model, a.n_heads)
        self.multihead_attn = Attention(a.dim_model, a.n_heads)
        self.linear1 = nn.Linear(a.dim_model, a.dim_feedforward)
        self.linear2 = nn.Linear(a.dim_feedforward, a.dim_model)
        self.norm1 = nn.LayerNorm(a.dim_model)
        self.norm2 = nn.LayerNorm(a.dim_model)
        self.norm3 = nn.LayerNorm(a.dim_model)
        self.act = _activation(a.activation)
        self.pre_norm = a.pre_norm

    def forward(self, x: Tensor, memory: Tensor, memory_k: Tensor, pos: Tensor) -> Tensor:
        # memory_k = encoder output + its position embedding (keys of the cross-attention)
        if self.pre_norm:
            y = self.norm1(x)
            x = x + self.self_attn(y + pos, y + pos, y)
            y = self.norm2(x)
            x = x + self.multihead_attn(y + pos, memory_k, memory)
            return x + self.linear2(self.act(self.linear1(self.norm3(x))))
        qk = x + pos
        x = self.norm1(x + self.self_attn(qk, qk, x))
        x = self.norm2(x + self.multihead_attn(x + pos, memory_k, memory))
        return self.norm3(x + self.linear2(self.act(self.linear1(x))))


def sinusoid_2d(dim_half: int, height: int, width: int, device=None) -> Tensor:
    """(1, 2*dim_half, H, W) embedding: positions scaled to (0, 2pi], y half first then x half."""
    eps, two_pi = 1e-6, 2 * math.pi
    ones = torch.ones((1, height, width), dtype=torch.float32, device=device)
    y = ones.cumsum(1, dtype=torch.float32)
    x = ones.cumsum(2, dtype=torch.float32)
    y = y / (y[:, -1:, :] + eps) * two_pi
    x = x / (x[:, :, -1:] + eps) * two_pi
    freq = 10000 ** (2 * (torch.arange(dim_half, dtype=torch.float32, device=device) // 2) / dim_half)
    x = x.unsqueeze(-1) / freq
    y = y.unsqueeze(-1) / freq
    pe_x = torch.stack((x[..., 0::2].sin(), x[..., 1::2].cos()), dim=-1).flatten(3)
    pe_y = torch.stack((y[..., 0::2].sin(), y[..., 1::2].cos()), dim=-1).flatten(3)
    return torch.cat((pe_y, pe_x), dim=3).permute(0, 3, 1, 2)


class ACTModel(nn.Module):
    """ACT inference network. Inputs are already normalized; outputs are normalized actions."""

    def __init__(self, a: ACTArch):
        super().__init__()
        if a.replace_final_stride_with_dilation:
            raise ValueError("replace_final_stride_with_dilation is not supported with ResNet basic blocks")
        self.arch = a
        d = a.dim_model
        self.backbone = ResNetTrunk(a.vision_backbone) if a.image_keys else None
        self.encoder_layers = nn.ModuleList(EncoderLayer(a) for _ in range(a.n_encoder_layers))
        self.encoder_norm = nn.LayerNorm(d) if a.pre_norm else nn.Identity()
        self.decoder_layers = nn.ModuleList(DecoderLayer(a) for _ in range(a.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(d)
        self.state_proj = nn.Linear(a.state_dim, d) if a.state_dim else None
        self.env_proj = nn.Linear(a.env_state_dim, d) if a.env_state_dim else None
        self.latent_proj = nn.Linear(a.latent_dim, d)
        self.img_proj = nn.Conv2d(FEATURE_CHANNELS, d, kernel_size=1) if a.image_keys else None
        n_1d = 1 + bool(a.state_dim) + bool(a.env_state_dim)
        self.pos_1d = nn.Parameter(torch.zeros(n_1d, d), requires_grad=False)
        self.decoder_pos = nn.Parameter(torch.zeros(a.chunk_size, d), requires_grad=False)
        self.action_head = nn.Linear(d, a.action_dim)
        self._cam_pos_cache: dict[tuple[int, int, str], Tensor] = {}
        for p in self.parameters():
            p.requires_grad_(False)

    # LeRobot name (without the "model." prefix) -> ours, for everything but the backbone.
    def _name_map(self) -> dict[str, str]:
        m = {
            "encoder_latent_input_proj": "latent_proj",
            "encoder_1d_feature_pos_embed.weight": "pos_1d",
            "decoder_pos_embed.weight": "decoder_pos",
            "action_head": "action_head",
            "decoder.norm": "decoder_norm",
        }
        if self.state_proj is not None:
            m["encoder_robot_state_input_proj"] = "state_proj"
        if self.env_proj is not None:
            m["encoder_env_state_input_proj"] = "env_proj"
        if self.img_proj is not None:
            m["encoder_img_feat_input_proj"] = "img_proj"
        if self.arch.pre_norm:
            m["encoder.norm"] = "encoder_norm"
        for i in range(len(self.encoder_layers)):
            m[f"encoder.layers.{i}"] = f"encoder_layers.{i}"
        for i in range(len(self.decoder_layers)):
            m[f"decoder.layers.{i}"] = f"decoder_layers.{i}"
        return m

    def expected_keys(self, prefix: str = "model.") -> list[str]:
        own = dict(self.named_parameters())
        inverse = {ours: theirs for theirs, ours in self._name_map().items()}
        keys = []
        for name in own:
            if name.startswith("backbone."):
                continue
            for ours, theirs in inverse.items():
                if name == ours or name.startswith(ours + "."):
                    keys.append(prefix + theirs + name[len(ours) :])
                    break
        if self.backbone is not None:
            keys += self.backbone.required_keys(prefix + "backbone.")
        return keys

    @torch.no_grad()
    def load_lerobot_state(self, state: Mapping[str, Tensor], prefix: str = "model.") -> None:
        own = dict(self.named_parameters())
        inverse = {ours: theirs for theirs, ours in self._name_map().items()}
        for name, param in own.items():
            if name.startswith("backbone."):
                continue
            src = None
            for ours, theirs in inverse.items():
                if name == ours or name.startswith(ours + "."):
                    src = prefix + theirs + name[len(ours) :]
                    break
            tensor = state[src]
            if tensor.shape != param.shape:
                raise ValueError(f"{src} has shape {tuple(tensor.shape)}, expected {tuple(param.shape)}")
            param.copy_(tensor.to(torch.float32))
        if self.backbone is not None:
            self.backbone.load(state, prefix + "backbone.")

    def _cam_pos(self, h: int, w: int, device) -> Tensor:
        key = (h, w, str(device))
        if key not in self._cam_pos_cache:
            pe = sinusoid_2d(self.arch.dim_model // 2, h, w, device=device)
            self._cam_pos_cache[key] = pe.flatten(2).transpose(1, 2)  # (1, h*w, D)
        return self._cam_pos_cache[key]

    def forward(self, batch: Mapping[str, Tensor]) -> Tensor:
        a = self.arch
        ref = batch[a.image_keys[0]] if a.image_keys else batch[OBS_ENV_STATE]
        bsz, device = ref.shape[0], ref.device
        latent = torch.zeros((bsz, a.latent_dim), dtype=torch.float32, device=device)
        tokens = [self.latent_proj(latent).unsqueeze(1)]
        pos = [self.pos_1d.unsqueeze(0)]
        if self.state_proj is not None:
            tokens.append(self.state_proj(batch[OBS_STATE]).unsqueeze(1))
        if self.env_proj is not None:
            tokens.append(self.env_proj(batch[OBS_ENV_STATE]).unsqueeze(1))
        for key in a.image_keys:
            fmap = self.backbone(batch[key])
            feats = self.img_proj(fmap)
            tokens.append(feats.flatten(2).transpose(1, 2))
            pos.append(self._cam_pos(fmap.shape[2], fmap.shape[3], device))
        x = torch.cat(tokens, dim=1)
        pos_all = torch.cat(pos, dim=1)
        for layer in self.encoder_layers:
            x = layer(x, pos_all)
        memory = self.encoder_norm(x)
        memory_k = memory + pos_all
        dec_pos = self.decoder_pos.unsqueeze(0)
        y = torch.zeros((bsz, a.chunk_size, a.dim_model), dtype=torch.float32, device=device)
        for layer in self.decoder_layers:
            y = layer(y, memory, memory_k, dec_pos)
        return self.action_head(self.decoder_norm(y))
