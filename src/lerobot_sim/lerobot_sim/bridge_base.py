"""Shared ROS adapter of the sim node and the gym bridge: a lifecycle node around a :class:`SimSession`.

Publishes the observation on the real robot's topics, steps on commands (lockstep) or on a timer
(realtime), serves ``sim/reset`` and publishes ``sim/episode_info``. Subclasses say how commands become
actions (:meth:`SimBridgeNode._setup_commands`) and may add topics (:meth:`_publish_extra`).

In lockstep mode :func:`run_node` spins the node with a :class:`LockstepCommandLoop` (lockstep.py).
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from dataclasses import replace
from typing import Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import CameraInfo, JointState
from std_msgs.msg import Float64MultiArray, Header

from lerobot_core.dds_transport import use_large_image_transport
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node as _run_node
from lerobot_core.ros.params import declare
from lerobot_core.time import stamp_to_ns
from lerobot_msgs.msg import EpisodeInfo
from lerobot_msgs.srv import ResetSim
from lerobot_sim.bridge_config import BridgeConfig, common_parameters, read_bridge_config
from lerobot_sim.bridge_publish import ObservationPublishing
from lerobot_sim.lockstep import LockstepCommandLoop
from lerobot_sim.session import SimSession, StepResult, episode_summary, make_env

# Reliable on purpose: in lockstep every observation is awaited by the evaluator; a reliable publisher
# still serves best-effort subscribers.
QOS_STATE = qos.RELIABLE
QOS_IMAGE = qos.IMAGES
QOS_COMMAND = qos.RELIABLE
QOS_LATCHED = qos.LATCHED
# sim/tick_ack: std_msgs/Header, frame_id = the consumer's name, stamp = the newest sim time it has taken
# in completely; a stamp of TICK_ACK_RELEASE says it needs no more ticks (it finished)
TICK_ACK_TOPIC = "sim/tick_ack"
TICK_ACK_RELEASE = Time(sec=2**31 - 1, nanosec=0)


class SimBridgeNode(ObservationPublishing, LifecycleNode):
    """Base class; see module docstring."""

    default_env_id = ""
    default_state_names: tuple[str, ...] = ()

    def __init__(self, node_name: str, **kwargs):
        super().__init__(node_name, **kwargs)
        self._command_loop: LockstepCommandLoop | None = None
        self._declare_common()
        self._declare_extra()
        self.cfg: BridgeConfig | None = None
        self.session: SimSession | None = None
        self._active = False
        self._pubs: dict[str, Any] = {}
        self._cam_pubs: dict[str, tuple[Any, Any, Any]] = {}  # image_raw, camera_info, compressed
        self._subs: list[Any] = []
        self._srv = None
        self._timer = None
        self._diag_timer = None
        self._last_command_time = 0.0
        self._done_since: float | None = None
        self._target: np.ndarray | None = None
        self._steps_done = 0
        self._late_periods = 0  # realtime: control periods skipped because a step overran its period
        self._rt_origin = 0.0
        self._rt_slot = 0
        self._t_start = time.monotonic()
        self._camera_infos: dict[str, CameraInfo] = {}
        self._last_result: StepResult | None = None
        self._last_publish = 0.0
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        # lockstep: a command waits here until every required consumer took in the current tick
        self._pending_action: np.ndarray | None = None
        self._acks: dict[str, int] = {}  # consumer -> newest acknowledged sim time [ns]
        self._seen_consumers: set[str] = set()
        self._missing: set[str] = set()  # consumers gone from the graph at the last watch
        self._watch_timer = None
        self.fatal_error = ""  # why the node stopped itself (run_node exits non-zero with it)

    def lockstep_loop(self) -> LockstepCommandLoop:
        """The node's :class:`LockstepCommandLoop`; from the next configure on, its lockstep command
        subscriptions are served by it. Spin the node with ``loop.spin()`` then (as :func:`run_node`
        does in lockstep mode); a node spun by a plain executor serves its commands through that one."""
        if self._command_loop is None:
            self._command_loop = LockstepCommandLoop(self)
        return self._command_loop

    def _command_subscription(self, msg_type, topic: str, callback) -> Any:
        """A command subscription (reliable, shallow), served by the lockstep loop when there is one."""
        group = None
        if self._command_loop is not None and self.cfg is not None and self.cfg.mode == "lockstep":
            group = self._command_loop.group
        sub = self.create_subscription(msg_type, topic, callback, QOS_COMMAND, callback_group=group)
        self._subs.append(sub)
        return sub

    def _observation_publisher(self, msg_type, topic: str, qos):
        """A publisher without rclpy's default QoS event handlers.

        Each default handler is a waitable the executor rebuilds into its wait set on every wake-up (two per
        publisher); in lockstep that is once per step, for nothing: an incompatible QoS is still reported by
        the subscriber's own handler, and the command subscriptions here keep theirs.
        """
        return self.create_publisher(
            msg_type, topic, qos, event_callbacks=PublisherEventCallbacks(use_default_callbacks=False)
        )

    # ------------------------------------------------------------------ parameters
    def _declare(self, name: str, default, description: str) -> None:
        declare(self, name, default, description)

    def _declare_common(self) -> None:
        for name, default, description in common_parameters(self.default_env_id, self.default_state_names):
            self._declare(name, default, description)

    def _declare_extra(self) -> None:
        """Subclasses declare their own parameters here."""

    def _read_config(self) -> BridgeConfig:
        return read_bridge_config(lambda name: self.get_parameter(name).value)

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            cfg = self._read_config()
            self.cfg = replace(cfg, env_kwargs=self._env_kwargs(cfg))
            env = make_env(self.cfg.env_id, self.cfg.env_kwargs)
            self.session = SimSession(env, self.cfg.fps or None)
        except Exception as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self._cleanup()
            return TransitionCallbackReturn.FAILURE
        self._pubs["joint_states"] = self._observation_publisher(JointState, "joint_states", QOS_STATE)
        self._pubs["episode_info"] = self._observation_publisher(EpisodeInfo, "sim/episode_info", QOS_STATE)
        self._pubs["state"] = self._observation_publisher(Float64MultiArray, "observation/state", QOS_STATE)
        self._pubs["env_state"] = self._observation_publisher(
            Float64MultiArray, "observation/environment_state", QOS_STATE
        )
        self._pubs["diagnostics"] = self._observation_publisher(
            DiagnosticArray, "/diagnostics", 10
        )  # one /diagnostics per system, like the drivers
        if self.cfg.mode == "lockstep" and self.cfg.publish_clock:
            self._pubs["clock"] = self._observation_publisher(ClockMsg, "/clock", QOS_LATCHED)
        if self.cfg.robot_description_file:
            with open(self.cfg.robot_description_file, encoding="utf-8") as f:
                from std_msgs.msg import String

                pub = self._observation_publisher(String, "robot_description", QOS_LATCHED)
                pub.publish(String(data=f.read()))
                self._pubs["robot_description"] = pub
        self._create_extra_publishers()
        self._setup_commands()
        if self.cfg.mode == "lockstep" and self.cfg.required_consumers:
            self._acks = {}
            self._seen_consumers = set()
            self._missing = set()
            self._command_subscription(Header, TICK_ACK_TOPIC, self._on_tick_ack)
            self._watch_timer = self.create_timer(0.5, self._watch_consumers, clock=self._steady)
            self.get_logger().info(
                f"lockstep: each tick waits for the acknowledgement of {list(self.cfg.required_consumers)} "
                f"on {TICK_ACK_TOPIC}"
            )
        if self._command_loop is not None:
            served = [s for s in self._subs if s.callback_group is self._command_loop.group]
            self._command_loop.serve(served)
            if served:
                self.get_logger().info(
                    f"lockstep: {len(served)} command subscription(s) served by their own wait set"
                )
        self._srv = self.create_service(ResetSim, "sim/reset", self._on_reset)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics, clock=self._steady)
        self.get_logger().info(
            f"configured {self.cfg.env_id} ({self.cfg.mode}, {self.session.fps:g} Hz, seed {self.cfg.seed})"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        try:
            self._reset(None)
        except Exception as exc:
            self.get_logger().error(f"activate failed: the environment did not reset: {exc}")
            self._active = False
            return TransitionCallbackReturn.FAILURE
        # Wall-clock timers: in lockstep the sim is the time source (with use_sim_time its own ROS clock
        # would only move when it steps), and realtime means wall-clock pacing. Stamps in realtime mode
        # come from the node clock, so use_sim_time is honoured there.
        if self.cfg.mode == "realtime":
            # rcl timers keep absolute deadlines (origin + k periods) and skip, not queue, the ones a
            # long step overran; _on_timer counts those skips as late periods
            self._rt_origin, self._rt_slot = time.monotonic(), 0
            self._timer = self.create_timer(1.0 / self.session.fps, self._on_timer, clock=self._steady)
        elif self.cfg.idle_republish_s > 0:
            self._timer = self.create_timer(self.cfg.idle_republish_s, self._on_idle, clock=self._steady)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        self._hold_current()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._hold_current()
        self._cleanup()
        return TransitionCallbackReturn.SUCCESS

    def _cleanup(self) -> None:
        for timer in (self._timer, self._diag_timer, self._watch_timer):
            if timer is not None:
                self.destroy_timer(timer)
        self._timer = self._diag_timer = self._watch_timer = None
        self._pending_action = None
        for pub in list(self._pubs.values()) + [p for pair in self._cam_pubs.values() for p in pair]:
            self.destroy_publisher(pub)
        self._pubs.clear()
        self._cam_pubs.clear()
        if self._command_loop is not None:
            self._command_loop.serve([])  # the loop lets go of them; destruction completes then
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs.clear()
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        if self.session is not None:
            self.session.close()
            self.session = None

    # ------------------------------------------------------------------ hooks for subclasses
    def _env_kwargs(self, cfg: BridgeConfig) -> dict[str, Any]:
        """Keyword arguments for gymnasium.make (subclasses add their own parameters)."""
        return dict(cfg.env_kwargs)

    def _create_extra_publishers(self) -> None:
        pass

    def _setup_commands(self) -> None:
        raise NotImplementedError

    def _publish_extra(self, result: StepResult, stamp: Time) -> None:
        pass

    def _hold_current(self) -> None:
        """Safe state: keep the current position as target (position-controlled robots)."""

    def _initial_target(self) -> np.ndarray | None:
        return None

    def _camera_info(self, name: str, height: int, width: int) -> CameraInfo:
        info = CameraInfo(height=height, width=width)
        return info

    # ------------------------------------------------------------------ stepping
    def _seed_for_next(self) -> int | None:
        if self.cfg.seed < 0:
            return None
        return self.cfg.seed + self.session.episode.episode_index + 1

    def _reset(self, seed: int | None, use_seed: bool = False) -> StepResult:
        result = self.session.reset(seed if use_seed else self._seed_for_next())
        self._target = self._initial_target()
        self._done_since = None
        self._publish(result)
        return result

    def _step(self, action: np.ndarray) -> None:
        """One control step with ``action``; on a finished episode, reset (auto_reset) or ignore."""
        if not self._active or self.session is None:
            return
        was_done = self.session.episode.done
        ended = (self.session.episode.terminated, self.session.episode.truncated)
        if was_done and not self._runs_on:
            if self.cfg.auto_reset and self.cfg.mode == "lockstep":
                self._reset(None)
            return
        try:
            result = self.session.step(action)
        except ValueError as exc:
            self.get_logger().error(f"action rejected by {self.cfg.env_id}: {exc}")
            return
        except Exception:
            self.get_logger().error(f"environment step failed, truncating episode:\n{traceback.format_exc()}")
            self.session.episode.truncated = True
            return
        self._steps_done += 1
        if was_done:  # continue_after_done: the ended episode stays reported ended
            result.episode.terminated = result.episode.terminated or ended[0]
            result.episode.truncated = result.episode.truncated or ended[1]
        self._publish(result)
        if result.episode.done and not was_done:
            self.get_logger().info(episode_summary(result.episode, self.session.fps))
            if self._runs_on:
                self.get_logger().info(
                    "continue_after_done: the sim goes on following commands (a new episode: sim/reset)"
                )

    @property
    def _runs_on(self) -> bool:
        """After an episode ended: go on stepping (a robot stand-in) instead of waiting for a reset."""
        return self.cfg.continue_after_done and not self.cfg.auto_reset

    def _count_late_periods(self) -> None:
        """Realtime: count the control periods since the last call that got no step (skipped deadlines)."""
        slot = int((time.monotonic() - self._rt_origin) * self.session.fps)
        missed = slot - self._rt_slot - 1
        self._rt_slot = slot
        if missed > 0:
            self._late_periods += missed
            self.get_logger().warn(
                f"realtime: {self._late_periods} control period(s) of {1e3 / self.session.fps:.1f} ms missed "
                "so far (a step overran its period; the machine is too busy for this rate)",
                throttle_duration_sec=5.0,
            )

    # ------------------------------------------------------------------ lockstep consumers
    def _lockstep_step(self, action: np.ndarray) -> None:
        """Lockstep: step with ``action`` once every required consumer took in the current tick."""
        self._pending_action = action
        self._step_if_acknowledged()

    def _waiting_for(self) -> list[str]:
        now = self.session.sim_time_ns if self.session is not None else 0
        return [n for n in self.cfg.required_consumers if self._acks.get(n, -1) < now]

    def _step_if_acknowledged(self) -> None:
        if self._pending_action is None or self._waiting_for():
            return
        action, self._pending_action = self._pending_action, None
        self._step(action)

    def _on_tick_ack(self, msg: Header) -> None:
        name = msg.frame_id
        if name not in self.cfg.required_consumers:
            return
        ns = stamp_to_ns(msg.stamp)
        if msg.stamp.sec == TICK_ACK_RELEASE.sec and self._acks.get(name) != ns:
            self.get_logger().info(f"lockstep: consumer {name!r} finished; the sim no longer waits for it")
        self._acks[name] = max(ns, self._acks.get(name, -1))
        self._step_if_acknowledged()

    def _watch_consumers(self) -> None:
        """A required consumer that left the graph (died) stops the sim: nothing may run past it."""
        if self.fatal_error:
            return
        present = {name for name, _ns in self.get_node_names_and_namespaces()}
        for name in self.cfg.required_consumers:
            if name in present:
                self._seen_consumers.add(name)
                self._missing.discard(name)
            elif name in self._seen_consumers and self._acks.get(name) != stamp_to_ns(TICK_ACK_RELEASE):
                if name not in self._missing:  # one more watch period for a release still in flight
                    self._missing.add(name)
                    continue
                t = (self.session.sim_time_ns if self.session is not None else 0) / 1e9
                self.fatal_error = (
                    f"required consumer {name!r} left the ROS graph at sim time {t:.3f} s (did it die?); "
                    "stopping the simulation (lockstep never runs past a consumer)"
                )
                self.get_logger().error(self.fatal_error)
                self._active = False
                rclpy.try_shutdown(context=self.context)
                return

    def _on_timer(self) -> None:
        self._count_late_periods()
        if self.session.episode.done and not self._runs_on:
            now = time.monotonic()
            self._done_since = self._done_since or now
            if self.cfg.auto_reset and now - self._done_since >= self.cfg.reset_delay_s:
                self._reset(None)
            return
        action = self._realtime_action()
        if action is not None:
            self._step(action)

    def _on_idle(self) -> None:
        """Lockstep keep-alive: the same observation again (same stamp and step) after a quiet period."""
        if self.session is None or self._last_result is None:
            return
        if time.monotonic() - self._last_publish >= self.cfg.idle_republish_s:
            self._publish(self._last_result)

    def _realtime_action(self) -> np.ndarray | None:
        return self._target

    def _on_reset(self, request: ResetSim.Request, response: ResetSim.Response) -> ResetSim.Response:
        if not self._active or self.session is None:
            response.success = False
            response.message = "simulation is not active (lifecycle state must be active)"
            return response
        try:
            result = self._reset(int(request.seed), use_seed=request.use_seed)
        except Exception as exc:
            response.success = False
            response.message = f"reset failed: {exc}"
            return response
        response.success = True
        response.message = f"episode {result.episode.episode_index} (seed {result.episode.seed})"
        response.info = self._episode_msg(result)
        return response


def _make_node(node_cls) -> SimBridgeNode:
    node = node_cls()
    # mode is read-only: lockstep nodes take their commands on a wait set of their own (docs/sim.md, 7)
    if node.get_parameter("mode").value == "lockstep":
        node.lockstep_loop()
    return node


def _spin(node: SimBridgeNode) -> None:
    # what exists now (modules, the env, message types) lives as long as the process: keep it out of
    # the full collections that message churn triggers every few hundred steps (a full collection in
    # realtime mode is a missed control period)
    gc.freeze()
    try:
        if node._command_loop is None:
            rclpy.spin(node)
        else:
            node._command_loop.spin()
    finally:
        # frozen objects are never collected, not even at exit: rclpy's context (in reference cycles
        # with its executor's guard conditions) would never be finalized, and with it the DDS
        # participant, whose shared-memory segments (32 MB with the large-image profile) then stay
        # in /dev/shm after the process is gone
        gc.unfreeze()


def _safe_state(node: SimBridgeNode) -> int:
    node._active = False
    node._hold_current()
    node._cleanup()
    if node.fatal_error:  # the sim stopped itself (a required consumer died): say why, exit 1
        print(f"sim: {node.fatal_error}", file=sys.stderr, flush=True)
        return 1
    return 0


def run_node(node_cls, args=None) -> int:
    """main() of the sim executables: autostart, lockstep or plain spin, hold and clean up on exit."""
    return _run_node(
        lambda: _make_node(node_cls),
        args,
        before_init=use_large_image_transport,  # camera images over shared memory (before rclpy.init)
        autostart=True,
        spin=_spin,
        on_exit=_safe_state,
    )
