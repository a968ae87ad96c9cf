"""The one way a node of the stack declares a parameter: with a descriptor (description, range, read-only)."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from lerobot_core.param_check import UnknownParameterError, check_parameter_names


def declare(
    node,
    name: str,
    default: Any,
    description: str,
    *,
    read_only: bool = True,
    range: tuple[float, float] | None = None,
) -> Any:
    """Declare `name` on `node` and return its value (the override from the command line or a params file,
    else `default`).

    Read-only unless a live change is safe. `range` = (low, high), inclusive: an integer range (step 1)
    for an integer default, a floating-point range otherwise.
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    if range is not None:
        low, high = range
        if isinstance(default, int) and not isinstance(default, bool):
            descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
        else:
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high))
            ]
    return node.declare_parameter(name, default, descriptor).value


def declared_defaults(node) -> dict[str, Any]:
    """Every parameter the node declared (but rclpy's own use_sim_time) and its current value."""
    names = [n for n in node.list_parameters([], 0).names if n != "use_sim_time"]
    return {param.name: param.value for param in node.get_parameters(names)}


def reject_unknown_parameters(node) -> None:
    """Raise :class:`UnknownParameterError` if the node was given a parameter it did not declare.

    Call once the node has declared all its parameters (``run_node`` does, right after building the
    node). The overrides are those rclpy read for this node from ``--params-file`` and ``-p`` (and
    the constructor's ``parameter_overrides``); rclpy would ignore an undeclared one without a word.
    """
    if getattr(node, "_allow_undeclared_parameters", False):
        return  # the node takes any name by design
    given = getattr(node, "_parameter_overrides", {}) or {}
    declared = node.list_parameters([], 0).names
    check_parameter_names(given, declared, node.get_fully_qualified_name())


__all__ = ["UnknownParameterError", "declare", "declared_defaults", "reject_unknown_parameters"]
