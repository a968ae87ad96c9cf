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

import os
import threading
import time
from dataclasses import dataclass
from functools import partial

import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.exceptions import InvalidHandle
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy_impl
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from std_msgs.msg import Header
from std_srvs.srv import Trigger

from lerobot_core.contract import Contract, ContractError
from lerobot_core.ros import qos
from lerobot_core.ros.device import message_class
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_dataset import DatasetError
from lerobot_dataset.depth import X265_PRESETS, check_lerobot_version
from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import EpisodeInfo, RecorderStatus, StreamStatus
from lerobot_msgs.srv import StartEpisode
from lerobot_recorder.episode_control import EpisodeConfig, EpisodeError, State, check_episode_boundaries
from lerobot_recorder.live_recorder import MODES, LiveConfig, LiveRecorder, NoMessageYetError, RecorderError

# the lockstep sim's acknowledgement topic (lerobot_sim.bridge_base: TICK_ACK_TOPIC, TICK_ACK_RELEASE)
TICK_ACK_TOPIC = "sim/tick_ack"
TICK_ACK_RELEASE_SEC = 2**31 - 1
QOS_TICK_ACK = qos.RELIABLE
QOS_STATUS = qos.LATCHED
QOS_IMAGES = qos.SENSOR
# joint states / commands: reliable, a short queue absorbs bursts without growing stale
QOS_RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)


@dataclass(frozen=True)
class RecorderNodeConfig:
    contract: str
    live: LiveConfig
    auto_record: bool
    exit_when_done: bool
    status_rate_hz: float
    tick_ack: bool = False


def resolve_contract_path(value: str) -> str:
    """A contract file path, or the name of an installed one (share/lerobot_recorder/config/contracts/)."""
    if os.path.exists(value) or "/" in value:
        return value
    names = [value] if value.endswith((".yaml", ".yml")) else [value + ".yaml", value]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        for name in names:
            path = os.path.join(prefix, "share", "lerobot_recorder", "config", "contracts", name)
            if prefix and os.path.isfile(path):
                return path
    return value


class RecorderNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("recorder", **kwargs)
        self._declare_parameters()
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

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self) -> None:
        p = partial(declare, self)

        p("autostart", False, "configure and activate right after start")
        p("contract", "", "mapping contract YAML, or the name of an installed one (so101_one_camera)")
        p("dataset_root", "", "dataset folder: new/empty, or an existing dataset with resume:=true")
        p("resume", False, "append to the existing dataset in dataset_root")
        p("mode", "dataset", "dataset | raw (mcap bags only) | both")
        p("raw_dir", "", "folder of per-episode raw mcap bags (default: <dataset_root>_raw)")
        p("task", "", "task text of each episode (overrides the contract's fixed task when set)")
        p("episode_time_s", 60.0, "episode length [s] (> 0); with episode_boundaries sim: the longest one")
        p(
            "episode_boundaries",
            "time",
            "time: an episode lasts episode_time_s | sim: an episode is one simulation episode, from the "
            "sim's reset to the step it reports done (success or truncation), read on episode_info_topic",
            read_only=True,
        )
        p(
            "episode_info_topic",
            "sim/episode_info",
            "episode_boundaries sim: the sim's lerobot_msgs/EpisodeInfo topic",
        )
        p("reset_time_s", 60.0, "reset period after each episode [s]; 0 = none")
        p("num_episodes", 50, "episodes a session records (auto_record)", range=(1, 1_000_000))
        p("auto_record", False, "on activate, record num_episodes episodes like lerobot-record")
        p("exit_when_done", False, "exit (code 0) once the session is recorded and the dataset finalized")
        p("streams", [""], "record only these features / topics of the contract ([''] = all)")
        p("non_finite", "refuse", "a message holding NaN or inf: refuse (fail the episode) | drop (skip it)")
        p("vcodec", "libsvtav1", "video codec (libsvtav1, libx264, h264, ...)")
        p("crf", 30, "video quality (lower = better, bigger)", range=(0, 63))
        p(
            "lerobot_version",
            "0.6",
            "LeRobot version the dataset is for: 0.6 (default) or 0.4.4; depth cameras need 0.6",
        )
        p(
            "depth_preset",
            "",
            "libx265 preset of depth cameras ('' = its default, as LeRobot 0.6; ultrafast ~5x faster, "
            "same depth: the encoding is lossless)",
        )
        p(
            "preset",
            "",
            "encoder preset: svt-av1 0-13, x264 ultrafast..veryslow; '' = LeRobot 0.4.4's quality (svt-av1 10)",
        )
        p(
            "encoder_queue_size",
            30,
            "frames each camera encoder may queue before backpressure",
            range=(1, 10000),
        )
        p("latency_margin_s", 0.1, "ticks older than now - margin are settled [s]", range=(0.0, 10.0))
        p("rate_tolerance", 0.9, "a stream is below rate under tolerance x expected rate", range=(0.01, 1.0))
        p(
            "max_ingest_mb",
            512.0,
            "queued message bytes before the oldest are dropped (reported)",
            range=(1.0, 1e6),
        )
        p("status_rate_hz", 1.0, "periodic recorder/status rate [Hz]", range=(0.1, 50.0))
        p(
            "tick_ack",
            False,
            "lockstep: acknowledge on sim/tick_ack each sim tick taken in (a sim listing this node in "
            "required_consumers then waits for the recorder; use with use_sim_time:=true)",
        )
        p("repo_id", "", "Hugging Face Hub dataset id <user or org>/<name> (for push_to_hub)")
        p(
            "push_to_hub",
            False,
            "exit_when_done: push the finalized dataset to repo_id (lerobot-ros-dataset-push)",
        )
        p("private", False, "push_to_hub: create the Hub repo private")

    def _read_config(self) -> RecorderNodeConfig:
        g = self.get_parameter
        contract = resolve_contract_path(str(g("contract").value))
        if not contract:
            raise RecorderError("parameter 'contract' is empty: give the mapping contract YAML")
        root = str(g("dataset_root").value)
        mode = str(g("mode").value)
        if mode not in MODES:
            raise RecorderError(f"parameter 'mode' must be one of {MODES}, got {mode!r}")
        if not root and not (mode == "raw" and g("raw_dir").value):
            raise RecorderError("parameter 'dataset_root' is empty: give the dataset folder")
        streams = tuple(s for s in g("streams").value if s)
        try:
            check_lerobot_version(str(g("lerobot_version").value))
        except DatasetError as exc:
            raise RecorderError(f"parameter 'lerobot_version': {exc}") from None
        if str(g("depth_preset").value) not in ("", *X265_PRESETS):
            raise RecorderError(
                f"parameter 'depth_preset' must be '' or one of {', '.join(X265_PRESETS)}, "
                f"got {g('depth_preset').value!r}"
            )
        boundaries = check_episode_boundaries(str(g("episode_boundaries").value))
        info_topic = self.resolve_topic_name(str(g("episode_info_topic").value))
        episode = EpisodeConfig(
            episode_time_s=float(g("episode_time_s").value),
            reset_time_s=float(g("reset_time_s").value),
            num_episodes=int(g("num_episodes").value),
            task=str(g("task").value),
        )
        live = LiveConfig(
            dataset_root=root or str(g("raw_dir").value),
            mode=mode,
            raw_dir=str(g("raw_dir").value),
            resume=bool(g("resume").value),
            vcodec=str(g("vcodec").value),
            crf=int(g("crf").value),
            preset=str(g("preset").value),
            lerobot_version=str(g("lerobot_version").value),
            depth_preset=str(g("depth_preset").value),
            encoder_queue_size=int(g("encoder_queue_size").value),
            episode=episode,
            latency_margin_s=float(g("latency_margin_s").value),
            rate_tolerance=float(g("rate_tolerance").value),
            max_ingest_mb=float(g("max_ingest_mb").value),
            streams=streams,
            episode_boundaries=boundaries,
            episode_info_topic=info_topic,
            non_finite=str(g("non_finite").value),
        )
        return RecorderNodeConfig(
            contract=contract,
            live=live,
            auto_record=bool(g("auto_record").value),
            exit_when_done=bool(g("exit_when_done").value),
            status_rate_hz=float(g("status_rate_hz").value),
            tick_ack=bool(g("tick_ack").value),
        )

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state) -> TransitionCallbackReturn:
        try:
            cfg = self._read_config()
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
                monotonic=(lambda: self.get_clock().now().nanoseconds / 1e9) if sim_time else time.monotonic,
                logger=_RosLogger(self.get_logger()),
                on_change=self._publish_status,
                on_taken=self._acknowledge if cfg.tick_ack else None,
            )
        except (RecorderError, ContractError, EpisodeError, ValueError, OSError) as exc:
            return self._fail_transition("configure", str(exc))
        self.cfg = cfg
        self.recorder = recorder
        self._types = {t: message_class(s.msgtype) for t, s in recorder.contract.streams.items()}
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
        msg = Header(frame_id=self.get_name())
        msg.stamp.sec, msg.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        self._publish_ack(msg)

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
        try:
            self._ack_pub.publish(msg)
        except (_rclpy_impl.RCLError, InvalidHandle):  # shutting down
            pass

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
        return deserialize_message(data, self._types[topic])

    # ------------------------------------------------------------------ requests
    def _ready(self) -> str | None:
        if self.recorder is None:
            return f"the recorder is not configured{': ' + self._error if self._error else ''}"
        if not self._active:
            return "the recorder is not active (activate it, or start it with autostart:=true)"
        return None

    def _wait(self, cfut):
        """An rclpy Future that completes (waking the executor) when the worker's future does."""
        rfut = Future(executor=self.executor)
        rfut.add_done_callback(lambda _f: None)  # a done callback makes set_result wake the executor

        def relay(cf):
            exc = cf.exception()
            if exc is not None:
                rfut.set_exception(exc)
            else:
                rfut.set_result(cf.result())

        cfut.add_done_callback(relay)
        return rfut

    async def _sleep(self, seconds: float) -> None:
        rfut = Future(executor=self.executor)
        rfut.add_done_callback(lambda _f: None)
        timer = threading.Timer(seconds, lambda: rfut.set_result(None))
        timer.daemon = True
        timer.start()
        await rfut

    async def _srv_start(self, req, resp):
        problem = self._ready()
        if problem:
            resp.success, resp.message, resp.episode_index = False, problem, -1
            return resp
        try:
            out = await self._wait(
                self.recorder.request(
                    "start", task=req.task, episode_time_s=req.episode_time_s, reset_time_s=-1.0
                )
            )
            resp.success, resp.episode_index = True, int(out["episode_index"])
            resp.message = f"recording episode {out['episode_index']}"
        except Exception as exc:  # the message goes back to the caller
            resp.success, resp.message = False, str(exc)
            resp.episode_index = -1
        return resp

    async def _trigger(self, command: str, resp):
        problem = self._ready() if command != "finalize" or self.recorder is None else None
        if problem:
            resp.success, resp.message = False, problem
            return resp
        try:
            out = await self._wait(self.recorder.request(command))
            resp.success = True
            resp.message = str(out.get("message", "") or f"{command} done")
        except Exception as exc:
            resp.success, resp.message = False, str(exc)
        return resp

    async def _srv_stop(self, req, resp):
        return await self._trigger("stop", resp)

    async def _srv_discard(self, req, resp):
        return await self._trigger("discard", resp)

    async def _srv_finalize(self, req, resp):
        return await self._trigger("finalize", resp)

    # ------------------------------------------------------------------ action
    def _goal(self, goal) -> GoalResponse:
        if self._ready() is not None:
            self.get_logger().warning(f"record_episode rejected: {self._ready()}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute_record(self, goal_handle):
        g = goal_handle.request
        result = RecordEpisode.Result()
        rec = self.recorder
        try:
            if rec is None:
                raise RecorderError(self._ready() or "not configured")
            out = await self._wait(
                rec.request(
                    "start", task=g.task, episode_time_s=g.episode_time_s, reset_time_s=g.reset_time_s
                )
            )
        except Exception as exc:
            result.result_code = RecordEpisode.Result.RESULT_ERROR
            result.message = str(exc)
            goal_handle.abort()
            return result
        seq = int(out["seq"])
        outcome_fut = rec.outcome_future(seq)
        cancel_sent = False
        period = 0.2
        while True:
            snap = rec.snapshot()
            if goal_handle.is_cancel_requested and not cancel_sent:
                cancel_sent = True
                cmd = "discard" if g.discard_on_cancel and snap.state == State.RECORDING else "stop"
                try:
                    await self._wait(rec.request(cmd))
                except RecorderError:  # the episode may have ended by itself meanwhile
                    pass
                if outcome_fut.done() and rec.snapshot().state == State.RESETTING:
                    try:
                        await self._wait(rec.request("stop"))  # also end the reset period
                    except RecorderError:  # the reset period ended by itself meanwhile
                        pass
            fb = RecordEpisode.Feedback()
            fb.state = int(snap.state)
            fb.frames = int(snap.frames)
            fb.elapsed_s = float(snap.elapsed_s)
            fb.dropped_ticks = int(snap.dropped_ticks)
            fb.encoder_backlog = int(snap.encoder_backlog)
            fb.streams = [_stream_msg(h) for h in snap.streams]
            goal_handle.publish_feedback(fb)
            # the episode is over; the goal ends with its reset period (unless a new one started)
            if outcome_fut.done() and (
                snap.state != State.RESETTING or snap.episode_seq != seq or cancel_sent
            ):
                break
            if not rclpy.ok(context=self.context):
                break
            await self._sleep(period)
        if not outcome_fut.done():
            result.result_code = RecordEpisode.Result.RESULT_ERROR
            result.message = "shut down before the episode ended"
            goal_handle.abort()
            return result
        oc = outcome_fut.result()
        result.result_code = oc.result_code
        result.message = oc.message
        result.episode_index = int(oc.episode_index)
        result.frames = int(oc.frames)
        result.dropped_ticks = int(oc.dropped_ticks)
        result.duration_s = float(oc.duration_s)
        result.streams = [_stream_msg(h) for h in oc.streams]
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif oc.result_code == RecordEpisode.Result.RESULT_ERROR:
            goal_handle.abort()
        else:
            goal_handle.succeed()
        return result

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
            msg.streams = [_stream_msg(h) for h in snap.streams]
        try:
            self._status_pub.publish(msg)
        except (
            _rclpy_impl.RCLError,
            InvalidHandle,
        ):  # shutting down: the context or publisher is already gone
            pass

    @property
    def exit_code(self) -> int | None:
        return self._exit_code


def _stream_msg(h) -> StreamStatus:
    m = StreamStatus()
    m.name = h.name
    m.topic = h.topic
    m.expected_rate_hz = float(h.expected_rate_hz)
    m.measured_rate_hz = float(h.measured_rate_hz)
    m.received = int(h.received)
    m.dropped_ticks = int(h.dropped_ticks)
    m.age_s = float(h.age_s)
    m.stale = bool(h.stale)
    m.rate_ok = bool(h.rate_ok)
    return m


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
