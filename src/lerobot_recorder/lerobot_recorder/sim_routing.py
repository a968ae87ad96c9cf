"""Sim episode boundaries for the live recorder (``episode_boundaries: sim``): one dataset episode is
one simulation episode. The sim's episode info (reset, done step, seed) decides where each episode
begins and ends; stamped samples wait until the info that places them has arrived, then go into the
episode, are kept for the next one, or are dropped (:class:`SimEpisodeRouting`, mixed into
:class:`~lerobot_recorder.live_recorder.LiveRecorder`)."""

from __future__ import annotations

from lerobot_core.alignment import RECEIVE
from lerobot_core.contract import LATCHED_TYPES
from lerobot_core.time import NS_PER_S as _NS
from lerobot_core.time import stamp_to_ns

from .episode_control import BEGIN, END, SimEpisodes, State
from .live_types import cdr_header_stamp


class SimEpisodeRouting:
    """The sim-boundary part of LiveRecorder: its state (``_sim``, the held samples) and its routing."""

    def _init_sim_routing(self) -> None:
        """Sim boundaries: stamped samples wait in _held until the sim's episode info places them."""
        self._sim = SimEpisodes() if self.cfg.episode_boundaries == "sim" else None
        self._info_topic = self.cfg.episode_info_topic
        self._held: list[tuple[str, bytes, int, int]] = []
        self._placed_ns = -1  # newest stamp of a sample taken into an episode or dropped
        self._releasing = False
        if self._sim is not None:
            # lockstep: the sim steps on only once the recorder has its step's episode info too
            self._ack_topics.add(self._info_topic)
            self._held_topics = {
                t
                for t, st in self.contract.streams.items()
                if st.timeline != RECEIVE and st.msgtype not in LATCHED_TYPES
            }

    def _route_sim(self, topic: str, data: bytes, recv: int) -> bool:
        """Sim boundaries: take in episode info, hold stamped samples until it places them (True)."""
        if topic == self._info_topic:
            try:
                msg = self._decode(topic, data)
            except ValueError as exc:
                self._bad_message(topic, exc)
                return True
            stamp = stamp_to_ns(msg.header.stamp)
            events = self._sim.update(
                stamp, msg.episode_index, msg.step, msg.terminated or msg.truncated, msg.seed
            )
            for kind, t in events:
                if kind == BEGIN:
                    with self._audit_lock:  # the reset's pause is nobody's fault: rates count afresh
                        self._audit.reset(self._mono())
                    self._open_at_reset(t)
                elif kind == END:
                    self._stop_at_done(t, msg)
            self._release()
            return True
        if topic not in self._held_topics:
            return False
        try:
            stamp = cdr_header_stamp(data)
        except ValueError:
            return False
        self._held.append((topic, data, recv, stamp))
        if stamp <= self._sim.newest_ns:
            self._release()
        return True

    def _release(self) -> None:
        """Place every held sample the sim's episode info covers: into the episode, kept, or dropped."""
        if self._releasing or self._sim is None or not self._held:
            return
        self._releasing = True
        try:
            keep = []
            for item in self._held:
                topic, data, recv, stamp = item
                ep = self._episode
                if stamp > self._sim.newest_ns:
                    keep.append(item)  # its sim episode is not known yet
                    continue
                if ep is not None and ep.t_begin_ns is not None:
                    if ep.t_stop_ns is not None and stamp > ep.t_stop_ns:
                        # past the episode that is closing: the next one may begin with it
                        ep.passed_stop.add(topic)
                        keep.append(item)
                        continue
                    if stamp >= ep.t_begin_ns:
                        self._placed_ns = max(self._placed_ns, stamp)
                        self._take(topic, data, recv)
                        continue
                elif ep is None and self._keep_for_next(stamp):
                    keep.append(item)  # an episode about to begin starts with the sim's current one
                    continue
                self._placed_ns = max(self._placed_ns, stamp)  # not part of any recorded episode
            self._held = keep
        finally:
            self._releasing = False

    def _keep_for_next(self, stamp: int) -> bool:
        """No episode: keep a sample the next episode begins with (the sim's current one, from its reset).

        Between two episodes of a session (saving) the sim's current episode began after the stop;
        before a session (idle) only its reset tick is kept: the lockstep sim waits there for the
        recorder (no acknowledgement while idle), and a sim that ran on is joined at its next reset.
        """
        start = self._sim.start_ns
        if start is None or stamp < start:
            return False
        if self._controller.state == State.SAVING:
            return True
        return self._controller.state == State.IDLE and self._sim.at_start

    def _open_at_reset(self, t_ns: int) -> None:
        """The sim reset at ``t_ns``: an episode waiting for it begins there."""
        ep = self._episode
        if ep is not None and ep.t_begin_ns is None and t_ns > self._placed_ns:
            self._open_window(ep, t_ns)

    def _stop_at_done(self, t_ns: int, info) -> None:
        """The sim episode ended with its step at ``t_ns``: the episode recording it ends there, inclusive."""
        ep = self._episode
        c = self._controller
        if ep is None or ep.t_begin_ns is None or ep.t_stop_ns is not None or c.state != State.RECORDING:
            return
        if t_ns < ep.t_begin_ns:
            return
        ep.sim_done_ns = t_ns
        # the aligner's grid (exact 1/fps) runs a few ns ahead of the sim's (whole-ns periods): the done
        # step's tick lies just past its stamp; half a period takes it and nothing after it
        ep.end_ns = t_ns + int(_NS / (2 * self.contract.fps))
        outcome = "success" if info.is_success else ("truncated" if info.truncated else "terminated")
        self.log.info(
            f"sim episode {info.episode_index} (seed {info.seed}) ended after {info.step} steps ({outcome})"
        )
        self._apply(c.stop(self._mono()))
