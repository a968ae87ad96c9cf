"""Evaluation core (ROS-free): policies for the loop, LeRobot's eval metrics, mp4 writing.

The transport is abstract: :func:`run_episodes` drives anything with ``reset(seed) -> obs`` and
``step(action) -> (obs, EpisodeState)``; ``lerobot-sim-eval`` passes a ROS client of a sim process,
the tests can pass an in-process :class:`LocalEnvTransport`.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from lerobot_sim.session import EpisodeState, SimSession, episode_outcome, lerobot_observation_keys


class EvaluationError(RuntimeError):
    """The evaluation could not go on (sim gone for good, bad policy, bad arguments)."""


class SimGoneError(EvaluationError):
    """The sim failed for good: it died or went silent more often than the restarts allowed."""


class SimUnavailableError(RuntimeError):
    """The simulation stopped answering or died; the episode may be retried on a restarted sim."""


# ---------------------------------------------------------------------- policies
class Policy(Protocol):
    def reset(self, seed: int | None) -> None: ...

    def select_action(self, observation: dict[str, Any]) -> np.ndarray: ...


class ScriptedPolicy:
    """The SO-101 cube expert; needs observation.state and observation.environment_state (cube pose)."""

    def __init__(self, fps: int = 30):
        from lerobot_sim.expert import ScriptedExpert

        self.expert = ScriptedExpert(fps=fps)

    def reset(self, seed: int | None) -> None:
        self.expert.reset()

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        if "observation.environment_state" not in observation:
            raise EvaluationError(
                "the scripted policy needs the cube pose (observation.environment_state): SO-101 sim only"
            )
        return self.expert.act(observation["observation.state"], observation["observation.environment_state"])


class RandomPolicy:
    """Uniform samples of the action space, seeded per episode (same seed, same actions)."""

    def __init__(self, action_space):
        self.space = action_space

    def reset(self, seed: int | None) -> None:
        self.space.seed(seed)

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        return np.asarray(self.space.sample(), dtype=np.float64)


class CheckpointPolicy:
    """A LeRobot checkpoint through lerobot_policy_node's action path (history, chunk scheduling),
    the one the policy node runs, in lockstep: one observation and one action per env step."""

    def __init__(self, path: str, device: str = "cpu", fps: float = 30.0, policy=None):
        """policy: the runtime policy of `path` when already built (default: `load_policy(path)`)."""
        try:
            from lerobot_policy_node.action_path import ActionPath, scheduler_config
            from lerobot_runtime import NonFiniteActionError, PolicyLoadError, load_policy
        except ImportError as exc:
            raise EvaluationError(
                f"--policy {path}: loading checkpoints needs lerobot_runtime, not importable ({exc})"
            ) from exc
        try:
            policy = policy or load_policy(path, device=device)
        except PolicyLoadError as exc:
            raise EvaluationError(f"--policy {path}: {exc}") from exc
        self.config = policy.config
        self._non_finite = NonFiniteActionError
        # refill only when empty, as LeRobot's select_action does
        self.path = ActionPath(policy, scheduler_config(self.config, fps, refill_threshold=0.0), self._batch)

    def reset(self, seed: int | None) -> None:
        self.path.reset()

    def _batch(self, observation: dict[str, Any]) -> dict[str, Any]:
        """One env observation as (1, ...) policy inputs: images HWC uint8 -> CHW float in [0, 1]."""
        from lerobot_policy_node.observation import rgb_to_chw_float

        batch: dict[str, Any] = {}
        for name in self.config.input_features:
            if name not in observation:
                raise EvaluationError(
                    f"policy input {name!r} is not in the sim's observation ({sorted(observation)})"
                )
            value = np.asarray(observation[name])
            if name in self.config.image_features and value.ndim == 3 and value.dtype == np.uint8:
                value = rgb_to_chw_float(value, self.config.image_features[name])
            batch[name] = value.astype(np.float32)[None]
        return batch

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        try:
            return self.path.step(observation)
        except self._non_finite as exc:  # the policy's fault: no sim restart can help
            raise EvaluationError(f"the policy failed, not the sim: {exc}") from exc


class CodecRoundTripPolicy:
    """`policy` served its camera frames as the dataset's video holds them: every HxWx3 uint8 image of an
    observation passes through the recorder's codec and back (lerobot_dataset.roundtrip), one stream per
    camera, restarted with each episode as a recorded video is."""

    def __init__(self, policy: Policy, fps: int = 30):
        self.policy, self.fps = policy, fps
        self._streams: dict[str, Any] = {}

    def reset(self, seed: int | None) -> None:
        self._streams.clear()
        self.policy.reset(seed)

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        from lerobot_dataset.roundtrip import CodecRoundTrip

        served = dict(observation)
        for key, value in observation.items():
            if (
                isinstance(value, np.ndarray)
                and value.dtype == np.uint8
                and value.ndim == 3
                and value.shape[2] == 3
            ):
                stream = self._streams.setdefault(key, CodecRoundTrip(fps=self.fps))
                served[key] = stream(value)
        return self.policy.select_action(served)


class RecordingPolicy:
    """A policy whose actions are kept per episode (``actions[i]``: (steps, dim)), for comparisons."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.actions: list[list[np.ndarray]] = []

    def reset(self, seed: int | None) -> None:
        self.policy.reset(seed)
        self.actions.append([])

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        action = np.asarray(self.policy.select_action(observation), dtype=np.float64)
        self.actions[-1].append(action.copy())
        return action

    def episode_actions(self) -> list[np.ndarray]:
        return [np.stack(a) if a else np.zeros((0, 0)) for a in self.actions]


