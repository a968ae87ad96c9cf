"""Reading a checkpoint directory as LeRobot saves it, with errors that name the file.

A LeRobot `pretrained_model/` directory holds `config.json` (the policy config, draccus JSON),
`model.safetensors` (the state dict, keys prefixed like `model.backbone.conv1.weight`) and the
processor pipelines `policy_preprocessor.json` / `policy_postprocessor.json`, whose stateful steps
point at their own `.safetensors` files. Only JSON and safetensors are read: no pickle.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import PolicyLoadError
from .normalize import Normalizer

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
PREPROCESSOR_NAME = "policy_preprocessor.json"
POSTPROCESSOR_NAME = "policy_postprocessor.json"

# Steps of the saved pipelines that the native runtime knows how to apply.
_PASS_THROUGH_STEPS = {"device_processor", "to_batch_processor"}


@dataclass(frozen=True)
class Feature:
    name: str
    type: str  # VISUAL, STATE, ENV, ACTION, ...
    shape: tuple[int, ...]


@dataclass
class Pipeline:
    """The parts of a saved processor pipeline the runtime applies."""

    path: Path
    rename_map: dict[str, str] = field(default_factory=dict)
    normalizer: Normalizer | None = None
    float_dtype: str | None = None
    steps: list[str] = field(default_factory=list)


def resolve_checkpoint_dir(path: str | Path) -> Path:
    """Accept the pretrained_model dir itself, a training checkpoint dir that contains one, or a
    Hugging Face Hub id (``org/name``, from the Hub cache; lerobot_core.hub)."""
    from lerobot_core.hub import HubError, resolve_pretrained

    try:
        p = resolve_pretrained(path)
    except HubError as exc:
        raise PolicyLoadError(str(exc)) from None
    if not p.exists():
        raise PolicyLoadError(f"policy checkpoint directory {str(p)!r} does not exist")
    if p.is_file():
        raise PolicyLoadError(
            f"policy checkpoint {str(p)!r} is a file; pass the directory holding {CONFIG_NAME}"
        )
    if not (p / CONFIG_NAME).exists() and (p / "pretrained_model" / CONFIG_NAME).exists():
        p = p / "pretrained_model"
    return p


def read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise PolicyLoadError(f"{what} {str(path)!r} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PolicyLoadError(f"{what} {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PolicyLoadError(f"{what} {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def read_safetensors(path: Path, what: str, allow_inf: bool = True) -> dict[str, torch.Tensor]:
    """Load a safetensors file to CPU tensors; a missing or corrupt file names itself, and so does a
    tensor holding NaN (or inf, with ``allow_inf=False``, as normalizer statistics must not)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise PolicyLoadError(f"{what} {str(path)!r} is missing")
    try:
        tensors = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise PolicyLoadError(f"{what} {str(path)!r} is corrupt or not a safetensors file: {exc}") from exc
    check_finite_tensors(tensors.items(), f"{what} {str(path)!r}", allow_inf)
    return tensors


def check_finite_tensors(named, where: str, allow_inf: bool = True) -> None:
    """PolicyLoadError naming the first floating tensor that holds NaN (or inf unless allowed): a
    policy built from it would output NaN actions (a diverged training run, a damaged file)."""
    for name, t in named:
        if not torch.is_tensor(t) or not t.is_floating_point():
            continue
        bad = torch.isnan(t) if allow_inf else ~torch.isfinite(t)
        n = int(bad.sum())
        if n:
            kind = "NaN" if allow_inf else "NaN or inf"
            raise PolicyLoadError(
                f"{where}: tensor {name!r} holds {n} {kind} value(s) of {t.numel()}; a policy built from it "
                "outputs NaN actions (a diverged training run or a damaged file): use another checkpoint"
            )


