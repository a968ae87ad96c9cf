"""``recorder``: a lifecycle node that records LeRobot datasets (and/or raw mcap bags) from live topics.

A thin adapter around :class:`lerobot_recorder.live_recorder.LiveRecorder`: it subscribes to the
topics of the mapping contract (sensor-data QoS for images), hands every serialized message to the
recorder's worker thread (no decoding, encoding or disk I/O on the executor's threads), and exposes
lerobot-record's episode control the ROS way:

* action ``recorder/record_episode`` (lerobot_msgs/RecordEpisode): one episode + its reset period,
  feedback (frames, elapsed, per-stream rates), cancel = stop and save (or discard);
* services ``recorder/start_episode`` (lerobot_msgs/StartEpisode), ``recorder/stop_episode``,
  ``recorder/discard_episode``, ``recorder/finalize`` (std_srvs/Trigger);
* topic ``recorder/status`` (lerobot_msgs/RecorderStatus, transient local), on change and at 1 Hz;
* with ``tick_ack``, topic ``sim/tick_ack`` (std_msgs/Header, frame_id = node name): the newest sim
  time every required stamped stream has been taken in up to, so a lockstep sim that lists this
  node in ``required_consumers`` never runs ahead of the recorder (docs/closed_loop.md).

With ``use_sim_time`` the recorder lives in simulation time: receive stamps, episode and reset
lengths and rate checks follow ``/clock``, so a slow machine only makes a lockstep run take longer.

Lifecycle: configure opens/validates the dataset and subscribes; activate allows recording (and
starts a session of ``num_episodes`` when ``auto_record``); deactivate saves an episode in progress;
cleanup/shutdown finalize the dataset.
"""

from __future__ import annotations

import threading
import time

from builtin_interfaces.msg import Time
from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.exceptions import InvalidHandle
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy_impl
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from std_msgs.msg import Header
from std_srvs.srv import Trigger

from lerobot_core.contract import Contract, ContractError
from lerobot_core.ros import qos
from lerobot_core.ros.device import message_class
from lerobot_core.ros.node import publish_unless_shut_down, run_node
from lerobot_core.ros.serialized import decode_message
from lerobot_core.time import NS_PER_S, ns_to_stamp
from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import EpisodeInfo, RecorderStatus
from lerobot_msgs.srv import StartEpisode
from lerobot_recorder.episode_control import EpisodeError, State
from lerobot_recorder.live_recorder import LiveRecorder, NoMessageYetError, RecorderError
from lerobot_recorder.recorder_params import RecorderNodeConfig, declare_parameters, read_config
from lerobot_recorder.recorder_requests import RecorderRequests, stream_msg

# the lockstep sim's acknowledgement topic (lerobot_sim.bridge_base: TICK_ACK_TOPIC, TICK_ACK_RELEASE)
TICK_ACK_TOPIC = "sim/tick_ack"
TICK_ACK_RELEASE_SEC = 2**31 - 1
QOS_TICK_ACK = qos.RELIABLE
QOS_STATUS = qos.LATCHED
QOS_IMAGES = qos.SENSOR
QOS_RELIABLE = qos.RECORDED