def make_policy(spec: str, action_space=None, fps: int = 30) -> Policy:
    if spec == "scripted":
        return ScriptedPolicy(fps=fps)
    if spec == "random":
        if action_space is None:
            raise EvaluationError("--policy random needs the environment's action space")
        return RandomPolicy(action_space)
    from lerobot_core.hub import is_repo_id

    if os.path.isdir(spec) or is_repo_id(spec):  # a Hub id resolves from the Hugging Face cache
        return CheckpointPolicy(spec, fps=fps)
    raise EvaluationError(
        f"--policy {spec!r}: expected a checkpoint directory, a Hub id (org/name), 'scripted' or 'random'"
    )


# ---------------------------------------------------------------------- metrics
@dataclass
class EpisodeMetrics:
    episode_index: int
    seed: int
    sum_reward: float
    max_reward: float
    success: bool
    steps: int
    duration_s: float
    restarts: int = 0  # times the sim had to be restarted for this episode
    ended: str = (
        ""  # success | timeout (the env's limit or --max-steps) | terminated (session.episode_outcome)
    )


def aggregate(episodes: list[EpisodeMetrics], eval_s: float) -> dict[str, float]:
    """LeRobot's aggregated metrics: pc_success (percent), avg_sum_reward, avg_max_reward, eval_s, eval_ep_s."""
    n = len(episodes)
    if n == 0:
        return {
            "avg_sum_reward": math.nan,
            "avg_max_reward": math.nan,
            "pc_success": math.nan,
            "eval_s": eval_s,
            "eval_ep_s": math.nan,
        }
    return {
        "avg_sum_reward": float(np.mean([e.sum_reward for e in episodes])),
        "avg_max_reward": float(np.mean([e.max_reward for e in episodes])),
        "pc_success": float(100.0 * np.mean([e.success for e in episodes])),
        "eval_s": float(eval_s),
        "eval_ep_s": float(eval_s / n),
    }


def metrics_document(
    episodes: list[EpisodeMetrics], eval_s: float, video_paths: list[str], meta: dict
) -> dict:
    """The metrics.json layout: LeRobot's per_episode / aggregated / video_paths, plus our run metadata."""
    per_episode = [
        {
            "episode_ix": e.episode_index,
            "sum_reward": e.sum_reward,
            "max_reward": e.max_reward,
            "success": e.success,
            "seed": e.seed,
            "steps": e.steps,
            "restarts": e.restarts,
            "ended": e.ended,
        }
        for e in episodes
    ]
    return {
        "per_episode": per_episode,
        "aggregated": aggregate(episodes, eval_s),
        "video_paths": video_paths,
        "meta": meta,
    }


