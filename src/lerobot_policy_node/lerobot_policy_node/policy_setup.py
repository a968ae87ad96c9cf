"""The policy node's parameters and what they set up: the parameters declared with descriptions and
ranges and read once into a frozen config (``read_parameters``, the one function here that takes the
node); the checkpoint loaded and fitted to the robot (contract or parameters: joints, units, fps),
ready for the controller (``set_up``, no ROS)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lerobot_core.command import COMMAND_INTERFACES
from lerobot_core.contract import UNITS, Contract
from lerobot_core.robots import SO_JOINTS, get_robot_spec
from lerobot_core.ros.params import declare
from lerobot_core.safety import SafetyLimits
from lerobot_runtime import load_policy, read_policy_config

from .action_path import scheduler_config
from .action_queue import QUEUE_MODES, SchedulerConfig
from .controller import joint_mapper
from .deployment import LEROBOT_DEFAULT_UNITS, Deployment, fit_checkpoint, from_contract
from .observation import ENV_STATE_KEY, ObservationBuilder, ObservationSpec
from .remote import INFERENCE_MODES, ConfigOnlyPolicy

IMAGE_TRANSPORTS = ("raw", "compressed")


@dataclass(frozen=True)
class PolicyNodeConfig:
    policy_path: str
    device: str
    task: str
    task_topic: str
    fps: float
    interpolation_multiplier: int
    queue_mode: str
    rtc: bool
    refill_threshold: float
    n_action_steps: int
    temporal_ensemble_coeff: float
    command_interface: str
    joint_names: list[str]
    joint_units: str
    robot: str
    joint_lower_limits: list[float]
    joint_upper_limits: list[float]
    max_step_rad: float
    max_observation_age_s: float
    run_on_activate: bool
    publish_chunks: bool
    torch_threads: int
    control_priority: int
    autostart: bool
    exit_on_failure: bool
    contract: str = ""
    dataset_root: str = ""
    dataset_units: str = ""
    inference: str = "local"
    remote_chunk_topic: str = "policy/remote_chunk"
    max_chunk_age_s: float = 0.5
    source_timeout_s: float = 1.0
    link_delay_ms: float = 0.0
    link_loss_percent: float = 0.0
    image_codec_roundtrip: bool = False
    image_transport: str = "raw"


@dataclass(frozen=True)
class PolicySetup:
    """A loaded checkpoint with what the controller needs to run it on this robot."""

    policy: Any
    deployment: Deployment | None  # from the contract parameter
    fps: float
    scheduler: SchedulerConfig
    joints: list[str]  # command order
    action_names: list[str]
    observation: ObservationBuilder
    limits: SafetyLimits
    action_to_joint: Callable


def read_parameters(node) -> PolicyNodeConfig:
    """Declare the node's parameters (descriptions, ranges) and read them once; a bad value is a
    ValueError naming the parameter."""
    p = partial(declare, node)
    cfg = PolicyNodeConfig(
        policy_path=p(
            "policy_path",
            "",
            "checkpoint directory as LeRobot saves it (pretrained_model/), or a Hub id org/name "
            "(from the Hugging Face cache; offline with HF_HUB_OFFLINE=1)",
        ),
        device=p("device", "cpu", "torch device for inference (cpu, cuda, ...)"),
        task=p("task", "", "task string for language-conditioned policies", read_only=False),
        task_topic=p("task_topic", "", "std_msgs/String topic that sets the task; empty = parameter only"),
        fps=p("fps", 30.0, "policy action rate = the training dataset's fps [Hz]", range=(1.0, 1000.0)),
        interpolation_multiplier=p(
            "interpolation_multiplier",
            1,
            "commands per policy action (linear interpolation); control rate = fps x this",
            range=(1, 20),
        ),
        queue_mode=p(
            "queue_mode",
            "replace",
            f"chunk merging: {' | '.join(QUEUE_MODES)} (replace = RTC-style, skips the delay)",
        ),
        rtc=p(
            "rtc",
            True,
            "real-time chunking (LeRobot's --rtc.enabled): infer the next chunk while the queue plays "
            "out (from refill_threshold) and merge it with the remainder (queue_mode), so a policy slower "
            "than the control period does not stall the robot; false = LeRobot's synchronous loop, the "
            "robot holds at each chunk's end until the next chunk is inferred",
        ),
        refill_threshold=p(
            "refill_threshold",
            0.5,
            "with rtc: infer the next chunk when queue <= this x n_action_steps",
            range=(0.0, 1.0),
        ),
        n_action_steps=p("n_action_steps", 0, "actions used per chunk; 0 = the checkpoint's n_action_steps"),
        temporal_ensemble_coeff=p(
            "temporal_ensemble_coeff", 0.01, "ACT temporal ensembling coefficient (queue_mode ensemble)"
        ),
        command_interface=p(
            "command_interface", "joint_state", f"command output: {' | '.join(COMMAND_INTERFACES)}"
        ),
        joint_names=p(
            "joint_names",
            list(SO_JOINTS),
            "robot joints in the policy's state/action order (names as LeRobot spells them)",
        ),
        joint_units=p(
            "joint_units", "rad", "units the policy was trained in: rad | deg (ROS side is always rad)"
        ),
        robot=p(
            "robot",
            "so101_follower",
            "robot type for default joint limits (lerobot_core.robots); empty = none",
        ),
        joint_lower_limits=p(
            "joint_lower_limits", [0.0], "lower joint limits [rad]; [0.0] = from the robot type"
        ),
        joint_upper_limits=p(
            "joint_upper_limits", [0.0], "upper joint limits [rad]; [0.0] = from the robot type"
        ),
        max_step_rad=p(
            "max_step_rad",
            0.05,
            "max change of any joint command per control step [rad]; 0 = none here, another node bounds "
            "the steps (HIL: the control arbiter)",
            range=(0.0, 10.0),
        ),
        max_observation_age_s=p(
            "max_observation_age_s",
            0.5,
            "older observations -> hold the last command [s]",
            range=(0.001, 60.0),
        ),
        run_on_activate=p(
            "run_on_activate",
            True,
            "command the robot as soon as the node is active (else wait for policy/run)",
        ),
        publish_chunks=p("publish_chunks", True, "publish every inferred chunk on policy/action_chunk"),
        torch_threads=p("torch_threads", 0, "torch intra-op threads for inference; 0 = torch default"),
        control_priority=p(
            "control_priority",
            50,
            "SCHED_FIFO priority of the control thread (1-99) where permitted (CAP_SYS_NICE or an "
            "rtprio limit; else normal scheduling with a warning); 0 = normal scheduling",
            range=(0, 99),
        ),
        autostart=p("autostart", False, "configure and activate right after start"),
        exit_on_failure=p(
            "exit_on_failure",
            False,
            "autostart: exit (code 1) when configure or activate fails, so a launcher whose graph needs "
            "the policy stops with the reason; false = stay up for policy/load_policy",
        ),
        contract=p(
            "contract",
            "",
            "the recorder's contract (a YAML path, or a shipped one's name): input topics, joint order, "
            "units and fps as recorded (replaces joint_names, joint_units and fps); empty = those parameters",
        ),
        dataset_root=p(
            "dataset_root",
            "",
            "training dataset (dir or meta/info.json) whose units the contract is checked against; "
            "empty = dataset.root of the checkpoint's train_config.json",
        ),
        dataset_units=p(
            "dataset_units",
            "",
            f"units of the training data when info.json does not say: {' | '.join(UNITS)}; empty = "
            f"from info.json ({LEROBOT_DEFAULT_UNITS} for a dataset recorded by LeRobot)",
        ),
        inference=p(
            "inference",
            "local",
            f"{' | '.join(INFERENCE_MODES)}: local = this node infers and commands; remote = it commands the "
            "robot from chunks received on remote_chunk_topic (no model loaded, only its config); serve = "
            "it infers from the robot's topics and publishes chunks there, commanding nothing",
        ),
        remote_chunk_topic=p(
            "remote_chunk_topic",
            "policy/remote_chunk",
            "lerobot_msgs/ActionChunk topic between the two hosts",
        ),
        max_chunk_age_s=p(
            "max_chunk_age_s",
            0.5,
            "remote: a chunk whose observation is older than this on the robot's clock is never executed [s]",
            range=(0.001, 60.0),
        ),
        source_timeout_s=p(
            "source_timeout_s",
            1.0,
            "remote: an inference host silent this long is released (another may drive) [s]",
            range=(0.01, 600.0),
        ),
        link_delay_ms=p(
            "link_delay_ms",
            0.0,
            "serve: added round-trip delay, injected by this node (half on the observations it reads, half "
            "on the chunks it publishes) to test a slow link [ms]",
            range=(0.0, 10000.0),
        ),
        link_loss_percent=p(
            "link_loss_percent",
            0.0,
            "serve: share of observation messages and of chunks this node drops, to test a lossy link [%]",
            range=(0.0, 100.0),
        ),
        image_transport=p(
            "image_transport",
            "raw",
            f"{' | '.join(IMAGE_TRANSPORTS)}: compressed = read each camera's <topic>/compressed (JPEG, what the "
            "camera nodes publish with publish_compressed and the sims on demand) instead of raw frames, as "
            "an inference host on a link does (docs/remote_inference.md); a contract's compressed camera stays",
        ),
        image_codec_roundtrip=p(
            "image_codec_roundtrip",
            False,
            "pass each camera frame through the dataset's video codec and back (libsvtav1 crf 30, keyframe "
            "every 2 frames, as recorded) before the policy sees it, so it is served what it trained on; "
            "about 10 ms per 96x128 frame (docs/closed_loop.md, train/serve skew)",
        ),
    )
    if cfg.inference not in INFERENCE_MODES:
        raise ValueError(f"parameter inference={cfg.inference!r}: use one of {INFERENCE_MODES}")
    if cfg.image_transport not in IMAGE_TRANSPORTS:
        raise ValueError(f"parameter image_transport={cfg.image_transport!r}: use one of {IMAGE_TRANSPORTS}")
    if cfg.command_interface not in COMMAND_INTERFACES:
        raise ValueError(
            f"parameter command_interface={cfg.command_interface!r}: use one of {tuple(COMMAND_INTERFACES)}"
        )
    if cfg.queue_mode not in QUEUE_MODES:
        raise ValueError(f"parameter queue_mode={cfg.queue_mode!r}: use one of {QUEUE_MODES}")
    if cfg.joint_units not in ("rad", "deg"):
        raise ValueError(f"parameter joint_units={cfg.joint_units!r}: use rad or deg")
    if cfg.dataset_units and cfg.dataset_units not in UNITS:
        raise ValueError(f"parameter dataset_units={cfg.dataset_units!r}: use one of {UNITS} or ''")
    return cfg


def safety_limits(c: PolicyNodeConfig, joint_names: list[str], warn: Callable[[str], None]) -> SafetyLimits:
    """joint_lower/upper_limits when they name every joint, else the robot type's; the per-step bound (none
    for max_step_rad 0)."""
    n = len(joint_names)
    lower = c.joint_lower_limits if len(c.joint_lower_limits) == n else None
    upper = c.joint_upper_limits if len(c.joint_upper_limits) == n else None
    if (lower is None or upper is None) and c.robot:
        try:
            spec = get_robot_spec(c.robot)
            lower = lower or [spec.limits[j].lower if j in spec.limits else -np.inf for j in joint_names]
            upper = upper or [spec.limits[j].upper if j in spec.limits else np.inf for j in joint_names]
        except (KeyError, ValueError) as exc:
            warn(f"no joint limits from robot {c.robot!r} ({exc}); commands are only rate-limited")
    # 0: no per-step bound here (HIL: the control arbiter bounds every source's steps, once); the joint
    # limits and the refusal of non-finite actions stay
    return SafetyLimits.build(n, lower, upper, c.max_step_rad or float("inf"))


def set_up(cfg: PolicyNodeConfig, path: str, device: str, warn: Callable[[str], None]) -> PolicySetup:
    """Load the checkpoint at ``path`` and fit it to the robot (the contract's or the parameters' joints,
    units and fps); PolicyLoadError or ValueError say what does not fit."""
    if cfg.torch_threads > 0:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    deployment: Deployment | None = None
    if cfg.contract:
        deployment = from_contract(Contract.load(cfg.contract))
    remote = cfg.inference == "remote"  # the model runs elsewhere: its config is enough here
    policy = (
        ConfigOnlyPolicy(read_policy_config(path)[1]) if remote else load_policy(path, device=device or "cpu")
    )
    pc = policy.config
    fps = float(deployment.fps) if deployment else cfg.fps
    if deployment is not None:
        trained = fit_checkpoint(deployment, pc, cfg.dataset_root, cfg.dataset_units)
        if not trained:
            warn(
                f"units of {pc.path}'s training data unknown (no dataset info.json found): "
                f"assuming the contract's {deployment.state.units!r}; set dataset_root to check"
            )
    sched = scheduler_config(
        pc,
        fps,
        cfg.queue_mode,
        n_action_steps=cfg.n_action_steps,
        refill_threshold=cfg.refill_threshold,
        rtc=cfg.rtc,
        interpolation_multiplier=cfg.interpolation_multiplier,
        ensemble_coeff=cfg.temporal_ensemble_coeff,
    )
    joints = list(deployment.action.joints) if deployment else list(cfg.joint_names)
    state = pc.state_feature
    state_names = [n[:-4] if n.endswith(".pos") else n for n in (pc.state_names or joints)]
    if deployment is not None:
        state_names = list(deployment.state.joints)
    if state is not None and len(state_names) != state.shape[0]:
        raise ValueError(
            f"the policy's observation.state has {state.shape[0]} values but joint_names has "
            f"{len(state_names)}: set joint_names to the policy's state order"
        )
    action_names = list(pc.action_names or joints)
    if deployment is not None:
        action_names = list(deployment.action.joints)
    if len(action_names) != pc.action_dim:
        raise ValueError(
            f"the policy's action has {pc.action_dim} values but joint_names has {len(action_names)}"
        )
    obs = ObservationBuilder(
        ObservationSpec(
            state_names=tuple(state_names),
            image_shapes={} if remote else dict(pc.image_features),  # remote: the joints, for safety
            fps=fps,
            max_age_s=cfg.max_observation_age_s,
            deg=cfg.joint_units == "deg",
            state_affine=(deployment.state.scale, deployment.state.offset) if deployment else None,
            env_state_dim=0 if remote else env_state_dim(pc, deployment),
        )
    )
    return PolicySetup(
        policy=policy,
        deployment=deployment,
        fps=fps,
        scheduler=sched,
        joints=joints,
        action_names=action_names,
        observation=obs,
        limits=safety_limits(cfg, joints, warn),
        action_to_joint=joint_mapper(
            action_names,
            joints,
            deg=cfg.joint_units == "deg",
            to_radians=deployment.action.to_radians if deployment else None,
        ),
    )


def env_state_dim(pc, deployment) -> int:
    """The checkpoint's observation.environment_state size; it needs a contract that names its topic."""
    feature = pc.input_features.get(ENV_STATE_KEY)
    if feature is None:
        return 0
    if deployment is None or deployment.env_state is None:
        raise ValueError(
            "the policy takes observation.environment_state: deploy it with contract:= naming that "
            "feature's topic (e.g. the shipped so101_sim_env_state_contract)"
        )
    return int(feature.shape[0])
