"""DDPM and DDIM reverse-diffusion samplers in plain torch, with the conventions LeRobot gets from diffusers.

LeRobot builds a diffusers `DDPMScheduler` / `DDIMScheduler` from the policy config and runs
`set_timesteps(num_inference_steps)` then one `step` per timestep. The conventions that matter for
identical results, re-implemented here:

- betas (float32): `linear` = linspace(beta_start, beta_end, T); `scaled_linear` = linspace of the
  square roots, squared; `squaredcos_cap_v2` = the cosine schedule
  abar(t) = cos(((t + 0.008) / 1.008) * pi / 2)^2, beta_i = min(1 - abar((i+1)/T) / abar(i/T), 0.999)
  computed in float64 and stored as float32; alphas_cumprod = cumprod(1 - beta) in float32.
- timesteps ("leading" spacing, offset 0): k * (T // N) for k = N-1 .. 0.
- DDPM step (variance "fixed_small"): x0 from the model output (epsilon or sample), clipped to
  +-clip_sample_range when clip_sample; mean = c0 * x0 + ct * x_t with
  c0 = sqrt(abar_prev) * (1 - abar_t / abar_prev) / (1 - abar_t),
  ct = sqrt(abar_t / abar_prev) * (1 - abar_prev) / (1 - abar_t), where prev is the next timestep of the
  schedule (abar = 1 after the last); for t > 0 add sqrt(max(var, 1e-20)) * z,
  var = (1 - abar_prev) / (1 - abar_t) * (1 - abar_t / abar_prev), z ~ N(0, 1) of the sample's shape.
- DDIM step (eta 0, final alpha 1): prev = t - T // N; x0 as above (clipped), epsilon = the model
  output (epsilon prediction) or recomputed from the unclipped x0 (sample prediction);
  x_prev = sqrt(abar_prev) * x0 + sqrt(1 - abar_prev) * epsilon. No random draw.

Random draws happen in the same order and shapes as LeRobot's: the initial sample
randn(B, horizon, action_dim), then (DDPM) one randn of the same shape per step with t > 0, from
`generator` or torch's global generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

BETA_SCHEDULES = ("linear", "scaled_linear", "squaredcos_cap_v2")
SAMPLERS = ("DDPM", "DDIM")
PREDICTION_TYPES = ("epsilon", "sample")


def make_betas(schedule: str, num_train_timesteps: int, beta_start: float, beta_end: float) -> Tensor:
    n = num_train_timesteps
    if schedule == "linear":
        return torch.linspace(beta_start, beta_end, n, dtype=torch.float32)
    if schedule == "scaled_linear":
        return torch.linspace(beta_start**0.5, beta_end**0.5, n, dtype=torch.float32) ** 2
    if schedule == "squaredcos_cap_v2":

        def abar(t: float) -> float:
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

        return torch.tensor(
            [min(1 - abar((i + 1) / n) / abar(i / n), 0.999) for i in range(n)], dtype=torch.float32
        )
    raise ValueError(f"beta_schedule {schedule!r} is not supported (supported: {', '.join(BETA_SCHEDULES)})")


@dataclass(frozen=True)
class SamplerConfig:
    kind: str = "DDPM"
    num_train_timesteps: int = 100
    num_inference_steps: int | None = None
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 1e-4
    beta_end: float = 0.02
    prediction_type: str = "epsilon"
    clip_sample: bool = True
    clip_sample_range: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in SAMPLERS:
            raise ValueError(f"noise_scheduler_type {self.kind!r} is not one of {SAMPLERS}")
        if self.prediction_type not in PREDICTION_TYPES:
            raise ValueError(f"prediction_type {self.prediction_type!r} is not one of {PREDICTION_TYPES}")
        if self.beta_schedule not in BETA_SCHEDULES:
            raise ValueError(f"beta_schedule {self.beta_schedule!r} is not one of {BETA_SCHEDULES}")
        steps = self.steps
        if not 1 <= steps <= self.num_train_timesteps:
            raise ValueError(
                f"num_inference_steps {steps} must be in [1, num_train_timesteps={self.num_train_timesteps}]"
            )

    @property
    def steps(self) -> int:
        return self.num_train_timesteps if self.num_inference_steps is None else int(self.num_inference_steps)


class Sampler:
    """Runs the reverse diffusion: `sample(denoise, shape)`; denoise(x_t, t_batch) -> model output."""

    def __init__(self, cfg: SamplerConfig):
        self.cfg = cfg
        betas = make_betas(cfg.beta_schedule, cfg.num_train_timesteps, cfg.beta_start, cfg.beta_end)
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        ratio = cfg.num_train_timesteps // cfg.steps
        self.timesteps = [k * ratio for k in reversed(range(cfg.steps))]
        self._one = torch.tensor(1.0)

    def _abar(self, t: int) -> Tensor:
        return self.alphas_cumprod[t] if t >= 0 else self._one

    def _x0(self, out: Tensor, x: Tensor, abar_t: Tensor) -> Tensor:
        if self.cfg.prediction_type == "epsilon":
            return (x - (1 - abar_t) ** 0.5 * out) / abar_t**0.5
        return out

    def _clip(self, x0: Tensor) -> Tensor:
        if self.cfg.clip_sample:
            r = self.cfg.clip_sample_range
            return x0.clamp(-r, r)
        return x0

    def ddpm_step(self, out: Tensor, t: int, prev: int, x: Tensor, generator=None) -> Tensor:
        abar_t, abar_prev = self._abar(t), self._abar(prev)
        beta_t, beta_prev = 1 - abar_t, 1 - abar_prev
        alpha_t = abar_t / abar_prev
        x0 = self._clip(self._x0(out, x, abar_t))
        c0 = abar_prev**0.5 * (1 - alpha_t) / beta_t
        ct = alpha_t**0.5 * beta_prev / beta_t
        mean = c0 * x0 + ct * x
        if t <= 0:
            return mean
        z = torch.randn(out.shape, generator=generator, device=out.device, dtype=out.dtype)
        var = torch.clamp((1 - abar_prev) / (1 - abar_t) * (1 - alpha_t), min=1e-20)
        return mean + var**0.5 * z

    def ddim_step(self, out: Tensor, t: int, x: Tensor) -> Tensor:
        prev = t - self.cfg.num_train_timesteps // self.cfg.steps
        abar_t, abar_prev = self._abar(t), self._abar(prev)
        if self.cfg.prediction_type == "epsilon":
            x0, eps = self._x0(out, x, abar_t), out
        else:
            x0 = out
            eps = (x - abar_t**0.5 * x0) / (1 - abar_t) ** 0.5
        x0 = self._clip(x0)
        return abar_prev**0.5 * x0 + (1 - abar_prev) ** 0.5 * eps

    def to(self, device: torch.device | str) -> Sampler:
        self.alphas_cumprod = self.alphas_cumprod.to(device)
        self._one = self._one.to(device)
        return self

    def sample(
        self,
        denoise: Callable[[Tensor, Tensor], Tensor],
        shape: tuple[int, ...],
        *,
        device: torch.device | str = "cpu",
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        if noise is not None:
            x = noise.to(device=device, dtype=torch.float32)
        else:
            x = torch.randn(shape, generator=generator, device=device, dtype=torch.float32)
        ts = self.timesteps
        for i, t in enumerate(ts):
            out = denoise(x, torch.full((shape[0],), t, dtype=torch.long, device=x.device))
            if self.cfg.kind == "DDPM":
                x = self.ddpm_step(out, t, ts[i + 1] if i + 1 < len(ts) else -1, x, generator=generator)
            else:
                x = self.ddim_step(out, t, x)
        return x
