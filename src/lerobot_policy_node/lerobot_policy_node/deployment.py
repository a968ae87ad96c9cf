"""Contract-driven deployment (ROS-free): the recorder's contract as the policy node's input description.

The YAML that recorded a dataset (``lerobot_core.contract``) says which topics became which features, in
which joint order and in which units. Deployed with ``contract:=PATH``, the policy node reads the same
topics, builds ``observation.state`` with the same per-value conversion (``stored = rad * scale +
offset``, :meth:`Contract.unit_conversion`, formulas in ``lerobot_core.units``) and turns each action back
into radians with the inverse of the ``action`` feature's conversion.

:func:`check_checkpoint` compares a checkpoint with the contract when it is loaded and names the first
feature that does not fit: its name, its shape or its units. The units of the training data are not in
a LeRobot checkpoint; they come from the dataset's ``meta/info.json``, where this stack's recorder writes
``units`` beside ``names`` for each vector feature. A dataset recorded by LeRobot has no such key: it is
taken to be in LeRobot's default units for arms, ``normalized`` (RANGE_M100_100 body joints,
RANGE_0_100 gripper). :func:`dataset_units` finds the info.json from the checkpoint's
``train_config.json`` (``dataset.root``) or from a ``dataset_root`` given by the user.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lerobot_core.contract import IMAGE_PREFIX, JOINT_STATE, Contract, ImageSource

from .observation import ENV_STATE_KEY as ENV_STATE

STATE = "observation.state"
ACTION = "action"
LEROBOT_DEFAULT_UNITS = "normalized"  # what a LeRobot-recorded SO-100/101 dataset holds (use_degrees=False)


class DeploymentError(ValueError):
    """The checkpoint and the contract do not describe the same robot interface."""


@dataclass(frozen=True)
class VectorMap:
    """One vector feature: joint names in the policy's order and ``policy = rad * scale + offset``."""

    joints: tuple[str, ...]
    scale: np.ndarray
    offset: np.ndarray
    units: str | list[str]

    def to_policy(self, rad: np.ndarray) -> np.ndarray:
        return np.asarray(rad, dtype=np.float64) * self.scale + self.offset

    def to_radians(self, value: np.ndarray) -> np.ndarray:
        return (np.asarray(value, dtype=np.float64) - self.offset) / self.scale


@dataclass(frozen=True)
class Deployment:
    """What the policy node takes from a contract."""

    fps: int
    state_topic: str
    state: VectorMap
    action: VectorMap
    image_topics: dict[str, str]  # image feature -> topic
    source: str
    image_sources: dict[str, ImageSource] = field(default_factory=dict)  # message type, encoding
    task_text: str | None = None  # the contract's task (fixed text, or the default of its topic)
    task_topic: str | None = None
    # observation.environment_state: (topic, message type, number of values), as recorded; the node
    # extracts it with the contract itself (lerobot_core.contract), so the values match the dataset's
    env_state: tuple[str, str, int] | None = None
    contract: Contract | None = None


def _strip(name: str) -> str:
    return name[: -len(".pos")] if name.endswith(".pos") else name


def _vector(contract: Contract, feature: str) -> VectorMap:
    sources = contract.vectors.get(feature)
    if not sources:
        raise DeploymentError(f"{contract.source}: features.{feature}: missing (needed to deploy a policy)")
    for src in sources:
        if not src.joints:
            raise DeploymentError(
                f"{contract.source}: features.{feature}: list its 'joints' to deploy (the policy node "
                "cannot resolve them from a first message as the recorder does)"
            )
        if tuple(src.fields) != ("position",):
            raise DeploymentError(
                f"{contract.source}: features.{feature} ({src.topic}): only 'fields: [position]' can be "
                f"deployed, got {list(src.fields)}"
            )
        missing = [j for j in src.joints if src.units == "normalized" and j not in contract.calibration]
        if missing:
            raise DeploymentError(
                f"{contract.source}: features.{feature}: joint(s) {missing} have units 'normalized' but no "
                "calibration range: set 'calibration_file' (the LeRobot calibration JSON the driver loads)"
            )
    scale, offset = contract.unit_conversion(feature)
    joints = tuple(j for s in sources for j in s.joints)
    return VectorMap(joints, scale, offset, contract.feature_units(feature))


def from_contract(contract: Contract) -> Deployment:
    """The deployment description of a contract (DeploymentError naming the key when it cannot be)."""
    state = _vector(contract, STATE)
    sources = contract.vectors[STATE]
    if len(sources) != 1 or sources[0].msgtype != JOINT_STATE:
        raise DeploymentError(
            f"{contract.source}: features.{STATE}: the policy node reads one sensor_msgs/JointState "
            f"topic, got {[(s.topic, s.msgtype) for s in sources]}"
        )
    env_state = None
    env_sources = contract.vectors.get(ENV_STATE)
    if env_sources:
        if len(env_sources) != 1:
            raise DeploymentError(
                f"{contract.source}: features.{ENV_STATE}: the policy node reads one topic for it, got "
                f"{[s.topic for s in env_sources]}"
            )
        src = env_sources[0]
        if not src.joints:
            raise DeploymentError(f"{contract.source}: features.{ENV_STATE}: list its 'joints' to deploy")
        env_state = (src.topic, src.msgtype, len(src.names()))
    return Deployment(
        env_state=env_state,
        contract=contract,
        fps=contract.fps,
        state_topic=sources[0].topic,
        state=state,
        action=_vector(contract, ACTION),
        image_topics={k: src.topic for k, src in contract.images.items()},
        source=contract.source,
        image_sources=dict(contract.images),
        task_text=contract.task_text,
        task_topic=contract.task_topic,
    )