def parse_features(cfg: dict[str, Any], key: str, config_path: Path) -> list[Feature]:
    raw = cfg.get(key)
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise PolicyLoadError(f"{str(config_path)!r}: {key!r} must be an object of features")
    out = []
    for name, ft in raw.items():
        try:
            out.append(Feature(name=name, type=str(ft["type"]), shape=tuple(int(d) for d in ft["shape"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyLoadError(
                f"{str(config_path)!r}: feature {name!r} in {key!r} needs 'type' and 'shape' ({exc})"
            ) from exc
    return out


def read_pipeline(ckpt: Path, filename: str, *, native: bool) -> Pipeline:
    """Read a saved processor pipeline; with native=True, reject steps the runtime cannot apply."""
    path = ckpt / filename
    data = read_json(path, "processor pipeline")
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise PolicyLoadError(f"processor pipeline {str(path)!r} has no 'steps' list")
    pipe = Pipeline(path=path)
    for index, step in enumerate(steps):
        name = step.get("registry_name") or step.get("class") or f"step {index}"
        pipe.steps.append(name)
        conf = step.get("config") or {}
        if name == "rename_observations_processor":
            pipe.rename_map = dict(conf.get("rename_map") or {})
        elif name in ("normalizer_processor", "unnormalizer_processor"):
            features = {k: str(v["type"]) for k, v in (conf.get("features") or {}).items()}
            norm_map = {str(k): str(v) for k, v in (conf.get("norm_map") or {}).items()}
            flat: dict[str, torch.Tensor] = {}
            if "state_file" in step:
                flat = read_safetensors(
                    ckpt / step["state_file"], f"{name} stats of {filename}", allow_inf=False
                )
            try:
                pipe.normalizer = Normalizer.from_flat_state(
                    features, norm_map, flat, eps=float(conf.get("eps", 1e-8)), source=str(path)
                )
            except ValueError as exc:
                raise PolicyLoadError(str(exc)) from exc
        elif name == "device_processor":
            pipe.float_dtype = conf.get("float_dtype")
        elif name in _PASS_THROUGH_STEPS:
            pass
        elif native:
            raise PolicyLoadError(
                f"processor pipeline {str(path)!r}: step {name!r} is not supported by the native runtime "
                "(install lerobot to run this checkpoint through its own processors)"
            )
    return pipe


# major.minor of the LeRobot releases whose checkpoint format the native runtime reads: 0.4.4 and 0.6.1
# are tested against their own checkpoints (docs/policy.md), 0.5 lies between them with the same files.
KNOWN_LEROBOT_FORMATS = ((0, 4), (0, 5), (0, 6))
_CARD_VERSION = re.compile(r"^\|\s*LeRobot version\s*\|\s*([^|]*?)\s*\|", re.MULTILINE)


def saved_by_lerobot(ckpt: Path, cfg: dict[str, Any]) -> tuple[str, str] | None:
    """The LeRobot version a checkpoint says it was saved by, and where it says so, if it says.

    LeRobot 0.4.4 and 0.6.1 write no version into config.json; 0.6's Hub model card (README.md beside
    the files of a Hub snapshot) has a "LeRobot version" row. A `lerobot_version` field in config.json
    is read too, should a later release add one."""
    if "lerobot_version" in cfg:
        return str(cfg["lerobot_version"]), f"{str(ckpt / CONFIG_NAME)!r}, field 'lerobot_version'"
    card = ckpt / "README.md"
    if card.is_file():
        match = _CARD_VERSION.search(card.read_text(encoding="utf-8", errors="replace"))
        if match and match.group(1):
            return match.group(1), f"{str(card)!r} (model card), field 'LeRobot version'"
    return None


def check_lerobot_format(ckpt: Path, cfg: dict[str, Any]) -> None:
    """A checkpoint saved by a LeRobot version whose format the native runtime does not know is an
    error naming the version and the field that says it (nothing is guessed from its files)."""
    found = saved_by_lerobot(ckpt, cfg)
    if found is None:
        return
    version, where = found
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:[.\-+].*)?", version)
    if match is None or (int(match.group(1)), int(match.group(2))) not in KNOWN_LEROBOT_FORMATS:
        known = ", ".join(f"{a}.{b}" for a, b in KNOWN_LEROBOT_FORMATS)
        raise PolicyLoadError(
            f"policy checkpoint {str(ckpt)!r} was saved by LeRobot {version!r} ({where}); the native runtime "
            f"reads the checkpoint formats of LeRobot {known} only. Run it with --backend lerobot in an "
            "environment whose LeRobot reads that version"
        )