class RecorderNode(RecorderRequests, LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("recorder", **kwargs)
        declare_parameters(self)
        self.recorder: LiveRecorder | None = None
        self.cfg: RecorderNodeConfig | None = None
        self._subs = []
        self._active = False
        self._error = ""
        self._exit_code: int | None = None
        self._exiting = False
        self.finished = threading.Event()  # set when the node should exit (exit_when_done / fatal)
        self._status_pub = self.create_publisher(RecorderStatus, "recorder/status", QOS_STATUS)
        self._ack_pub = None
        # One single-threaded executor runs everything (rclpy's multi-threaded executor costs too
        # much per message at camera rates); requests that wait for the worker are coroutines.
        self._cb_services = ReentrantCallbackGroup()
        self._cb_subs = None
        self._cb_timer = None
        self.create_service(
            StartEpisode, "recorder/start_episode", self._srv_start, callback_group=self._cb_services
        )
        self.create_service(
            Trigger, "recorder/stop_episode", self._srv_stop, callback_group=self._cb_services
        )
        self.create_service(
            Trigger, "recorder/discard_episode", self._srv_discard, callback_group=self._cb_services
        )
        self.create_service(
            Trigger, "recorder/finalize", self._srv_finalize, callback_group=self._cb_services
        )
        self._action = ActionServer(
            self,
            RecordEpisode,
            "recorder/record_episode",
            execute_callback=self._execute_record,
            goal_callback=self._goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._cb_services,
        )
        self._last_status = 0.0
        # wall clock: status and exit_when_done must go on when a sim clock (use_sim_time) stands still
        self._status_timer = self.create_timer(
            0.2,
            self._status_tick,
            callback_group=self._cb_timer,
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )
        self._publish_status()

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        try:
            cfg = read_config(self)
            contract = Contract.load(cfg.contract)
            if not cfg.live.episode.task and not contract.task_text and not contract.task_topic:
                raise RecorderError("no task: set the 'task' parameter or a task in the contract")
            sim_time = bool(self.get_parameter("use_sim_time").value)
            if cfg.tick_ack:
                self._ack_pub = self.create_publisher(Header, TICK_ACK_TOPIC, QOS_TICK_ACK)
            recorder = LiveRecorder(
                cfg.live,
                contract,
                decode=self._decode,
                clock=lambda: self.get_clock().now().nanoseconds,
                # episode and reset lengths, rate checks: in sim time when the sim is the clock
                monotonic=(lambda: self.get_clock().now().nanoseconds / NS_PER_S)
                if sim_time
                else time.monotonic,
                logger=_RosLogger(self.get_logger()),
                on_change=self._publish_status,
                on_taken=self._acknowledge if cfg.tick_ack else None,
            )
        except (RecorderError, ContractError, EpisodeError, ValueError, OSError) as exc:
            return self._fail_transition("configure", str(exc))
        self.cfg = cfg
        self.recorder = recorder
        self._types = {t: message_class(s.msgtype) for t, s in recorder.contract.streams.items()}
        self._msgtypes = {t: s.msgtype for t, s in recorder.contract.streams.items()}
        if cfg.live.episode_boundaries == "sim":
            info_topic = cfg.live.episode_info_topic
            self._types[info_topic] = EpisodeInfo
            self._subs.append(
                self.create_subscription(
                    EpisodeInfo,
                    info_topic,
                    lambda data, t=info_topic: self._on_message(t, data),
                    QOS_RELIABLE,
                    raw=True,
                    callback_group=self._cb_subs,
                )
            )
        for topic, st in recorder.contract.streams.items():
            qos = QOS_IMAGES if st.qos == "sensor" else QOS_RELIABLE
            self._subs.append(
                self.create_subscription(
                    self._types[topic],
                    topic,
                    lambda data, t=topic: self._on_message(t, data),
                    qos,
                    raw=True,
                    callback_group=self._cb_subs,
                )
            )
        recorder.start()
        self._error = ""
        where = cfg.live.raw_root if cfg.live.mode == "raw" else recorder.root
        self.get_logger().info(
            f"configured: {recorder.kind} {where} (mode {cfg.live.mode}), contract {cfg.contract}, "
            f"topics {sorted(recorder.contract.streams)}"
        )
        self._publish_status()
        return TransitionCallbackReturn.SUCCESS

    def _fail_transition(self, what: str, reason: str) -> TransitionCallbackReturn:
        self._error = f"{what} failed: {reason}"
        self.get_logger().error(self._error)
        self._publish_status()
        return TransitionCallbackReturn.FAILURE

    def on_activate(self, state) -> TransitionCallbackReturn:
        self._active = True
        if self.cfg.auto_record:
            threading.Thread(target=self._auto_session, daemon=True).start()
        self._publish_status()
        return super().on_activate(state)

    def _auto_session(self) -> None:
        """lerobot-record's loop: wait for every stream, then record num_episodes episodes."""
        t_log = 0.0
        while self._active and self.recorder is not None:
            fut = self.recorder.request("start", session=True)
            try:
                fut.result(timeout=30)
                return
            except NoMessageYetError as exc:
                if time.monotonic() - t_log > 5.0:
                    t_log = time.monotonic()
                    self.get_logger().info(f"auto_record waiting: {exc}")
            except Exception as exc:
                self._error = f"auto_record: {exc}"
                self.get_logger().error(self._error)
                self._publish_status()
                if self.cfg.exit_when_done:
                    self._exit_code = 1
                    self.finished.set()
                return
            time.sleep(0.2)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._active = False
        if self.recorder is not None:
            snap = self.recorder.snapshot()
            if snap.state in (State.RECORDING, State.RESETTING):
                try:
                    self.recorder.request("stop").result(timeout=120)
                except Exception as exc:
                    self.get_logger().warning(f"deactivate: {exc}")
        self._publish_status()
        return super().on_deactivate(state)

    def _acknowledge(self, stamp_ns: int) -> None:
        """From the worker: every required stamped stream has been taken in up to ``stamp_ns``."""
        self._publish_ack(Header(frame_id=self.get_name(), stamp=ns_to_stamp(stamp_ns, Time)))

    def release_sim(self) -> None:
        """Tell a lockstep sim that this recorder needs no more ticks (it finished; not a death)."""
        msg = Header(frame_id=self.get_name())
        msg.stamp.sec = TICK_ACK_RELEASE_SEC
        self._publish_ack(msg)
        if self._ack_pub is not None:
            # the node leaves the graph right after this: make sure the sim has the release first, or
            # it takes the departure for a death
            try:
                self._ack_pub.wait_for_all_acked(Duration(seconds=2.0))
            except (_rclpy_impl.RCLError, InvalidHandle):
                pass

    def _publish_ack(self, msg: Header) -> None:
        if self._ack_pub is None:
            return
        publish_unless_shut_down(self._ack_pub, msg, self.context)

    def _teardown(self, destroy_subscriptions: bool = True) -> None:
        self._active = False
        if self.recorder is not None:
            self.recorder.close(save_pending=True)
            self.release_sim()
        if destroy_subscriptions:
            for sub in self._subs:
                self.destroy_subscription(sub)
            self._subs = []
        self.recorder = None  # what the subscriptions still receive is dropped

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._teardown()
        self._publish_status()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        self._teardown()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ data path
    def _on_message(self, topic: str, data: bytes) -> None:
        rec = self.recorder
        if rec is not None:
            rec.ingest(topic, data, self.get_clock().now().nanoseconds)

    def _decode(self, topic: str, data: bytes):
        return decode_message(data, self._msgtypes.get(topic, ""), self._types[topic])

    # ------------------------------------------------------------------ status
    def _status_tick(self) -> None:
        rec = self.recorder
        if rec is not None and rec.done.is_set() and self.cfg.exit_when_done and not self._exiting:
            self._exiting = True
            fut = rec.request("finalize")

            def finished(cf):
                if cf.exception() is not None:
                    self.get_logger().error(f"finalize: {cf.exception()}")
                    self._exit_code = 1
                elif rec.fatal:  # the session was cut short (disk full): the graph exits non-zero
                    self._error = rec.fatal
                    self.get_logger().error(f"exiting: {rec.fatal}")
                    self._exit_code = 1
                else:
                    self.get_logger().info("session done and dataset finalized; exiting (exit_when_done)")
                    self._exit_code = 0
                    self._push_to_hub()
                self._publish_status()
                self.finished.set()

            fut.add_done_callback(finished)
        period = 1.0 / (self.cfg.status_rate_hz if self.cfg else 1.0)
        if time.monotonic() - self._last_status >= period:
            self._publish_status()

    def _push_to_hub(self) -> None:
        """push_to_hub: the finalized dataset to repo_id; a failure is logged with the command to retry
        (the dataset on disk is complete either way, so the exit code stays 0)."""
        if not self.get_parameter("push_to_hub").value or self.get_parameter("mode").value == "raw":
            return
        from lerobot_dataset.push import plan_push, push

        repo_id, root = (
            str(self.get_parameter("repo_id").value),
            str(self.get_parameter("dataset_root").value),
        )
        retry = f"lerobot-ros-dataset-push {root} {repo_id or '<user>/<name>'}"
        if not repo_id:
            self.get_logger().error(f"push_to_hub is set but repo_id is empty; push it with: {retry}")
            return
        try:
            plan = plan_push(root, repo_id, private=bool(self.get_parameter("private").value))
            self.get_logger().info(f"pushing {plan.describe()}")
            self.get_logger().info(f"pushed to {push(plan)}")
        except Exception as exc:  # huggingface_hub's HTTP, auth and offline errors
            self.get_logger().error(
                f"push to {repo_id} failed: {type(exc).__name__}: {exc}; retry with: {retry}"
            )

    def _publish_status(self) -> None:
        self._last_status = time.monotonic()
        msg = RecorderStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        rec = self.recorder
        if rec is None:
            msg.state = RecorderStatus.STATE_ERROR if self._error else RecorderStatus.STATE_UNCONFIGURED
            msg.message = self._error or "not configured"
        else:
            snap = rec.snapshot()
            msg.state = int(snap.state)
            msg.message = snap.message if self._active or snap.state == State.FINALIZED else "inactive"
            if self._error:
                msg.message = self._error
            if snap.ingest_dropped:
                msg.message += f" [backpressure: {snap.ingest_dropped} message(s) dropped]"
            elif snap.ingest_backlog > 100:
                msg.message += f" [backpressure: {snap.ingest_backlog} message(s) waiting]"
            msg.dataset_root = snap.dataset_root
            msg.task = snap.task
            msg.episode_index = int(snap.episode_index)
            msg.episodes_recorded = int(snap.episodes_recorded)
            msg.total_episodes = int(snap.total_episodes)
            msg.frames = int(snap.frames)
            msg.elapsed_s = float(snap.elapsed_s)
            msg.episode_time_s = float(snap.episode_time_s)
            msg.dropped_ticks = int(snap.dropped_ticks)
            msg.encoder_backlog = int(snap.encoder_backlog)
            msg.streams = [stream_msg(h) for h in snap.streams]
        publish_unless_shut_down(self._status_pub, msg, self.context)

    @property
    def exit_code(self) -> int | None:
        return self._exit_code


class _RosLogger:
    """logging-like facade over the node's rcutils logger (used from the worker thread)."""

    def __init__(self, logger):
        self._l = logger

    def info(self, msg):
        self._l.info(str(msg))

    def warning(self, msg):
        self._l.warning(str(msg))

    def error(self, msg):
        self._l.error(str(msg))


def _wait_until_finished(node: RecorderNode, running) -> int:
    while running() and not node.finished.wait(0.1):
        pass
    return node.exit_code or 0


def _teardown(node: RecorderNode) -> int:
    """The safe state: an episode in progress is saved, the dataset finalized."""
    try:
        # the executor's thread still spins here, so the subscriptions stay until the node is
        # destroyed after it: destroyed from this thread while the executor builds a wait set, a
        # subscription's QoS event handler raises InvalidHandle out of its spin (ros2/rclpy#1284)
        node._teardown(destroy_subscriptions=False)
    except Exception as exc:
        node.get_logger().error(f"shutdown: {exc}")
        return 1
    return 0


def main(args=None) -> int:
    return run_node(RecorderNode, args, autostart=True, main_loop=_wait_until_finished, on_exit=_teardown)


if __name__ == "__main__":
    raise SystemExit(main())
