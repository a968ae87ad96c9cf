"""`control_arbiter` lifecycle node: one driver at a time between the command sources and the robot.

configure: open the pedal device (missing or unreadable -> FAILURE naming the path) and wire the
topics. activate: forward, starting in HOLD until ``initial_mode``'s source publishes. deactivate:
the safe state, HOLD at the measured pose (one hold command, then nothing), no source drives, inputs
refused, the leader's torque off. cleanup / shutdown: release the topics and the pedal.
``autostart`` configures and activates at start (a failure ends the process, exit code 2).

Sources (sensor_msgs/JointState by name): the policy on ``policy/joint_commands`` (the policy node's
``joint_commands`` remapped) and the human on ``teleop/joint_commands`` (the teleop node's, remapped).
Out: ``joint_commands`` at ``rate_hz``, through the ROS-free ``arbiter`` (modes POLICY / HUMAN /
HOLD, bumpless switches from the measured pose within ``max_step_rad``, a silent source -> hold).

Inputs: ``arbiter/command`` (lerobot_msgs/ArbiterCommand: pause, takeover, resume, cycle, save,
rerecord, stop), the Trigger services ``arbiter/{pause,takeover,resume}``, the terminal keys of
``lerobot-record-control --arbiter`` and a foot pedal (``pedal_device``, Linux evdev).

With ``mirror_leader``, a leader arm with active motors (motor_bus ``leader/torque_enable``) has its
torque on while paused, so it follows the follower's pose that the teleop node mirrors onto it
(teleop ``mirror_follower``); a takeover waits until ``teleop/leader_mirror_error`` has been within
``mirror_tolerance_rad`` for 3 samples, then the leader's torque goes off and teleop drives. Back to the policy,
``policy/reset`` empties its action queue and observation history. ``arbiter/status``
(lerobot_msgs/ControlStatus) carries the mode and every transition; the recorder reads it for
``complementary_info.is_intervention`` and pauses its frames while the mode is HOLD.
"""

from __future__ import annotations

import collections
import math
import threading
from functools import partial

import numpy as np
import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from lerobot_core.control_mode import ControlMode
from lerobot_core.joint_map import index_plan
from lerobot_core.realtime import process_threads, set_fifo
from lerobot_core.ros import qos
from lerobot_core.ros.node import autostart_timer, publish_unless_shut_down, run_node
from lerobot_msgs.msg import ControlStatus
from lerobot_msgs.srv import ArbiterCommand

from .arbiter import COMMANDS, Arbiter, ArbiterConfig, Reply, Source, StallMeter, Transition
from .control_arbiter_params import INITIAL_MODES, read_parameters, safety_limits
from .control_arbiter_status import ReplyLines, status_message, with_last_transition
from .pedal import PedalError, PedalThread, parse_key_map

RECORDER_SERVICES = {"save": "stop_episode", "rerecord": "discard_episode", "stop": "finalize"}


