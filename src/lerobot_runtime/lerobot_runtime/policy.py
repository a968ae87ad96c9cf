"""`load_policy(path)`: a LeRobot checkpoint directory -> an object that predicts action chunks.

ACT and Diffusion Policy run natively (plain torch, no lerobot, no torchvision, no diffusers).
Other policy types run through lerobot's own classes when lerobot is importable; otherwise loading
fails with an error naming the type.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .checkpoint import (
    CONFIG_NAME,
    POSTPROCESSOR_NAME,
    PREPROCESSOR_NAME,
    WEIGHTS_NAME,
    Feature,
    Pipeline,
    check_finite_tensors,
    check_lerobot_format,
    parse_features,
    read_json,
    read_pipeline,
    read_safetensors,
    resolve_checkpoint_dir,
)
from .errors import (
    DeviceError,
    NonFiniteActionError,
    ObservationError,
    PolicyLoadError,
    UnsupportedPolicyError,
)

NATIVE_TYPES = ("act", "diffusion")
QUEUE_TYPES = ("diffusion", "vqbet")  # lerobot policies whose predict_action_chunk reads their queues
ACTION = "action"


@dataclass(frozen=True)
class PolicyConfig:
    """What a caller needs to know about a loaded policy."""

    type: str
    path: str
    chunk_size: int
    n_action_steps: int
    input_features: dict[str, Feature]
    output_features: dict[str, Feature]
    temporal_ensemble_coeff: float | None = None
    n_obs_steps: int = 1
    state_names: tuple[str, ...] | None = None
    action_names: tuple[str, ...] | None = None
    backend: str = "native"
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def image_features(self) -> dict[str, tuple[int, ...]]:
        return {k: f.shape for k, f in self.input_features.items() if f.type == "VISUAL"}

    @property
    def state_feature(self) -> Feature | None:
        return self.input_features.get("observation.state")

    @property
    def action_dim(self) -> int:
        return self.output_features[ACTION].shape[0]


def _dataset_names(ckpt: Path) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """State/action names from the training dataset's info.json, when the checkpoint points at one."""
    for cand in (ckpt / "train_config.json", ckpt.parent / "train_config.json"):
        if not cand.is_file():
            continue
        try:
            root = (json.loads(cand.read_text()).get("dataset") or {}).get("root")
            info = json.loads((Path(root) / "meta" / "info.json").read_text()) if root else None
        except (OSError, ValueError, TypeError):
            info = None
        if info:
            feats = info.get("features", {})

            def names(key, feats=feats):
                n = (feats.get(key) or {}).get("names")
                if isinstance(n, dict):  # older layouts: {"motors": [...]}
                    n = next(iter(n.values()), None)
                return tuple(n) if isinstance(n, list) else None

            return names("observation.state"), names(ACTION)
    return None, None


def read_policy_config(path: str | Path) -> tuple[Path, PolicyConfig]:
    ckpt = resolve_checkpoint_dir(path)
    cfg_path = ckpt / CONFIG_NAME
    cfg = read_json(cfg_path, "policy config")
    ptype = cfg.get("type")
    if not isinstance(ptype, str) or not ptype:
        raise PolicyLoadError(f"policy config {str(cfg_path)!r} has no 'type' (expected e.g. \"act\")")
    inputs = {f.name: f for f in parse_features(cfg, "input_features", cfg_path)}
    outputs = {f.name: f for f in parse_features(cfg, "output_features", cfg_path)}
    if ACTION not in outputs:
        raise PolicyLoadError(f"policy config {str(cfg_path)!r} has no 'action' output feature")
    chunk = cfg.get("chunk_size", cfg.get("horizon", cfg.get("action_chunk_size", 1)))
    if ptype == "diffusion":
        # LeRobot's DiffusionPolicy.predict_action_chunk returns the n_action_steps actions from the
        # current observation on, not the whole horizon
        chunk = cfg.get("n_action_steps", 8)
    state_names, action_names = _dataset_names(ckpt)
    coeff = cfg.get("temporal_ensemble_coeff")
    return ckpt, PolicyConfig(
        type=ptype,
        path=str(ckpt),
        chunk_size=int(chunk),
        n_action_steps=int(cfg.get("n_action_steps", chunk)),
        input_features=inputs,
        output_features=outputs,
        temporal_ensemble_coeff=None if coeff is None else float(coeff),
        n_obs_steps=int(cfg.get("n_obs_steps", 1)),
        state_names=state_names,
        action_names=action_names,
        raw=cfg,
    )