def write_metrics(path: str, document: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2)
    os.replace(tmp, path)  # never a half-written metrics file


# ---------------------------------------------------------------------- videos
class VideoWriter:
    """mp4 (H.264 via PyAV) of one episode; frames of several cameras are placed side by side."""

    def __init__(self, path: str, fps: float):
        import av

        self.path = path
        self._av = av
        self._fps = int(round(fps))
        self._container = None
        self._stream = None

    def add(self, frames: list[np.ndarray]) -> None:
        frame = frames[0] if len(frames) == 1 else _side_by_side(frames)
        h, w = frame.shape[:2]
        if self._container is None:
            self._container = self._av.open(self.path, mode="w")
            self._stream = self._container.add_stream("libx264", rate=self._fps)
            self._stream.width, self._stream.height = w - w % 2, h - h % 2
            self._stream.pix_fmt = "yuv420p"
        frame = np.ascontiguousarray(frame[: self._stream.height, : self._stream.width])
        for packet in self._stream.encode(self._av.VideoFrame.from_ndarray(frame, format="rgb24")):
            self._container.mux(packet)

    def close(self) -> None:
        if self._container is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
            self._container.close()
            self._container = None


def _side_by_side(frames: list[np.ndarray]) -> np.ndarray:
    h = max(f.shape[0] for f in frames)
    padded = [np.pad(f, ((0, h - f.shape[0]), (0, 0), (0, 0))) for f in frames]
    return np.concatenate(padded, axis=1)


# ---------------------------------------------------------------------- the loop
class Transport(Protocol):
    fps: float

    def reset(self, seed: int) -> dict[str, Any]: ...

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], EpisodeState]: ...


@dataclass(frozen=True)
class EvalSettings:
    n_episodes: int
    seed: int = 0
    max_steps: int = 0  # 0 = until the env terminates or truncates
    video_dir: str = ""
    max_restarts: int = 2  # per episode


def run_episodes(
    transport_factory: Callable[[], Transport],
    policy: Policy,
    settings: EvalSettings,
    on_step: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] = print,
    done: list[EpisodeMetrics] | None = None,
) -> tuple[list[EpisodeMetrics], float, list[str]]:
    """Run the episodes; a transport that raises SimUnavailableError is rebuilt and the episode rerun.

    done: a list the finished episodes are appended to as they end (the caller keeps them when a later
    episode fails)."""
    if settings.n_episodes <= 0:
        raise EvaluationError(f"n_episodes must be positive, got {settings.n_episodes}")
    episodes: list[EpisodeMetrics] = [] if done is None else done
    videos: list[str] = []
    transport = None
    t0 = time.perf_counter()
    try:
        for i in range(settings.n_episodes):
            seed = settings.seed + i
            restarts = 0
            while True:
                try:
                    if transport is None:
                        transport = transport_factory()
                    metrics, video = _one_episode(transport, policy, i, seed, settings, on_step)
                    break
                except SimUnavailableError as exc:
                    restarts += 1
                    _close(transport)
                    transport = None
                    if restarts > settings.max_restarts:
                        raise SimGoneError(
                            f"episode {i} (seed {seed}): the sim failed {restarts} times, giving up: {exc}"
                        ) from exc
                    log(f"episode {i} (seed {seed}): sim unavailable ({exc}); restarting it ({restarts})")
            metrics.restarts = restarts
            episodes.append(metrics)
            if video:
                videos.append(video)
            log(
                f"episode {i} seed {seed}: {metrics.ended}, success={metrics.success} "
                f"sum_reward={metrics.sum_reward:.3f} max_reward={metrics.max_reward:.3f} steps={metrics.steps}"
            )
    finally:
        _close(transport)  # also on errors and Ctrl-C: never leave a sim process behind
    return episodes, time.perf_counter() - t0, videos