def dataset_units(checkpoint_dir: str | Path, dataset_root: str | Path = "") -> tuple[dict, str]:
    """(feature -> units, where) of the checkpoint's training data; ({}, "") when no info.json is found.

    ``dataset_root``: the dataset directory or its meta/info.json (default: ``dataset.root`` of the
    checkpoint's train_config.json). A LeRobot info.json without ``units`` gives LeRobot's default."""
    info_path = None
    if dataset_root:
        p = Path(dataset_root).expanduser()
        info_path = p if p.suffix == ".json" else p / "meta" / "info.json"
        if not info_path.is_file():
            raise DeploymentError(f"dataset_root {dataset_root}: {info_path} does not exist")
    else:
        ckpt = Path(checkpoint_dir)
        for cand in (ckpt / "train_config.json", ckpt.parent / "train_config.json"):
            try:
                root = (json.loads(cand.read_text()).get("dataset") or {}).get("root")
            except (OSError, ValueError, AttributeError):
                continue
            if root and (Path(root) / "meta" / "info.json").is_file():
                info_path = Path(root) / "meta" / "info.json"
                break
    if info_path is None:
        return {}, ""
    try:
        feats = json.loads(info_path.read_text()).get("features") or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise DeploymentError(f"{info_path}: cannot read the dataset's features: {exc}") from None
    out = {}
    for key in (STATE, ACTION):
        if key in feats:
            out[key] = feats[key].get("units", LEROBOT_DEFAULT_UNITS)
    return out, str(info_path)


def fit_checkpoint(
    deployment: Deployment, policy_config, dataset_root: str | Path = "", units_override: str = ""
) -> dict:
    """Check a checkpoint against the contract as the policy node does; returns the units of its training
    data ({} when no info.json says). ``units_override``: the node's dataset_units parameter."""
    trained, where = dataset_units(policy_config.path, dataset_root)
    if units_override:
        trained = {k: units_override for k in (STATE, ACTION)}
        where = "parameter dataset_units"
    check_checkpoint(deployment, policy_config, trained, where)
    return trained


def check_checkpoint(
    deployment: Deployment,
    policy_config,
    trained_units: Mapping[str, str | list[str]] | None = None,
    units_source: str = "",
) -> None:
    """Raise DeploymentError naming the first feature whose name, shape or units differ."""
    pc = policy_config
    where = f"checkpoint {pc.path}"
    for key, feature in pc.input_features.items():
        if key == STATE:
            got = len(deployment.state.joints)
            if feature.shape[0] != got:
                raise DeploymentError(
                    f"{where}: {STATE} has shape {tuple(feature.shape)} but the contract "
                    f"({deployment.source}) gives {got} joints {list(deployment.state.joints)}"
                )
        elif key.startswith(IMAGE_PREFIX):
            if key not in deployment.image_topics:
                raise DeploymentError(
                    f"{where}: input {key} is not a feature of the contract ({deployment.source}), which "
                    f"has {sorted(deployment.image_topics) or 'no images'}"
                )
        elif key == ENV_STATE:
            if deployment.env_state is None:
                raise DeploymentError(
                    f"{where}: input {ENV_STATE} is not a feature of the contract ({deployment.source})"
                )
            if feature.shape[0] != deployment.env_state[2]:
                raise DeploymentError(
                    f"{where}: {ENV_STATE} has shape {tuple(feature.shape)} but the contract "
                    f"({deployment.source}) gives {deployment.env_state[2]} values from {deployment.env_state[0]}"
                )
        else:
            raise DeploymentError(f"{where}: input {key} cannot be fed from a contract ({deployment.source})")
    if pc.action_dim != len(deployment.action.joints):
        raise DeploymentError(
            f"{where}: {ACTION} has shape ({pc.action_dim},) but the contract ({deployment.source}) gives "
            f"{len(deployment.action.joints)} joints {list(deployment.action.joints)}"
        )
    for key, names, vmap in (
        (STATE, pc.state_names, deployment.state),
        (ACTION, pc.action_names, deployment.action),
    ):
        if names is None:
            continue
        stripped = tuple(_strip(n) for n in names)
        if stripped != vmap.joints:
            bad = next((i for i, (a, b) in enumerate(zip(stripped, vmap.joints, strict=False)) if a != b), 0)
            raise DeploymentError(
                f"{where}: {key} names {list(names)} differ from the contract's {list(vmap.joints)} "
                f"(first at index {bad}) ({deployment.source})"
            )
    for key, vmap in ((STATE, deployment.state), (ACTION, deployment.action)):
        trained = (trained_units or {}).get(key)
        if trained is not None and trained != vmap.units:
            raise DeploymentError(
                f"{where}: {key} was trained in units {trained!r} ({units_source}) but the contract "
                f"({deployment.source}) gives {vmap.units!r}: set 'units' (and for normalized a "
                "'calibration_file') in the contract to the dataset's"
            )