class _PolicyBase:
    """Input validation shared by the policies, which keep no state between calls.

    `predict_action_chunk` takes numpy arrays or tensors per feature name: a whole history
    `(B, n_obs_steps, *shape)`, oldest first (what `action_path.ObservationHistory` stacks), or one
    observation `(B, *shape)` / unbatched `shape`, which stands for that observation repeated
    n_obs_steps times (what a fresh LeRobot policy does on the first step of an episode).
    """

    config: PolicyConfig
    device: torch.device
    pre: Pipeline

    def _finite(self, actions: np.ndarray) -> np.ndarray:
        """The chunk, unless it holds NaN or inf: then NonFiniteActionError (such an action is never
        returned, so never sent to a robot or a sim)."""
        bad = ~np.isfinite(actions)
        if bad.any():
            where = np.argwhere(bad)[0]
            raise NonFiniteActionError(
                f"the {self.config.type} policy output {int(bad.sum())} non-finite action value(s) (NaN or inf) "
                f"of {actions.size}, first at chunk step {int(where[-2]) if actions.ndim > 1 else 0}, action "
                f"dimension {int(where[-1])}; nothing was sent. The policy is at fault (its weights or "
                "statistics, or an observation far outside what it was trained on)"
            )
        return actions

    def _convert(
        self, batch: Mapping[str, Any], rename_map: Mapping[str, str]
    ) -> tuple[dict[str, torch.Tensor], bool]:
        """Validate and convert to float32 tensors on the device; True when the batch holds histories."""
        if not isinstance(batch, Mapping):
            raise ObservationError(
                f"observations must be a mapping of feature name -> array, got {type(batch)}"
            )
        renamed = {rename_map.get(k, k): v for k, v in batch.items()}
        n_obs = max(1, self.config.n_obs_steps)
        out: dict[str, torch.Tensor] = {}
        bsz = None
        history: dict[str, bool] = {}
        for name, feat in self.config.input_features.items():
            if name not in renamed:
                raise ObservationError(
                    f"observation {name!r} is missing (policy inputs: {sorted(self.config.input_features)}, "
                    f"given: {sorted(batch)})"
                )
            value = renamed[name]
            t = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
            if t.ndim == len(feat.shape):  # unbatched, like LeRobot's to_batch step
                t = t.unsqueeze(0)
            dims = ", ".join(map(str, feat.shape))
            is_hist = t.ndim == len(feat.shape) + 2
            tail = tuple(t.shape[2:] if is_hist else t.shape[1:])
            if tail != feat.shape or (is_hist and t.shape[1] != n_obs):
                hint = f" or (B, {n_obs}, {dims}) for a history of n_obs_steps={n_obs}" if n_obs > 1 else ""
                raise ObservationError(
                    f"observation {name!r} has shape {tuple(t.shape)}, expected (B, {dims}){hint}"
                )
            history[name] = is_hist
            if bsz is None:
                bsz = t.shape[0]
            elif t.shape[0] != bsz:
                raise ObservationError(f"observation {name!r} has batch size {t.shape[0]}, others have {bsz}")
            t = t.to(device=self.device, dtype=torch.float32)
            if not torch.isfinite(t).all():
                raise ObservationError(f"observation {name!r} contains NaN or infinite values")
            out[name] = t
        if len(set(history.values())) > 1:
            raise ObservationError(
                "observations mix single steps and histories: "
                f"{sorted(k for k, h in history.items() if h)} have an n_obs_steps axis, the others do not"
            )
        return out, any(history.values())

    def _history(self, batch: Mapping[str, Any], rename_map: Mapping[str, str]) -> dict[str, torch.Tensor]:
        """(B, n_obs_steps, ...) float tensors on the device; one observation is repeated to fill."""
        obs, is_hist = self._convert(batch, rename_map)
        if is_hist:
            return obs
        n_obs = max(1, self.config.n_obs_steps)
        return {k: torch.stack([v] * n_obs, dim=1) for k, v in obs.items()}

    def _normalized_history(self, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        obs = self._history(batch, self.pre.rename_map)
        norm = self.pre.normalizer
        return obs if norm is None else {k: norm.normalize(k, v) for k, v in obs.items()}

    def _load_native(
        self, ckpt: Path, config: PolicyConfig, device: str, arch_cls, model_cls, what: str
    ) -> None:
        """Processors, architecture and weights of a native policy; errors name the file and the problem."""
        self.config = config
        self.device = torch.device(device)
        self.pre = read_pipeline(ckpt, PREPROCESSOR_NAME, native=True)
        self.post = read_pipeline(ckpt, POSTPROCESSOR_NAME, native=True)
        try:
            model = model_cls(arch_cls.from_config(config.raw, config.input_features, config.output_features))
        except ValueError as exc:
            raise PolicyLoadError(f"{str(ckpt / CONFIG_NAME)!r}: {exc}") from exc
        weights_path = ckpt / WEIGHTS_NAME
        state = read_safetensors(weights_path, "model weights")
        missing = [k for k in model.expected_keys() if k not in state]
        if missing:
            raise PolicyLoadError(
                f"model weights {str(weights_path)!r} lack {len(missing)} tensor(s) the {what} config needs, "
                f"e.g. {missing[:3]}"
            )
        try:
            model.load_lerobot_state(state)
        except ValueError as exc:
            raise PolicyLoadError(f"model weights {str(weights_path)!r}: {exc}") from exc
        self.model = model.to(self.device).eval()
        for pipe in (self.pre, self.post):
            if pipe.normalizer is not None:
                pipe.normalizer.to(self.device)

    def reset(self) -> None:
        """Nothing to clear: the observation history is the caller's (`action_path`)."""


class NativeACTPolicy(_PolicyBase):
    def __init__(self, ckpt: Path, config: PolicyConfig, device: str = "cpu"):
        from .act import ACTArch, ACTModel

        self._load_native(ckpt, config, device, ACTArch, ACTModel, "ACT")
        self.set_channels_last(self.device.type == "cpu")  # oneDNN convs are faster channels-last on CPU
        self.set_winograd(self.device.type == "cpu")

    def set_winograd(self, enabled: bool = True) -> int:
        """Backbone 3x3 convs with >= 128 channels as Winograd F(2x2, 3x3) (runtime.winograd): fewer
        multiplications, same result to ~1e-6; returns how many convs use it."""
        return self.model.backbone.set_winograd(enabled) if self.model.backbone is not None else 0

    def set_channels_last(self, enabled: bool = True) -> None:
        """Store conv weights channels-last (faster oneDNN convolutions on CPU)."""
        fmt = torch.channels_last if enabled else torch.contiguous_format
        if self.model.backbone is not None:
            self.model.backbone.to(memory_format=fmt)
        self._channels_last = enabled

    @torch.inference_mode()
    def predict_action_chunk(self, batch: Mapping[str, Any]) -> np.ndarray:
        """(B, chunk_size, action_dim) unnormalized, from the newest step of the given observations."""
        obs = {k: v[:, -1] for k, v in self._normalized_history(batch).items()}
        if getattr(self, "_channels_last", False):
            for k in self.model.arch.image_keys:
                obs[k] = obs[k].contiguous(memory_format=torch.channels_last)
        actions = self.model(obs)
        if self.post.normalizer is not None:
            actions = self.post.normalizer.unnormalize(ACTION, actions)
        return self._finite(actions.to("cpu", torch.float32).numpy())


class NativeDiffusionPolicy(_PolicyBase):
    """LeRobot's DiffusionPolicy in plain torch (`runtime.diffusion`)."""

    def __init__(self, ckpt: Path, config: PolicyConfig, device: str = "cpu"):
        from .diffusion import DiffusionArch, DiffusionModel

        self._load_native(ckpt, config, device, DiffusionArch, DiffusionModel, "diffusion")

    @torch.inference_mode()
    def predict_action_chunk(
        self,
        batch: Mapping[str, Any],
        *,
        noise: Any = None,
        generator: torch.Generator | None = None,
    ) -> np.ndarray:
        """(B, n_action_steps, action_dim) unnormalized.

        batch: a (B, n_obs_steps, ...) history, or one observation (repeated n_obs_steps times).
        noise: optional initial sample (B, horizon, action_dim); DDPM still draws its per-step noise.
        generator: torch.Generator for all draws (default: torch's global generator, as LeRobot).
        """
        obs = self._normalized_history(batch)
        if noise is not None:
            noise = torch.as_tensor(np.asarray(noise) if not isinstance(noise, torch.Tensor) else noise)
        try:
            actions = self.model(obs, noise=noise, generator=generator)
        except ValueError as exc:
            raise ObservationError(str(exc)) from exc
        if self.post.normalizer is not None:
            actions = self.post.normalizer.unnormalize(ACTION, actions)
        return self._finite(actions.to("cpu", torch.float32).numpy())


class LeRobotBackendPolicy(_PolicyBase):
    """Any policy type lerobot knows, run through lerobot's own classes and saved processors.

    Stateless like the native policies: lerobot's policies with an observation history (diffusion,
    vqbet, n_obs_steps > 1) get their queues refilled from the given history on every call. `load()` (called by `load_policy`)
    imports lerobot and reads the checkpoint; until then the object only validates inputs.
    """

    def __init__(self, ckpt: Path, config: PolicyConfig, device: str = "cpu"):
        self.ckpt = ckpt
        self.config = PolicyConfig(**{**config.__dict__, "backend": "lerobot"})
        self.device = torch.device(device)
        self.policy = None

    def load(self) -> LeRobotBackendPolicy:
        if self.policy is not None:
            return self
        try:
            from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        except ImportError as exc:
            raise UnsupportedPolicyError(
                f"policy type {self.config.type!r} ({str(self.ckpt / CONFIG_NAME)!r}) needs the lerobot "
                f"package, which is not importable here ({exc}); natively supported types: "
                f"{', '.join(NATIVE_TYPES)}"
            ) from exc
        policy = get_policy_class(self.config.type).from_pretrained(str(self.ckpt)).to(self.device).eval()
        policy.config.device = str(self.device)
        check_finite_tensors(policy.state_dict().items(), f"model weights of {str(self.ckpt)!r}")
        self.pre, self.post = make_pre_post_processors(
            policy.config,
            pretrained_path=str(self.ckpt),
            preprocessor_overrides={"device_processor": {"device": str(self.device)}},
        )
        for pipe in (self.pre, self.post):  # LeRobot's normalizer steps keep their statistics as tensors
            for step in getattr(pipe, "steps", ()):
                state = step.state_dict() if hasattr(step, "state_dict") else {}
                check_finite_tensors(
                    state.items(),
                    f"normalizer statistics of {str(self.ckpt)!r} ({type(step).__name__})",
                    False,
                )
        self.policy = policy
        return self

    @torch.inference_mode()
    def predict_action_chunk(self, batch: Mapping[str, Any]) -> np.ndarray:
        obs = self._history(batch, {})
        steps = [{k: v[:, i] for k, v in obs.items()} for i in range(next(iter(obs.values())).shape[1])]
        extras = {k: v for k, v in batch.items() if k not in obs and isinstance(v, str | list)}
        for step in steps:
            step.update(extras)  # e.g. "task" for language-conditioned policies
        self.load()
        if self.config.type not in QUEUE_TYPES and len(steps) == 1:
            actions = self.policy.predict_action_chunk(self.pre(steps[-1]))
        else:
            # these predict from their observation queues, which select_action fills:
            # normalize, stack the cameras into one key, push (the first observation fills the queue)
            from lerobot.policies.utils import populate_queues

            self.policy.reset()
            cams = list(self.policy.config.image_features)
            for step in steps:
                pre = dict(self.pre(step))
                pre.pop(ACTION, None)
                if cams:
                    pre["observation.images"] = torch.stack([pre[k] for k in cams], dim=-4)
                self.policy._queues = populate_queues(self.policy._queues, pre)
            actions = self.policy.predict_action_chunk(pre)
        return self._finite(self.post(actions).to("cpu", torch.float32).numpy())


def lerobot_available() -> bool:
    return importlib.util.find_spec("lerobot") is not None


def check_device(device: str) -> None:
    """Raise :class:`DeviceError` (the reason, without the name) when torch cannot run on `device` here:
    a CUDA device on a CPU build of torch, a malformed name. Cheap; call it before loading anything."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError("not a torch device name (cpu, cuda, cuda:1, mps)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = (
                "a CPU-only build"
                if torch.version.cuda is None
                else f"CUDA {torch.version.cuda}, no GPU seen"
            )
            raise DeviceError(f"torch {torch.__version__} here has no CUDA ({build}); use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"only {torch.cuda.device_count()} CUDA device(s) here")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceError("no Apple MPS on this machine; use cpu")


def load_policy(path: str | Path, device: str = "cpu", backend: str = "auto"):
    """Load a LeRobot checkpoint directory.

    backend: "auto" (native when the type is implemented here, else lerobot), "native" or "lerobot".
    """
    try:
        check_device(device)
    except DeviceError as exc:
        raise DeviceError(f"device {device!r}: {exc}") from None
    ckpt, config = read_policy_config(path)
    if backend not in ("auto", "native", "lerobot"):
        raise ValueError(f"backend must be auto, native or lerobot, got {backend!r}")
    if backend != "lerobot" and config.type in NATIVE_TYPES:
        check_lerobot_format(ckpt, config.raw)
        cls = {"act": NativeACTPolicy, "diffusion": NativeDiffusionPolicy}[config.type]
        return cls(ckpt, config, device=device)
    if backend == "native":
        raise UnsupportedPolicyError(
            f"policy type {config.type!r} ({str(ckpt / CONFIG_NAME)!r}) has no native implementation "
            f"(native: {', '.join(NATIVE_TYPES)})"
        )
    return LeRobotBackendPolicy(ckpt, config, device=device).load()