class ControlArbiterNode(LifecycleNode):
    """Lifecycle: configure opens the pedal (a missing or unreadable device fails it, naming the
    path) and wires the topics; activate starts forwarding, in HOLD until the initial source
    publishes; deactivate holds the present pose with no source driving (one hold command, then
    silence, the leader's torque off); cleanup releases the topics and the pedal."""

    def __init__(self, **kwargs):
        super().__init__("control_arbiter", **kwargs)
        self.cfg = read_parameters(self)
        names = list(self.cfg.joint_names)
        self._joints = tuple(names)
        self._key_map = parse_key_map(self.cfg.pedal_keys, COMMANDS) if self.cfg.pedal_device else {}
        self.arbiter = Arbiter(
            ArbiterConfig(
                joint_names=tuple(names),
                limits=safety_limits(self.cfg),
                source_timeout_s=self.cfg.source_timeout_s,
                initial_mode=INITIAL_MODES[self.cfg.initial_mode],
                require_leader_alignment=self.cfg.mirror_leader,
                alignment_timeout_s=self.cfg.alignment_timeout_s,
            )
        )
        self._lock = threading.Lock()
        self._active = False  # forwarding; only changed by the lifecycle transitions, under _lock
        self._present: np.ndarray | None = None
        self._stall = StallMeter(self.cfg.rate_hz)
        self._published_transitions = 0
        self._last_event, self._last_message = "", "unconfigured"
        self._reply_lines = ReplyLines()
        self._last_transition: Transition | None = None
        self._leader_torque = False
        self._leader_errors: collections.deque = collections.deque(maxlen=3)
        self._group = MutuallyExclusiveCallbackGroup()  # all arbiter state changes are serialized
        self._clients_group = MutuallyExclusiveCallbackGroup()
        self._io: list = []  # subscriptions, clients, publisher, timer, guard: made by configure
        self.pub_cmd = None
        self._timer = None
        self.cli_policy_reset = self.cli_leader_torque = None
        self.cli_recorder: dict = {}
        self._pedal: PedalThread | None = None
        # pedal presses are handed to the executor, so every input runs in the arbiter's callback group
        self._pedal_inputs: collections.deque = collections.deque()
        self._pedal_guard = None
        self._exit_code = 0

        # the status and the inputs exist in every state: an inactive arbiter says so
        # every transition reaches live subscribers; a late joiner gets the newest
        self.pub_status = self.create_publisher(ControlStatus, "arbiter/status", qos.STATUS)
        self.create_service(ArbiterCommand, "arbiter/command", self._on_command, callback_group=self._group)
        for command in ("pause", "takeover", "resume"):
            self.create_service(
                Trigger,
                f"arbiter/{command}",
                lambda req, resp, c=command: self._on_trigger(c, resp),
                callback_group=self._group,
            )
        self.create_timer(1.0, self._publish_status, callback_group=self._group)
        self._publish_status()
        if self.cfg.autostart:
            autostart_timer(self, on_failure=self._autostart_failed)

    def enter_realtime(self) -> None:
        """SCHED_FIFO at control_priority for the whole process, for the node's own process only
        (main): an input reaches the executor through the DDS threads, so those must not wait behind
        other work either; the pedal thread, started later, inherits it."""
        if self.cfg.control_priority <= 0:
            return
        try:
            set_fifo(self.cfg.control_priority, process_threads())
            self.get_logger().info(f"SCHED_FIFO {self.cfg.control_priority} for every thread")
        except OSError as exc:
            self.get_logger().warning(
                f"control_priority {self.cfg.control_priority}: SCHED_FIFO not permitted ({exc}); "
                "normal scheduling"
            )

    def _autostart_failed(self, transition: str) -> None:
        # a graph started with autostart cannot go on without its arbiter: the error (logged by
        # the transition, naming what failed) ends the process as a user error
        self.get_logger().error(f"autostart: {transition} failed; exiting")
        self._exit_code = 2
        self.context.try_shutdown()  # ends the spin; shutdown_safely returns the code

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        if self.cfg.pedal_device:
            try:
                self._pedal = PedalThread(self.cfg.pedal_device, self._key_map)
            except PedalError as exc:
                self.get_logger().error(f"configure failed: {exc}")
                self._last_event, self._last_message = "configure_failed", str(exc)
                self._publish_status()
                return TransitionCallbackReturn.FAILURE
        g = self._group
        self.pub_cmd = self.create_lifecycle_publisher(JointState, "joint_commands", qos.LATEST)
        io = [
            self.create_subscription(
                JointState, "joint_states", self._on_joint_states, qos.JOINTS_IN, callback_group=g
            ),
            self.create_subscription(
                JointState,
                "policy/joint_commands",
                lambda m: self._on_source(Source.POLICY, m),
                qos.LATEST,
                callback_group=g,
            ),
            self.create_subscription(
                JointState,
                "teleop/joint_commands",
                lambda m: self._on_source(Source.HUMAN, m),
                qos.LATEST,
                callback_group=g,
            ),
        ]
        clients = self._clients_group
        self.cli_policy_reset = self.create_client(Trigger, "policy/reset", callback_group=clients)
        ns = self.cfg.recorder.rstrip("/")
        self.cli_recorder = {
            cmd: self.create_client(Trigger, f"{ns}/{srv}", callback_group=clients)
            for cmd, srv in RECORDER_SERVICES.items()
        }
        io += [self.cli_policy_reset, *self.cli_recorder.values()]
        if self.cfg.mirror_leader:
            self.cli_leader_torque = self.create_client(
                SetBool, "leader/torque_enable", callback_group=clients
            )
            io += [
                self.cli_leader_torque,
                self.create_subscription(
                    Float64,
                    "teleop/leader_mirror_error",
                    self._on_mirror_error,
                    qos.LATEST,
                    callback_group=g,
                ),
            ]
        self._timer = self.create_timer(1.0 / self.cfg.rate_hz, self._tick, callback_group=g)
        self._timer.cancel()  # ticks while active
        self._pedal_guard = self.create_guard_condition(self._on_pedal_inputs, callback_group=g)
        self._io = io
        self._last_event, self._last_message = "configure", "configured, inactive"
        self._publish_status()
        self.get_logger().info(
            "configured"
            + (f"; pedal {self.cfg.pedal_device}" if self._pedal else "")
            + ("; leader mirroring on" if self.cfg.mirror_leader else "")
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        with self._lock:
            self.arbiter.restart()
            self._active = True
            self._stall.restart()
        self._leader_errors.clear()
        self._last_event = "activate"
        self._last_message = f"holding until the {self.cfg.initial_mode} publishes"
        if self._pedal is not None:
            alive = partial(rclpy.ok, context=self.context)
            self._pedal.start(self._on_pedal_presses, alive, lambda error: self.get_logger().error(error))
        self._timer.reset()
        self._publish_status()
        self.get_logger().info(
            f"arbitrating policy/joint_commands and teleop/joint_commands -> joint_commands at "
            f"{self.cfg.rate_hz:g} Hz, starting in {self.cfg.initial_mode}"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._stand_by("deactivate")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self._release()
        self._last_event, self._last_message = "cleanup", "unconfigured"
        self._publish_status()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        if self._active:
            self._stand_by("shutdown")
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _stand_by(self, event: str) -> None:
        """The safe state: HOLD at the measured pose, one last hold command, then no commands; the
        leader's torque off; no inputs taken."""
        self._timer.cancel()
        if self._pedal is not None:
            self._pedal.stop()
        now = self._now()
        with self._lock:
            self._active = False
            self.arbiter.stand_by(now, event)
            hold = self.arbiter.step(now)
        if hold is not None and rclpy.ok(context=self.context):
            self._publish_command(hold)
        self._after_change()
        if self.cfg.mirror_leader and self._leader_torque:
            self._set_leader_torque(False)
        self._last_event = event
        self._last_message = f"{event}: holding the present pose, no source drives"
        self._publish_status()
        self.get_logger().info(self._last_message)

    def _close_pedal(self) -> None:
        if self._pedal is not None:
            self._pedal.close()
            self._pedal = None

    def _release(self) -> None:
        self._close_pedal()
        for entity in self._io:
            if hasattr(entity, "srv_name"):
                self.destroy_client(entity)
            else:
                self.destroy_subscription(entity)
        self._io = []
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        if self._pedal_guard is not None:
            self.destroy_guard_condition(self._pedal_guard)
            self._pedal_guard = None
        if self.pub_cmd is not None:
            self.destroy_lifecycle_publisher(self.pub_cmd)
            self.pub_cmd = None
        self.cli_policy_reset = self.cli_leader_torque = None
        self.cli_recorder = {}

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _vector(self, msg: JointState) -> np.ndarray | None:
        if len(msg.position) != len(msg.name):
            return None
        plan = index_plan(msg.name, self._joints)
        out = plan.gather(msg.position) if plan.complete else None
        return out if out is not None and np.all(np.isfinite(out)) else None

    def _on_joint_states(self, msg: JointState) -> None:
        v = self._vector(msg)
        if v is not None:
            with self._lock:
                self._present = v
                self.arbiter.update_present(v)

    def _on_source(self, source: Source, msg: JointState) -> None:
        v = self._vector(msg)
        if v is None:
            self.get_logger().warning(
                f"{source.value} command without every joint of {self.cfg.joint_names}: ignored",
                throttle_duration_sec=2.0,
            )
            return
        with self._lock:
            self.arbiter.update_source(source, v, self._now())

    def _on_mirror_error(self, msg: Float64) -> None:
        """The teleop node's largest |leader - mirrored follower| (rad); counts while the torque is on."""
        self._leader_errors.append(float(msg.data) if self._leader_torque else math.nan)
        # aligned = the last few leader samples all within tolerance (settled, not passing through)
        full = len(self._leader_errors) == self._leader_errors.maxlen
        err = max(self._leader_errors) if full else math.nan
        with self._lock:
            self.arbiter.update_leader_alignment(err, self.cfg.mirror_tolerance_rad)

    def request(self, command: str):
        """One input from any front end (service, Trigger, pedal); returns the arbiter's reply."""
        with self._lock:
            if self._active:
                reply = self.arbiter.request(command, self._now())
            else:
                state = self._state_machine.current_state[1]
                reply = Reply(
                    False,
                    f"{command} refused: the control arbiter is {state}, not active (activate it first; "
                    "or start it with autostart:=true)",
                    self.arbiter.mode,
                )
        if reply.success and command in RECORDER_SERVICES:
            self._call(self.cli_recorder[command], Trigger.Request(), f"recorder {command}")
        line = self._reply_lines.line(command, reply)
        # rclpy ties a severity to each logging call site: one line per severity
        if line is not None and reply.success:
            self.get_logger().info(line)
        elif line is not None:
            self.get_logger().warning(line)
        if not reply.success:
            self._last_event, self._last_message = f"{command}_refused", reply.message
            self._publish_status()
        if reply.transition is not None:
            # the new source's first command goes out now, not at the next tick; the tick restarts
            # from here, so commands stay one control period apart
            self._timer.reset()
            self._tick()
        self._after_change()
        return reply

    def _on_command(self, request: ArbiterCommand.Request, response: ArbiterCommand.Response):
        reply = self.request(request.command.strip().lower())
        response.success, response.message, response.mode = reply.success, reply.message, int(reply.mode)
        return response

    def _on_trigger(self, command: str, response: Trigger.Response) -> Trigger.Response:
        reply = self.request(command)
        response.success, response.message = reply.success, reply.message
        return response

    def _on_pedal_presses(self, commands: list[str]) -> None:  # on the pedal's thread
        if self._pedal_guard is not None:
            self._pedal_inputs.extend(commands)
            self._pedal_guard.trigger()

    def _on_pedal_inputs(self) -> None:
        while self._pedal_inputs:
            self.request(self._pedal_inputs.popleft())

    # ------------------------------------------------------------------ the control step
    def _tick(self) -> None:
        now = self._now()
        with self._lock:
            if not self._active:  # a tick that raced a deactivate sends nothing
                return
            stalled = self._stall.step(now)
            cmd = self.arbiter.step(now, stalled_s=stalled)
            mode = self.arbiter.mode
            if stalled > 0.0 and mode != ControlMode.HOLD:
                self._log_excused_stall(now, stalled)
        if cmd is not None:
            self._publish_command(cmd)
        self._after_change()
        self._sync_leader_torque(mode)

    def _log_excused_stall(self, now: float, stalled: float) -> None:
        """Say so when the stall decided the outcome: the driving source would be silent without it."""
        arb = self.arbiter
        src = Source.POLICY if arb.mode == ControlMode.POLICY else Source.HUMAN
        if now - arb.heard_s(src) > self.cfg.source_timeout_s:
            self.get_logger().warning(
                f"this control step ran {stalled + self._stall.allowed_s:.3f} s after the "
                f"previous one (the process was stalled): {stalled:.3f} s of it does not count toward "
                f"the {src.value}'s silence, whose commands sent meanwhile wait to be taken",
                throttle_duration_sec=5.0,
            )

    def _publish_command(self, cmd: np.ndarray) -> None:
        msg = JointState(name=list(self.cfg.joint_names), position=[float(v) for v in cmd])
        msg.header.stamp = self.get_clock().now().to_msg()
        publish_unless_shut_down(self.pub_cmd, msg, self.context)

    def _after_change(self) -> None:
        """Side effects of new transitions (leader torque, policy reset), then the status."""
        with self._lock:
            new = self.arbiter.transitions[self._published_transitions :]
            self._published_transitions = len(self.arbiter.transitions)
        if not new:
            return
        for t in new:
            self._last_transition, self._last_event, self._last_message = t, t.event, t.message
            if t.previous == t.mode:
                continue
            self.get_logger().info(f"{t.previous.name} -> {t.mode.name} ({t.event}): {t.message}")
            if self._active:
                self._sync_leader_torque(t.mode)
            if t.mode == ControlMode.POLICY and self.cfg.reset_policy_on_resume:
                self._call(self.cli_policy_reset, Trigger.Request(), "policy/reset")
        self._publish_status()

    # ------------------------------------------------------------------ outputs
    def _sync_leader_torque(self, mode: ControlMode) -> None:
        """The leader's torque is on exactly while paused (it mirrors the follower), off otherwise."""
        if not self.cfg.mirror_leader or (mode == ControlMode.HOLD) == self._leader_torque:
            return
        if self.cli_leader_torque.service_is_ready():
            self._set_leader_torque(mode == ControlMode.HOLD)

    def _set_leader_torque(self, on: bool) -> None:
        self._leader_torque = on
        self._leader_errors.clear()
        if not on:
            with self._lock:
                self.arbiter.update_leader_alignment(math.nan, self.cfg.mirror_tolerance_rad)
        self._call(self.cli_leader_torque, SetBool.Request(data=on), f"leader/torque_enable {on}")

    def _call(self, client, request, what: str) -> None:
        if not client.service_is_ready():
            self.get_logger().warning(f"{client.srv_name} is not available: {what} not done")
            return
        fut = client.call_async(request)

        def done(f, what=what):
            res = f.result()
            if res is not None and not res.success:
                self.get_logger().warning(f"{what}: {res.message}")

        fut.add_done_callback(done)

    def _publish_status(self) -> None:
        if not rclpy.ok(context=self.context):
            return
        now = self._now()
        with self._lock:
            msg = status_message(self.arbiter, now)
        msg = with_last_transition(msg, self._last_transition, self._last_event, self._last_message)
        msg.header.stamp = self.get_clock().now().to_msg()
        publish_unless_shut_down(self.pub_status, msg, self.context)

    def shutdown_safely(self) -> int:
        """Process exit (Ctrl-C, SIGTERM, a failed autostart): the pedal thread stops and the device
        is closed; returns the exit code."""
        self._close_pedal()
        return self._exit_code


def _realtime_node() -> ControlArbiterNode:
    node = ControlArbiterNode()
    node.enter_realtime()
    return node


def main(args=None) -> int:
    return run_node(
        _realtime_node,
        args,
        errors=(ValueError,),  # bad parameter values; a bad pedal device fails configure
        error_prefix="control_arbiter: error",
        # one thread: every callback is in one exclusive group and the service clients are asynchronous
        # (call_async + done callback), so a second thread could only wait; rclpy's multi-threaded
        # executor busy-polls while the group is taken (95 % CPU, input -> command p99 of 14 periods)
        executor=SingleThreadedExecutor,
        on_exit=ControlArbiterNode.shutdown_safely,
    )


if __name__ == "__main__":
    raise SystemExit(main())
