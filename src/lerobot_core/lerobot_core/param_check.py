"""Parameter names a node was given against the names it declares (ROS-free).

rclpy keeps a parameter override the node never declares without a word, so a misspelt name in a
profile or on the command line (``rate_hzz``) would silently leave the default in force. The node
(``lerobot_core.ros.params.reject_unknown_parameters``) and ``lerobot-launch`` (before it starts
anything) both check names with :func:`check_parameter_names`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Parameters rclpy itself declares (or may declare lazily) on every node.
ROS_OWN = frozenset({"use_sim_time", "start_type_description_service"})
ROS_OWN_PREFIXES = ("qos_overrides.",)


class UnknownParameterError(ValueError):
    """A parameter was given that the node does not declare; the message names both and a close match."""


def unknown_parameters(given: Iterable[str], declared: Iterable[str]) -> list[str]:
    """The names in `given` the node does not declare (rclpy's own parameters are always known)."""
    known = set(declared) | ROS_OWN
    return sorted(n for n in given if n not in known and not n.startswith(ROS_OWN_PREFIXES))


def check_parameter_names(given: Iterable[str], declared: Iterable[str], node: str, where: str = "") -> None:
    """Raise :class:`UnknownParameterError` if `given` holds a name `node` does not declare.

    The message names each unknown parameter, the node, the closest declared name, and (for a typo with
    no close match) every declared name; `where` says where the value came from (a profile file).
    """
    declared = sorted(set(declared) - ROS_OWN)
    unknown = unknown_parameters(given, declared)
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
        parts.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    prefix = f"{where}: " if where else ""
    raise UnknownParameterError(
        f"{prefix}node '{node}' has no parameter{'s' if len(parts) > 1 else ''} {', '.join(parts)}; "
        f"it declares: {', '.join(declared) or 'none'}"
    )


__all__ = ["ROS_OWN", "UnknownParameterError", "check_parameter_names", "unknown_parameters"]
