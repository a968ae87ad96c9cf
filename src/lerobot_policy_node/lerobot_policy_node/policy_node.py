"""`policy` lifecycle node: runs a LeRobot checkpoint on a ROS robot at a fixed control rate.

configure: load the checkpoint, subscribe to joint states and cameras. activate: start the control
and inference threads (if `run_on_activate`) or wait for a `policy/run` goal. deactivate: stop
and hold the last command. The work itself is in the ROS-free `controller`, `action_path`
(history, `action_queue`, `safety`, shared with lerobot-sim-eval) and `observation` modules; this
class only wires parameters and messages. With `inference: remote | serve` the model runs on another host
(`remote_link`, docs/remote_inference.md).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from functools import partial

import numpy as np
import rclpy
from lifecycle_msgs.msg import State as StateMsg
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lerobot_core import topics
from lerobot_core.command import COMMAND_INTERFACES
from lerobot_core.contract import COMPRESSED_IMAGE, IMAGE
from lerobot_core.contract.extraction import IMAGE_READERS, decode_image
from lerobot_core.ros import qos
from lerobot_core.ros.commands import command_message
from lerobot_core.ros.device import message_class
from lerobot_core.ros.node import autostart_timer, publish_unless_shut_down, run_node
from lerobot_core.ros.serialized import decode_message
from lerobot_core.safety import SafetyFilter
from lerobot_core.time import stamp_to_ns
from lerobot_dataset.errors import DatasetError
from lerobot_dataset.roundtrip import CodecRoundTrip
from lerobot_msgs.action import RunPolicy
from lerobot_msgs.msg import ActionChunk, PolicyStatus
from lerobot_msgs.srv import LoadPolicy
from lerobot_runtime import PolicyLoadError

from .controller import RUNNING, ChunkInfo, PolicyController
from .deployment import Deployment
from .observation import ENV_STATE_KEY
from .policy_setup import read_parameters, set_up
from .progress import ProgressReport
from .remote_link import RemoteLink, chunk_message


class PolicyNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("policy", **kwargs)
        self.cfg = read_parameters(self)
        self.policy = None
        self.policy_path = ""
        self.controller: PolicyController | None = None
        self.task = self.cfg.task
        self._subs = []
        self._lock = threading.Lock()
        self._run_goal_active = False
        self._status_state = PolicyStatus.STATE_UNCONFIGURED
        self._status_message = ""
        self._cb_group = ReentrantCallbackGroup()
        self.pub_status = self.create_publisher(PolicyStatus, "policy/status", qos.LATCHED)
        self.pub_chunk = self.create_publisher(ActionChunk, "policy/action_chunk", qos.RELIABLE)
        self._pub_cmd = None
        self.deployment: Deployment | None = None  # from the contract parameter, set by _load
        self._joint_names = list(self.cfg.joint_names)  # command order
        self._fps = self.cfg.fps
        self.link: RemoteLink | None = None  # inference remote | serve: the other host
        self.create_service(
            LoadPolicy, "policy/load_policy", self._on_load_policy, callback_group=self._cb_group
        )
        self.create_service(Trigger, "policy/reset", self._on_reset, callback_group=self._cb_group)
        self._action_server = ActionServer(
            self,
            RunPolicy,
            "policy/run",
            execute_callback=self._execute_run,
            goal_callback=self._on_goal,
            cancel_callback=lambda _g: CancelResponse.ACCEPT,
            callback_group=self._cb_group,
        )
        self.create_timer(1.0, self._publish_status, callback_group=MutuallyExclusiveCallbackGroup())
        self._progress: ProgressReport | None = None
        self.create_timer(0.5, self._report_progress, callback_group=MutuallyExclusiveCallbackGroup())
        if self.cfg.task_topic:
            self.create_subscription(String, self.cfg.task_topic, self._on_task, qos.LATCHED)
        self._publish_status()
        self._exit_code = 0
        if self.cfg.autostart:
            autostart_timer(self, on_failure=self._autostart_failed)

    # ------------------------------------------------------------------ loading
    def _load(self, path: str, device: str) -> str:
        """Load a checkpoint and build the controller; returns '' or the error message."""
        if not path:
            return "no policy_path given (parameter policy_path or the policy/load_policy service)"
        try:
            setup = set_up(self.cfg, path, device, self.get_logger().warn)
            link = RemoteLink(self, self.cfg, setup.action_names) if self.cfg.inference != "local" else None
            controller = PolicyController(
                setup.policy,
                setup.observation,
                setup.scheduler,
                SafetyFilter(setup.limits),
                publish_command=self._publish_command,
                now_ns=link.now_ns if link else lambda: self.get_clock().now().nanoseconds,
                task=self.task or None,
                action_to_joint=setup.action_to_joint,
                on_chunk=self._on_chunk,
                on_state_change=self._on_controller_state,
                control_priority=self.cfg.control_priority,
                run_inference=self.cfg.inference != "remote",
                starved_reason=link.starved_reason if self.cfg.inference == "remote" else None,
                max_chunk_age_s=self.cfg.max_chunk_age_s,
            )
        except (PolicyLoadError, ValueError) as exc:
            return str(exc)
        policy, deployment, joints, fps = setup.policy, setup.deployment, setup.joints, setup.fps
        pc, sched, action_names = policy.config, setup.scheduler, setup.action_names
        self.policy, self.policy_path, self.controller = policy, path, controller
        if self.link is not None:
            self.link.close()
        self.link = link
        self._action_names = action_names
        self.deployment, self._joint_names, self._fps = deployment, joints, fps
        if deployment is not None and deployment.task_text and not self.task:
            self.task = deployment.task_text  # the task the dataset was recorded with
            controller.task = self.task
        self.get_logger().info(
            f"loaded {pc.type} from {path}: chunk {pc.chunk_size}, {sched.n_action_steps} steps used, queue "
            f"{sched.mode}, rtc {'on' if sched.rtc else 'off'}, control {sched.control_rate_hz:g} Hz, images {dict(pc.image_features)}, "
            f"n_obs_steps {pc.n_obs_steps}"
            + (
                f"; contract {deployment.source}: state {deployment.state_topic} in "
                f"{deployment.state.units}, action in {deployment.action.units}"
                if deployment
                else ""
            )
        )
        return ""

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        # a policy loaded through policy/load_policy while unconfigured wins over the parameter
        err = "" if self.controller is not None else self._load(self.cfg.policy_path, self.cfg.device)
        if err:
            self.get_logger().error(f"configure failed: {err}")
            self._set_status(PolicyStatus.STATE_ERROR, err)
            return TransitionCallbackReturn.FAILURE
        self._create_io()
        self._set_status(PolicyStatus.STATE_INACTIVE, "loaded")
        return TransitionCallbackReturn.SUCCESS

    def _subscribe(self, msg_type, topic: str, callback, qos_profile, **kwargs):
        # destroyed by a lifecycle cleanup or re-configure, which runs in a worker of the
        # multi-threaded executor while its spin thread may build a wait set: no QoS event handlers
        # (rclpy's race, see subscription_without_events). Little is lost: the joint, image and
        # env-state subscriptions are best effort and volatile, which every publisher matches; only
        # a contract's task topic (reliable, transient local) can mismatch, and its publisher says so
        return qos.subscription_without_events(self, msg_type, topic, callback, qos_profile, **kwargs)

    def _create_io(self) -> None:
        for sub in self._subs:
            self.destroy_subscription(sub)
        d = self.deployment
        joint_topic = d.state_topic if d else "joint_states"
        self._subs = [self._subscribe(JointState, joint_topic, self._on_joints, qos.JOINTS_IN)]
        if self.cfg.inference == "remote":  # the joints for safety; chunks from the inference host
            self.link.subscribe(self._cb_group)
            d = None  # images, environment state and task are the inference host's
        self._roundtrip = {}
        for key in self.policy.config.image_features if self.cfg.inference != "remote" else ():
            if self.cfg.image_codec_roundtrip:
                self._roundtrip[key] = CodecRoundTrip(fps=max(1, round(self._fps)))
            # with a contract: its topic and message type (Image or CompressedImage), decoded as recorded
            src = d.image_sources[key] if d else None
            topic = src.topic if src else topics.camera_topic(topics.camera_name(key))
            msgtype = src.msgtype if src else IMAGE
            if self.cfg.image_transport == "compressed" and msgtype == IMAGE and not (src and src.depth):
                topic, msgtype = f"{topic}/compressed", COMPRESSED_IMAGE  # image_transport's JPEG stream
                src = replace(src, topic=topic, msgtype=msgtype, encoding=None) if src else None
            callback = partial(self._on_image, key, msgtype, src)  # serialized: see ros.serialized
            # each camera in a group of its own: its frames stay in order (the codec round trip keeps
            # state), and decoding one (JPEG, the round trip: ~10 ms a frame) never holds up the
            # joint states, which the safety filter anchors on
            self._subs.append(
                self._subscribe(
                    message_class(msgtype),
                    topic,
                    callback,
                    qos.SENSOR,
                    raw=True,
                    callback_group=MutuallyExclusiveCallbackGroup(),
                )
            )
        if d and d.env_state and ENV_STATE_KEY in self.policy.config.input_features:
            topic, msgtype, _ = d.env_state
            self._subs.append(
                self._subscribe(
                    message_class(msgtype), topic, lambda m, t=topic: self._on_env_state(t, m), qos.JOINTS_IN
                )
            )
        if d and d.task_topic and not self.cfg.task_topic:  # the contract's task topic, as recorded
            self._subs.append(self._subscribe(String, d.task_topic, self._on_task, qos.LATCHED))
        if self._pub_cmd is None and self.cfg.inference != "serve":  # serve: commands nothing
            msgtype, topic = COMMAND_INTERFACES[self.cfg.command_interface]
            self._pub_cmd = self.create_publisher(
                message_class(msgtype), topic, qos.LATEST
            )  # the latest command only

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        if self.cfg.run_on_activate:
            self._start_controller()
        else:
            self._set_status(PolicyStatus.STATE_INACTIVE, "active, waiting for a policy/run goal")
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._stop_controller("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self._stop_controller("cleaned up")
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        self.policy = self.controller = None  # release the model; configure loads it again
        self._set_status(PolicyStatus.STATE_UNCONFIGURED, "")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self._stop_controller("shutdown")
        return TransitionCallbackReturn.SUCCESS

    def _start_controller(self) -> None:
        if self.controller is None or self.controller.running:
            return
        self.controller.task = self.task or None
        self.controller.start()
        sched = self.controller.scheduler.cfg
        self._progress = ProgressReport(sched.control_rate_hz, self.cfg.fps, sched.n_action_steps)
        self._progress.restart(time.monotonic(), self.controller.stats)
        self._set_status(PolicyStatus.STATE_HOLDING, "starting")

    def _stop_controller(self, why: str) -> None:
        if self.controller is not None and self.controller.running:
            hold = self.controller.stop()
            if hold is not None:
                self._publish_command(hold, True)  # hold where we are
            if self._ok():
                self.get_logger().info(f"policy stopped ({why}); holding the last command")
        if self.controller is not None:
            self._set_status(PolicyStatus.STATE_INACTIVE, why)

    def _report_progress(self) -> None:
        """When the policy starts driving, then its control and inference rates every 10 s."""
        c, progress = self.controller, self._progress
        if c is None or progress is None or not c.running or not self._ok():
            return
        for line in progress.update(time.monotonic(), c.stats):
            self.get_logger().info(line)

    def _is_active(self) -> bool:
        return self._state_machine.current_state[0] == StateMsg.PRIMARY_STATE_ACTIVE

    # ------------------------------------------------------------------ inputs
    def _on_joints(self, msg: JointState) -> None:
        if self.link is not None and self.link.drop():
            return
        if self.controller is not None and len(msg.position):
            self.controller.obs.push_joints(msg.name, msg.position, stamp_to_ns(msg.header.stamp))

    def _on_image(self, key: str, msgtype: str, src, data: bytes) -> None:
        if self.controller is None or (self.link is not None and self.link.drop()):
            return
        try:
            msg = decode_message(data, msgtype, None)  # an image: rosbags views of data, no copy
            rgb = decode_image(src, msg) if src is not None else IMAGE_READERS[msgtype][1](msg)
            if key in self._roundtrip:  # served as the dataset's video shows it (image_codec_roundtrip)
                rgb = self._roundtrip[key](rgb)
        except (
            ValueError,
            DatasetError,
        ) as exc:  # the frame is dropped: the camera goes stale, the arm holds
            self.get_logger().error(f"camera {key}: {exc}", throttle_duration_sec=5.0)
            return
        self.controller.obs.push_image(key, rgb, stamp_to_ns(msg.header.stamp))

    def _on_env_state(self, topic: str, msg) -> None:
        if self.controller is None or (self.link is not None and self.link.drop()):
            return
        try:
            values, stamp_ns, _ = self.deployment.contract.extract(topic, msg)
            self.controller.obs.push_env_state(
                values, stamp_ns if stamp_ns is not None else self.get_clock().now().nanoseconds
            )
        except ValueError as exc:
            self.get_logger().error(f"observation.environment_state: {exc}", throttle_duration_sec=5.0)

    def _on_task(self, msg: String) -> None:
        self.task = msg.data
        if self.controller is not None:
            self.controller.task = msg.data or None

    # ------------------------------------------------------------------ outputs
    def _publish_command(self, positions: np.ndarray, held: bool) -> None:
        pub = self._pub_cmd
        if pub is None or not self._ok():
            return
        msgtype = COMMAND_INTERFACES[self.cfg.command_interface][0]
        period = 1.0 / (self._fps * self.cfg.interpolation_multiplier)
        stamp = self.get_clock().now().to_msg()
        msg = command_message(msgtype, self._joint_names, positions, stamp, period)
        publish_unless_shut_down(pub, msg, self.context)

    def _on_chunk(self, info: ChunkInfo) -> None:
        if not self._ok():
            return
        if self.cfg.inference == "serve":  # to the robot host
            self.link.publish(info, self.policy.config.type, self._action_names, self._fps)
        elif self.cfg.publish_chunks:  # for inspection
            msg = chunk_message(info, self.policy.config.type, self._action_names, self._fps)
            publish_unless_shut_down(self.pub_chunk, msg, self.context)

    def _on_controller_state(self, state: str, message: str) -> None:
        note = self.controller.priority_note if self.controller is not None else ""
        if note and note != getattr(self, "_priority_logged", ""):
            self._priority_logged = note
            log = self.get_logger().warning if "not permitted" in note else self.get_logger().info
            log(note)
        # publish when RUNNING <-> HOLDING or the kind of hold reason changes (not every detail)
        kind = (state, message.split("(")[0].split(":")[0].strip())
        if kind != getattr(self, "_last_controller_state", None):
            self._last_controller_state = kind
            if message:
                self.get_logger().info(f"{state}: {message}", throttle_duration_sec=2.0)
            self._publish_status()

    def _ok(self) -> bool:
        return rclpy.ok(context=self.context)

    def _set_status(self, state: int, message: str) -> None:
        self._status_state, self._status_message = state, message
        self._publish_status()

    def _publish_status(self) -> None:
        if not self._ok():
            return
        msg = PolicyStatus(
            state=self._status_state,
            message=self._status_message,
            policy_path=self.policy_path,
            task=self.task,
            control_rate_hz=self._fps * self.cfg.interpolation_multiplier,
        )
        msg.header.stamp = self.get_clock().now().to_msg()
        c = self.controller
        if c is not None:
            msg.policy_type = self.policy.config.type
            if c.running:
                msg.state = (
                    PolicyStatus.STATE_RUNNING if c.stats.state == RUNNING else PolicyStatus.STATE_HOLDING
                )
                msg.message = c.stats.message
            s = c.stats
            msg.queue_length = int(c.scheduler.queue_length())
            msg.steps, msg.chunks, msg.held_steps = int(s.steps), int(s.chunks), int(s.held_steps)
            msg.last_inference_latency_s = float(s.last_inference_latency_s)
        publish_unless_shut_down(self.pub_status, msg, self.context)

    # ------------------------------------------------------------------ service and action
    def _on_load_policy(
        self, request: LoadPolicy.Request, response: LoadPolicy.Response
    ) -> LoadPolicy.Response:
        if self.controller is not None and self.controller.running:
            response.success, response.message = (
                False,
                "deactivate the policy node (or cancel the run) before loading",
            )
            return response
        err = self._load(request.policy_path, request.device or self.cfg.device)
        response.success, response.message = not err, err or f"loaded {request.policy_path}"
        if not err:
            pc = self.policy.config
            response.policy_type, response.chunk_size = pc.type, pc.chunk_size
            response.n_action_steps = self.controller.scheduler.cfg.n_action_steps
            response.action_names = list(self._action_names)
            if self._state_machine.current_state[0] != StateMsg.PRIMARY_STATE_UNCONFIGURED:
                self._create_io()
            self._set_status(PolicyStatus.STATE_INACTIVE, "loaded")
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Restart a running policy from the present state: empty action queue, fresh observation history.

        The control arbiter calls it when control returns to the policy after a pause or an intervention.
        """
        c = self.controller
        if c is None or not c.running:
            response.success, response.message = False, "the policy is not running: nothing to reset"
            return response
        with self._lock:
            c.stop()
            c.start()
        response.success, response.message = True, "action queue and observation history reset"
        return response

    def _on_goal(self, goal) -> GoalResponse:
        if not self._is_active() or self.controller is None or self._run_goal_active:
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute_run(self, handle):
        goal: RunPolicy.Goal = handle.request
        result = RunPolicy.Result()
        self._run_goal_active = True
        try:
            if goal.task:
                self.task = goal.task
            c = self.controller
            if c.running:  # restart so the run's counters start at zero
                c.stop()
            self._start_controller()
            t0 = time.monotonic()
            code = RunPolicy.Result.RESULT_DONE
            while True:
                if handle.is_cancel_requested:
                    code = RunPolicy.Result.RESULT_CANCELLED
                    break
                if not self._is_active() or not c.running:
                    code, result.message = RunPolicy.Result.RESULT_ERROR, "policy node left the active state"
                    break
                if goal.duration_s > 0 and time.monotonic() - t0 >= goal.duration_s:
                    break
                if goal.max_steps and c.stats.steps >= goal.max_steps:
                    break
                fb = RunPolicy.Feedback(
                    state=PolicyStatus.STATE_RUNNING
                    if c.stats.state == RUNNING
                    else PolicyStatus.STATE_HOLDING,
                    steps=c.stats.steps,
                    chunks=c.stats.chunks,
                    queue_length=int(c.scheduler.queue_length()),
                    last_inference_latency_s=float(c.stats.last_inference_latency_s),
                )
                handle.publish_feedback(fb)
                time.sleep(0.1)
            s = c.stats
            self._stop_controller("run finished")
            result.result_code = code
            result.steps, result.chunks, result.held_steps = int(s.steps), int(s.chunks), int(s.held_steps)
            result.mean_inference_latency_s = s.inference_latency_sum_s / s.chunks if s.chunks else 0.0
            result.message = result.message or {0: "done", 1: "cancelled"}.get(code, "")
            if code == RunPolicy.Result.RESULT_CANCELLED:
                handle.canceled()
            elif code == RunPolicy.Result.RESULT_ERROR:
                handle.abort()
            else:
                handle.succeed()
            return result
        finally:
            self._run_goal_active = False

    def _autostart_failed(self, transition: str) -> None:
        """exit_on_failure: a failed autostart ends the process (exit code 1), so a launcher whose graph
        needs the policy stops with the reason; else the node stays up for policy/load_policy."""
        if not self.cfg.exit_on_failure:
            return
        self.get_logger().error(f"autostart: {transition} failed; exiting: {self._status_message}")
        self._exit_code = 1
        rclpy.try_shutdown(context=self.context)

    def shutdown_safely(self) -> int:
        self._stop_controller("shutdown")
        return self._exit_code


def main(args=None) -> int:
    return run_node(
        PolicyNode,
        args,
        errors=(ValueError,),  # bad parameter values
        error_prefix="policy: error",
        # a RunPolicy goal holds a thread for its whole run; two cameras, the joint states and the
        # services and timers each get one beside it
        executor=partial(MultiThreadedExecutor, num_threads=5),
        on_exit=PolicyNode.shutdown_safely,
    )


if __name__ == "__main__":
    raise SystemExit(main())
