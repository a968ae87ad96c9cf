"""The recorder node's requests: the services (start / stop / discard / finalize) and the
``recorder/record_episode`` action, as coroutines on the node's executor that wait for the
recorder's worker (:class:`RecorderRequests`, mixed into the node)."""

from __future__ import annotations

import threading

import rclpy
from rclpy.action import GoalResponse
from rclpy.task import Future

from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import StreamStatus
from lerobot_recorder.episode_control import State
from lerobot_recorder.live_recorder import RecorderError


def stream_msg(h) -> StreamStatus:
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


class RecorderRequests:
    """Services and action of :class:`~lerobot_recorder.recorder_node.RecorderNode` (uses its
    ``recorder``, ``_active``, ``_error``, ``executor`` and ``context``)."""

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
            fb.streams = [stream_msg(h) for h in snap.streams]
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
        result.streams = [stream_msg(h) for h in oc.streams]
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif oc.result_code == RecordEpisode.Result.RESULT_ERROR:
            goal_handle.abort()
        else:
            goal_handle.succeed()
        return result
