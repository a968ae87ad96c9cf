"""joint_state_tf: joint states -> TF (what robot_state_publisher does), where tf2_msgs exists.

Subscribes `joint_states`, computes each joint's parent->child transform from the URDF
(`robot_description` topic or `urdf_path`), and publishes tf2_msgs/TFMessage on /tf (movable
joints, stamped with the joint state's stamp) and /tf_static (fixed joints, transient local).
tf2_msgs is not installable everywhere (not on PyPI): without it the node says so with a warning and
exits cleanly (0), as an optional part of a graph, not a failure;
the forward kinematics live in lerobot_drivers.kinematics and are tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_drivers.kinematics import UrdfError, parse_urdf, quaternion_xyzw

try:  # guarded: tf2_msgs is not on PyPI (see docs/drivers.md)
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - depends on the installation
    TFMessage = None

MISSING_TF2 = (
    "tf2_msgs is not installed in this environment, so no TF can be published. Install the ROS package "
    "(apt install ros-$ROS_DISTRO-tf2-msgs) in a ROS workspace; the robot description and joint_states still work."
)


@dataclass(frozen=True)
class JointStateTfConfig:
    urdf_path: str
    frame_prefix: str


def transforms_to_msgs(model, positions, stamp, frame_prefix="", include_fixed=False, movable=True):
    out = []
    for joint, parent, child, t in model.joint_transforms(positions, include_fixed=include_fixed):
        if joint.movable != movable:
            continue
        msg = TransformStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = frame_prefix + parent
        msg.child_frame_id = frame_prefix + child
        msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (
            float(v) for v in t[:3, 3]
        )
        q = quaternion_xyzw(t[:3, :3])
        r = msg.transform.rotation
        r.x, r.y, r.z, r.w = q
        out.append(msg)
    return out


class JointStateTfNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("joint_state_tf", **kwargs)
        self.cfg = JointStateTfConfig(
            declare(self, "urdf_path", "", "URDF file; empty = robot_description topic"),
            declare(self, "frame_prefix", "", "prefix for TF frame ids"),
        )
        self.model = None
        self.pub_tf = self.create_publisher(TFMessage, "/tf", qos.TF)
        self.pub_static = self.create_publisher(TFMessage, "/tf_static", qos.LATCHED)
        if self.cfg.urdf_path:
            self._set_model(parse_urdf(self.cfg.urdf_path))
        else:
            self.create_subscription(String, "robot_description", self._on_description, qos.LATCHED)
        self.create_subscription(JointState, "joint_states", self._on_joint_states, qos.RELIABLE)

    def _set_model(self, model) -> None:
        self.model = model
        stamp = self.get_clock().now().to_msg()
        static = transforms_to_msgs(
            model, {}, stamp, self.cfg.frame_prefix, include_fixed=True, movable=False
        )
        self.pub_static.publish(TFMessage(transforms=static))
        self.get_logger().info(
            f"TF for {model.name}: {len(model.movable_joints)} movable, {len(static)} fixed joints"
        )

    def _on_description(self, msg: String) -> None:
        try:
            self._set_model(parse_urdf(msg.data, is_text=True))
        except UrdfError as exc:
            self.get_logger().error(str(exc))

    def _on_joint_states(self, msg: JointState) -> None:
        if self.model is None or len(msg.name) != len(msg.position):
            return
        tfs = transforms_to_msgs(
            self.model,
            dict(zip(msg.name, msg.position, strict=False)),
            msg.header.stamp,
            self.cfg.frame_prefix,
        )
        if tfs:
            self.pub_tf.publish(TFMessage(transforms=tfs))


def main(args=None) -> int:
    if TFMessage is None:

        def warn_and_exit():
            # its parameters (urdf_path, ...) are taken as given: nothing here uses them
            node = rclpy.create_node("joint_state_tf", automatically_declare_parameters_from_overrides=True)
            node.get_logger().warning(MISSING_TF2)
            return node

        # run_node: a Ctrl-C while it starts or ends is no traceback
        return run_node(warn_and_exit, args, spin=lambda node: None)
    return run_node(JointStateTfNode, args, errors=(UrdfError, OSError), error_prefix="joint_state_tf")


if __name__ == "__main__":
    raise SystemExit(main())
