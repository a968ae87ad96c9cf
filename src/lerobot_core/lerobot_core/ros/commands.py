"""The three joint command messages on the rclpy side: subscribing to all of them, building one.

Which interfaces there are (message type, topic) is :data:`lerobot_core.command.COMMAND_INTERFACES`;
parsing a received one is :func:`lerobot_core.command.parse_command`.
"""

from __future__ import annotations

from functools import cache

from lerobot_core.command import COMMAND_INTERFACES
from lerobot_core.contract.schema import FLOAT64_MULTI_ARRAY, JOINT_STATE
from lerobot_core.ros.device import message_class
from lerobot_core.time import seconds_to_duration

_class = cache(message_class)


def subscribe_commands(node, callback, qos, **kwargs) -> list:
    """One subscription per command interface, all to ``callback`` (which gets any of the three)."""
    return [
        node.create_subscription(_class(msgtype), topic, callback, qos, **kwargs)
        for msgtype, topic in COMMAND_INTERFACES.values()
    ]


def command_message(msgtype: str, names, values, stamp, point_s: float):
    """Position targets ``values`` for the joints ``names`` as a ``msgtype`` command (rclpy).

    A Float64MultiArray carries neither names (the values are in the robot's joint order) nor a stamp;
    a JointTrajectory has one point, reached ``point_s`` seconds after ``stamp``.
    """
    msg = _class(msgtype)()
    values = [float(v) for v in values]
    if msgtype == FLOAT64_MULTI_ARRAY:
        msg.data = values
        return msg
    msg.header.stamp = stamp
    if msgtype == JOINT_STATE:
        msg.name, msg.position = list(names), values
        return msg
    point = _class("trajectory_msgs/msg/JointTrajectoryPoint")(positions=values)
    point.time_from_start = seconds_to_duration(point_s, type(point.time_from_start))
    msg.joint_names, msg.points = list(names), [point]
    return msg