def _close(transport) -> None:
    close = getattr(transport, "close", None)
    if close is not None:
        close()


def _one_episode(transport, policy, index, seed, settings, on_step):
    t0 = time.perf_counter()
    obs = transport.reset(seed)
    policy.reset(seed)
    writer = None
    path = ""
    if settings.video_dir:
        os.makedirs(settings.video_dir, exist_ok=True)
        path = os.path.join(settings.video_dir, f"eval_episode_{index}.mp4")
        writer = VideoWriter(path, transport.fps)
    ep = EpisodeState(episode_index=index, seed=seed)
    try:
        _add_frames(writer, obs)
        step = 0
        while True:
            action = _policy_action(policy, obs, index, seed, step)
            obs, ep = transport.step(action)
            step += 1
            _add_frames(writer, obs)
            if on_step:
                on_step(index, step)
            step_limit = bool(settings.max_steps and step >= settings.max_steps)
            if ep.terminated or ep.truncated or step_limit:
                break
    finally:
        if writer:
            writer.close()
    return (
        EpisodeMetrics(
            episode_index=index,
            seed=seed,
            sum_reward=ep.sum_reward,
            max_reward=ep.max_reward if math.isfinite(ep.max_reward) else 0.0,
            success=bool(ep.is_success),
            steps=ep.step,
            duration_s=time.perf_counter() - t0,
            ended=episode_outcome(ep, step_limit),
        ),
        path,
    )


def _policy_action(policy, obs, index: int, seed: int, step: int) -> np.ndarray:
    """The policy's next action, checked before the sim sees it: a NaN or inf action is the policy's
    fault (EvaluationError, no sim restart), never sent to the sim."""
    where = f"episode {index} (seed {seed}), step {step}"
    try:
        action = policy.select_action(obs)
    except EvaluationError as exc:
        raise EvaluationError(f"{where}: {exc}") from exc
    values = np.asarray(action, dtype=np.float64)
    if not np.isfinite(values).all():
        raise EvaluationError(
            f"{where}: the policy output a non-finite action ({int((~np.isfinite(values)).sum())} NaN/inf "
            f"value(s) of {values.size}); it was not sent to the sim: the policy is at fault, not the sim"
        )
    return action


def _add_frames(writer, obs) -> None:
    if writer is None:
        return
    frames = [v for k, v in sorted(obs.items()) if k.startswith("observation.image")]
    if frames:
        writer.add(frames)


class LocalEnvTransport:
    """The same loop without ROS: the env in this process (reference for tests and the benchmark).

    ``safety``: the command safety the sim node applies (``lerobot_sim.command.so101_safety``), so an
    in-process run steps the env with the very targets a ROS-served run would."""

    def __init__(self, session: SimSession, env_state: bool = True, safety=None):
        self.session = session
        self.fps = session.fps
        self._env_state = env_state
        self.safety = safety
        self._target: np.ndarray | None = None

    def _obs(self, raw) -> dict[str, Any]:
        obs = lerobot_observation_keys(raw)
        unwrapped = self.session.env.unwrapped
        if (
            self._env_state
            and "observation.environment_state" not in obs
            and hasattr(unwrapped, "environment_state")
        ):
            obs["observation.environment_state"] = unwrapped.environment_state()
        return obs

    def reset(self, seed: int) -> dict[str, Any]:
        obs = self._obs(self.session.reset(seed).observation)
        if self.safety is not None:  # as the sim node: the first target is where the arm is
            self._target = np.asarray(self.session.env.unwrapped.joint_positions(), dtype=np.float64)
        return obs

    def step(self, action):
        if self.safety is not None:
            self._target = action = self.safety.apply(action, self._target)
        result = self.session.step(action)
        return self._obs(result.observation), result.episode

    def close(self) -> None:
        self.session.close()


def settings_dict(settings: EvalSettings) -> dict:
    return asdict(settings)
