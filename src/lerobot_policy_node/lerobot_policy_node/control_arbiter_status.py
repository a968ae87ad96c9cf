"""What the arbiter says: ``arbiter/status`` (lerobot_msgs/ControlStatus: the mode and sources now, the
last transition or refusal with its reason) and the log line of each reply."""

from __future__ import annotations

from builtin_interfaces.msg import Time

from lerobot_core.time import seconds_to_stamp
from lerobot_msgs.msg import ControlStatus

from .arbiter import Arbiter, Reply, Source, Transition


def status_message(arbiter: Arbiter, now_s: float) -> ControlStatus:
    """The arbiter's state at ``now_s`` (call it under the lock that guards the arbiter)."""
    return ControlStatus(
        mode=int(arbiter.mode),
        is_intervention=arbiter.is_intervention,
        transitions=len(arbiter.transitions),
        policy_live=arbiter.is_live(Source.POLICY, now_s),
        leader_live=arbiter.is_live(Source.HUMAN, now_s),
        leader_aligned=arbiter.leader_aligned,
        leader_error_rad=float(arbiter.leader_error),
    )


def with_last_transition(
    msg: ControlStatus, last: Transition | None, event: str, message: str
) -> ControlStatus:
    """The last transition's previous mode and time (none yet: the present mode), and what happened
    last (a transition, a refusal, a lifecycle step) with its reason."""
    msg.previous_mode = int(last.previous) if last is not None else msg.mode
    msg.event, msg.message = event, message
    if last is not None:
        msg.transition_stamp = seconds_to_stamp(last.stamp_s, Time)
    return msg


class ReplyLines:
    """One log line per reply; a refusal repeated word for word (a front end asking again until the
    policy speaks) is logged once, and the next other reply says how many were not shown."""

    def __init__(self):
        self._refused_line: str | None = None  # the last refusal logged
        self._refused_repeats = 0  # its repeats not logged

    def line(self, command: str, reply: Reply) -> str | None:
        """The line to log for this reply, or None for a repeated refusal."""
        line = f"{command}: {reply.message}"
        if not reply.success and line == self._refused_line:
            self._refused_repeats += 1
            return None
        shown = line
        if self._refused_repeats:
            shown += f" (after {self._refused_repeats} more '{self._refused_line}', not shown)"
        self._refused_line, self._refused_repeats = (None if reply.success else line), 0
        return shown
