"""Commands and their effects for the live recorder: start / stop / discard / finalize / shutdown
through the :class:`~lerobot_recorder.episode_control.EpisodeController`, and what its effects do
(begin an episode, save it after the stop's latency margin, discard it, finalize the dataset), with
the episode's outcome and the faults that stop a session (:class:`EpisodeCommands`, mixed into
:class:`~lerobot_recorder.live_recorder.LiveRecorder`)."""

from __future__ import annotations

import time

from lerobot_core.alignment import Aligner
from lerobot_dataset import DatasetError
from lerobot_dataset.storage import is_disk_full

from .episode_control import Effect, EpisodeError, State
from .live_types import (
    NON_FINITE_REFUSALS_TO_STOP,
    RESULT_DISCARDED,
    RESULT_EMPTY,
    RESULT_ERROR,
    RESULT_SAVED,
    EpisodeOutcome,
    RecorderError,
    _Episode,
)
from .rate_audit import StreamHealth
from .raw_bag import RawBagError
from .sim_seeds import record_seed


class EpisodeCommands:
    """The command and effect part of LiveRecorder (runs on its worker thread)."""

    def _command(self, cmd: str, **kw):
        c = self._controller
        now = self._mono()
        if cmd == "start":
            # task: the request's, else the node's parameter, else the contract's (topic or fixed text)
            override = kw.get("task", "") or self.cfg.episode.task
            fallback = self.contract.task_text or f"(from {self.contract.task_topic})"
            plan = c.make_plan(
                override or fallback, kw.get("episode_time_s", 0.0), kw.get("reset_time_s", -1.0)
            )
            if c.state in (State.FINALIZED,):
                raise RecorderError(
                    "the dataset was finalized; reconfigure the node (resume:=true) to append"
                )
            if c.state in (State.RECORDING, State.SAVING):
                raise EpisodeError(f"episode {c.episode_index} is already being recorded")
            self._resolve()
            self._task_override = override or None
            self._apply(c.start(now, plan, session=bool(kw.get("session", False))))
            return {"episode_index": c.episode_index, "seq": self._episode_seq}
        if cmd == "stop":
            self._apply(c.stop(now))
            return {"episode_index": c.episode_index, "message": c.message}
        if cmd == "discard":
            seq = self._episode_seq
            self._apply(c.discard(now))
            return {"episode_index": c.episode_index, "seq": seq}
        if cmd == "finalize":
            self._apply(c.finalize(now))
            return {"message": c.message, "episodes": c.episodes_recorded}
        if cmd == "shutdown":
            c.session = False  # a session ends here: no save or discard below begins another episode
            began_after_stop = self._stop_request is not None and self._episode_seq > self._stop_request[1]
            if c.state == State.RECORDING and (not kw.get("save", True) or began_after_stop):
                # an episode a session began after the stop request (its predecessor's save was under
                # way) holds only what was recorded after the request: none of it is kept
                self._apply(c.discard(now))
            elif c.state == State.RECORDING and self._episode is not None:
                self._episode.cut_short = True  # saved as lerobot-record does on Ctrl-C, and said so
            self._complete_closing(wait=True)
            if c.state not in (State.FINALIZED, State.UNCONFIGURED):
                self._apply(c.finalize(now))
                self._complete_closing(wait=True)
            self._close_writer()
            return {"message": c.message}
        raise RecorderError(f"unknown command {cmd!r}")

    def _apply(self, effects) -> None:
        pending = list(effects)
        while pending:
            eff = pending.pop(0)
            if eff == Effect.BEGIN_EPISODE:
                self._begin_episode()
            elif eff == Effect.SAVE_EPISODE:
                # samples stamped before the stop may still be in flight: take them for one
                # latency margin, then save (the episode is SAVING meanwhile)
                # (until every required stream delivered a sample past the stop, at most 1 s more)
                if pending:
                    raise RuntimeError(f"effects after a save are not supported: {pending}")
                ep = self._episode
                if ep is None:  # its start failed: no data to wait for
                    pending += self._finish_episode(save=True)
                else:
                    ep.t_stop_ns = ep.sim_done_ns if ep.sim_done_ns is not None else self._clock()
                    if self._stop_request is not None:  # the episode ends where the stop was requested
                        ep.t_stop_ns = min(ep.t_stop_ns, max(self._stop_request[0], ep.t_begin_ns or 0))
                    ep.closing_until = self._mono() + self.cfg.latency_margin_s + 1.0
            elif eff == Effect.DISCARD_EPISODE:
                self._finish_episode(save=False, discarded=True)
            elif eff == Effect.FINALIZE:
                self._close_writer()
                self.done.set()
            elif eff == Effect.SESSION_DONE:
                self.log.info(self._controller.message)
                self.done.set()
            self._update_snapshot()
            self._on_change()

    def _complete_closing(self, wait: bool = False) -> None:
        """Save the episode whose stop is pending (waiting out the latency margin first if asked)."""
        ep = self._episode
        if ep is None or ep.closing_until is None:
            return
        # bounded in wall time too: on a sim clock that stopped (the sim is gone) _mono never gets there
        wall_end = time.monotonic() + self.cfg.latency_margin_s + 1.0
        while (
            wait
            and self._episode is ep
            and not ep.settled(self._mono(), self._required_topics)
            and time.monotonic() < wall_end
        ):
            self._drain()
            time.sleep(0.005)
        self._drain(budget_s=None)
        if self._episode is ep:  # not failed meanwhile
            self._apply(self._finish_episode(save=True))

    def _begin_episode(self) -> None:
        resolved = self._resolve()
        self._episode_seq += 1
        self.latencies_ns.clear()
        aligner = Aligner(
            resolved.fps,
            resolved.stream_specs(),
            latency_margin_s=self.cfg.latency_margin_s,
            history_s=self.cfg.history_s,
        )
        ep = self._episode = _Episode(self._controller.episode_index, aligner, None)
        if self.raw is not None:
            ep.bag = self.raw.begin(ep.index, {t: s.msgtype for t, s in resolved.streams.items()})
        plan = self._controller.plan
        if self._sim is None:
            # the episode's duration counts from here, where its data window opens (resolving the
            # contract or opening a raw bag before this must not eat into episode_time_s)
            self._open_window(ep, self._clock())
            what = f"{plan.episode_time_s:g} s"
        elif self._sim.start_ns is not None and self._sim.start_ns > self._placed_ns:
            self._open_window(ep, self._sim.start_ns)  # the sim's current episode, from its reset
            what = f"sim episode {self._sim.episode_index}, at most {plan.episode_time_s:g} s"
        else:
            what = f"from the sim's next reset on {self._info_topic}, at most {plan.episode_time_s:g} s"
        self.log.info(f"recording episode {self._controller.episode_index} ({what}, task {plan.task!r})")

    def _finish_episode(self, save: bool, discarded: bool = False, error: str | None = None) -> list[Effect]:
        c = self._controller
        ep, self._episode = self._episode, None
        bag = ep.bag if ep is not None else None
        t0 = c.phase_start or self._mono()
        duration = max(0.0, self._mono() - t0)
        if ep is not None and save and error is None:
            error = self._write_frames(ep, ep.aligner.finish(self._end_of(ep)))
            if error:
                save = False
        stats = ep.aligner.stats if ep is not None else None
        streams = self._final_health(stats)
        dropped = stats.ticks_dropped if stats else 0
        frames = ep.frames if ep is not None else 0
        index = c.episode_index
        raw_path = ""
        bag_latencies = bag.latencies_ns if bag is not None else None
        code, message = RESULT_SAVED, ""
        ok = False
        empty = False
        try:
            if save and frames > 0:
                if self.writer is not None and self.cfg.mode != "raw":
                    summary = self.writer.save_episode()
                    message = f"episode {index} saved: {summary['length']} frames"
                    if ep.sim_seed is not None and ep.sim_seed >= 0:
                        record_seed(self.root, index, ep.sim_seed)
                        message += f" of sim seed {ep.sim_seed}"
                else:
                    message = f"episode {index} recorded: {frames} frames (raw)"
                if ep is not None and ep.cut_short:
                    message += f", cut short by the shutdown {duration:.1f} s into it"
                if bag is not None:
                    raw_path = str(self.raw.commit(bag, ep.index))
                    bag = None
                    message += f", raw bag {raw_path}"
                ok = True
            elif save:
                code, empty = RESULT_EMPTY, True
                message = (
                    f"episode {index}: nothing recorded: the control arbiter held the robot (paused) in all "
                    f"{ep.paused} aligned ticks (is the policy, or the operator, driving?)"
                    if ep is not None and ep.paused
                    else f"episode {index}: no complete tick was recorded (is every required stream publishing?)"
                )
            else:
                code = RESULT_ERROR if error else RESULT_DISCARDED
                message = f"episode {index} {'failed: ' + error if error else 'discarded'}"
        except (DatasetError, RawBagError, OSError) as exc:
            code, message = RESULT_ERROR, f"episode {index}: saving failed: {exc}"
            error = message
            if is_disk_full(exc):
                self._disk_full_error = str(exc)
        finally:
            if not ok:
                if self.writer is not None and self.cfg.mode != "raw":
                    try:
                        self.writer.discard_episode()
                    except Exception as exc:
                        self.log.error(f"discarding episode {index}: {exc}")
                if bag is not None:
                    self.raw.discard(bag)
        if stats is not None:
            message += f" ({stats.summary()})"
            if stats.first_tick_ns is not None and ep.t_stop_ns is not None:
                # where the recorded ticks sit in the requested window: a source that starts late or
                # goes quiet before the stop shortens the episode here, not as dropped ticks
                message += (
                    f" [ticks {(stats.first_tick_ns - ep.t_begin_ns) / 1e9:.3f} s after start to "
                    f"{(ep.t_stop_ns - stats.last_tick_ns) / 1e9:.3f} s before stop; "
                    f"start-stop {(ep.t_stop_ns - ep.t_begin_ns) / 1e9:.3f} s]"
                )
        lat = self.latency_summary(bag_latencies)
        if lat:
            message += f" [latency {lat}]"
        (self.log.error if code == RESULT_ERROR else self.log.info)(message)
        outcome = EpisodeOutcome(
            seq=self._episode_seq,
            result_code=code,
            message=message,
            episode_index=index,
            frames=frames,
            dropped_ticks=dropped,
            duration_s=duration,
            streams=streams,
            raw_bag=raw_path,
        )
        with self._snap_lock:
            self._outcomes[outcome.seq] = outcome
            fut = self._outcome_futures.get(outcome.seq)
        if fut is not None and not fut.done():
            fut.set_result(outcome)
        self._last_outcome = outcome
        if self._disk_full_error is not None and self.fatal is None:
            self._stop_on_full_disk(index)
            return []
        self._non_finite_refusals = 0 if ok else self._non_finite_refusals
        if self._non_finite_refusals >= NON_FINITE_REFUSALS_TO_STOP and self.fatal is None:
            saved = c.saved_before + c.episodes_recorded
            self._stop_session(
                f"recording stopped: {self._non_finite_refusals} episodes in a row were refused for NaN or inf "
                f"values ({error}); the source keeps sending them. The {saved} episode(s) saved before are "
                "intact. Fix the source, or record without such messages with non_finite:=drop"
            )
            return []
        if discarded:
            return []
        if c.state == State.SAVING:
            return c.saved(self._mono(), ok=ok, empty=empty)
        return []

    def _stop_on_full_disk(self, index: int) -> None:
        """The disk is full: stop recording (each further episode would be recorded and thrown away)."""
        c = self._controller
        saved = c.saved_before + c.episodes_recorded
        err = self._disk_full_error
        if "was not saved" not in err:  # an encoder's error: say what it means for the dataset
            err = (
                f"disk full ({err}); episode {index} was not saved, the {saved} episode(s) saved "
                "before it are intact"
            )
        self._stop_session(f"recording stopped: {err}. Free space, then record more with resume:=true")

    def _stop_session(self, reason: str) -> None:
        """A fault every further episode would meet: stop recording and close the dataset (what is on
        disk stays as it was); the node exits non-zero with exit_when_done."""
        c = self._controller
        self.fatal = reason
        self.log.error(self.fatal)
        c.fail(self.fatal)
        try:
            self._close_writer()
        except Exception as exc:
            self.log.error(f"closing the dataset: {exc}")
        self._update_snapshot()
        self.done.set()

    @staticmethod
    def _end_of(ep: _Episode) -> int | None:
        """The last time a saved episode's ticks reach: the sim's done step when the sim ended it, else
        the aligner's default end (its newest common sample + its end slack), never past the stop."""
        if ep.end_ns is not None:
            return ep.end_ns
        covered = ep.aligner.covered_ns
        if covered is None or ep.t_stop_ns is None:
            return None
        return min(covered + ep.aligner.end_slack_ns, ep.t_stop_ns)

    def _final_health(self, stats) -> list[StreamHealth]:
        out = []
        for spec in self.audit_specs:
            s = stats.streams.get(spec.name) if stats is not None else None
            h = next((x for x in self._health if x.name == spec.name), None)
            out.append(
                StreamHealth(
                    name=spec.name,
                    topic=spec.topic,
                    expected_rate_hz=spec.expected_rate_hz,
                    measured_rate_hz=(s.rate_hz or 0.0) if s is not None else 0.0,
                    received=s.received if s is not None else 0,
                    dropped_ticks=s.dropped_ticks if s is not None else 0,
                    age_s=h.age_s if h else -1.0,
                    stale=h.stale if h else True,
                    rate_ok=(spec.expected_rate_hz <= 0)
                    or (
                        s is not None
                        and (s.rate_hz or 0.0) >= spec.expected_rate_hz * self.cfg.rate_tolerance
                    ),
                    judged=True,
                )
            )
        return out
