"""Gazebo (gz sim) glue for the SO-101, ROS-free: plugin blocks added to the URDF and the bridge topic table.

Gazebo is not needed to import this module. ``gz_so101.launch.py`` (lerobot_bringup) uses
:func:`add_gazebo_plugins` to turn the project's URDF into a spawnable model whose topics, through
``config/gz_bridge_so101.yaml`` and the ``gz_command_relay`` node, are exactly the real robot's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from lerobot_core.topics import camera_info_topic, camera_topic
from lerobot_sim.so101_model import JOINT_NAMES

MODEL_NAME = "so101"
GZ_PREFIX = "so101"  # gz transport topics live under /so101/...
RELAY_PREFIX = "gz_commands"  # ROS topics the relay publishes, one std_msgs/Float64 per joint


@dataclass(frozen=True)
class BridgeEntry:
    ros_topic_name: str
    gz_topic_name: str
    ros_type_name: str
    gz_type_name: str
    direction: str  # GZ_TO_ROS or ROS_TO_GZ


def bridge_entries(cameras: tuple[str, ...] = ("front", "wrist")) -> list[BridgeEntry]:
    """The ros_gz_bridge table: what config/gz_bridge_so101.yaml must contain."""
    out = [
        BridgeEntry("/clock", "/clock", "rosgraph_msgs/msg/Clock", "gz.msgs.Clock", "GZ_TO_ROS"),
        BridgeEntry(
            "joint_states",
            f"/{GZ_PREFIX}/joint_states",
            "sensor_msgs/msg/JointState",
            "gz.msgs.Model",
            "GZ_TO_ROS",
        ),
    ]
    for cam in cameras:
        out.append(
            BridgeEntry(
                camera_topic(cam),
                f"/{GZ_PREFIX}/cameras/{cam}/image",
                "sensor_msgs/msg/Image",
                "gz.msgs.Image",
                "GZ_TO_ROS",
            )
        )
        out.append(
            BridgeEntry(
                camera_info_topic(cam),
                f"/{GZ_PREFIX}/cameras/{cam}/camera_info",
                "sensor_msgs/msg/CameraInfo",
                "gz.msgs.CameraInfo",
                "GZ_TO_ROS",
            )
        )
    for joint in JOINT_NAMES:
        out.append(
            BridgeEntry(
                f"{RELAY_PREFIX}/{joint}",
                f"/{GZ_PREFIX}/{joint}/cmd_pos",
                "std_msgs/msg/Float64",
                "gz.msgs.Double",
                "ROS_TO_GZ",
            )
        )
    return out


def _plugin(parent: ET.Element, filename: str, name: str, **children: str) -> ET.Element:
    plugin = ET.SubElement(parent, "plugin", filename=filename, name=name)
    for key, value in children.items():
        ET.SubElement(plugin, key).text = value
    return plugin


def _child_link(robot: ET.Element, joint: str) -> str:
    for j in robot.findall("joint"):
        if j.get("name") == joint:
            return j.find("child").get("link")
    raise ValueError(
        f"URDF has no joint {joint!r}; joints: {[j.get('name') for j in robot.findall('joint')]}"
    )


def _root_link(robot: ET.Element) -> str:
    children = {j.find("child").get("link") for j in robot.findall("joint")}
    roots = [link.get("name") for link in robot.findall("link") if link.get("name") not in children]
    if len(roots) != 1:
        raise ValueError(f"URDF must have exactly one root link, found {roots}")
    return roots[0]


def add_gazebo_plugins(
    urdf: str,
    cameras: tuple[str, ...] = ("front", "wrist"),
    image_size: tuple[int, int] = (480, 640),
    fps: float = 30.0,
    p_gain: float = 20.0,
) -> str:
    """The URDF plus gz-sim systems: joint state publisher, one position controller per joint, cameras.

    The front camera is fixed to the root link looking at the workspace; the wrist camera rides on the
    child link of ``wrist_roll``. Rendering needs the world's Sensors system (config/gz_world_so101.sdf).
    Raises ValueError naming what is missing from the URDF.
    """
    robot = ET.fromstring(urdf)
    if robot.tag != "robot":
        raise ValueError(f"not a URDF: root element is <{robot.tag}>")
    for joint in JOINT_NAMES:
        _child_link(robot, joint)  # every joint must exist
    root = _root_link(robot)
    gz = ET.SubElement(robot, "gazebo")
    _plugin(
        gz,
        "gz-sim-joint-state-publisher-system",
        "gz::sim::systems::JointStatePublisher",
        topic=f"/{GZ_PREFIX}/joint_states",
    )
    for joint in JOINT_NAMES:
        _plugin(
            gz,
            "gz-sim-joint-position-controller-system",
            "gz::sim::systems::JointPositionController",
            joint_name=joint,
            topic=f"/{GZ_PREFIX}/{joint}/cmd_pos",
            p_gain=str(p_gain),
            i_gain="0.0",
            d_gain="0.5",
        )
    mounts = {
        "front": (root, "0.62 0 0.38 0 0.55 3.14159"),
        "wrist": (_child_link(robot, "wrist_roll"), "0 0 0.045 0 0 0"),
    }
    for cam in cameras:
        if cam not in mounts:
            raise ValueError(f"camera {cam!r}: known mounts are {sorted(mounts)}")
        parent, pose = mounts[cam]
        link = f"{cam}_camera_link"
        ET.SubElement(robot, "link", name=link)
        joint = ET.SubElement(robot, "joint", name=f"{cam}_camera_joint", type="fixed")
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=link)
        xyz, rpy = pose.split()[:3], pose.split()[3:]
        ET.SubElement(joint, "origin", xyz=" ".join(xyz), rpy=" ".join(rpy))
        ref = ET.SubElement(robot, "gazebo", reference=link)
        sensor = ET.SubElement(ref, "sensor", name=f"{cam}_camera", type="camera")
        ET.SubElement(sensor, "topic").text = f"/{GZ_PREFIX}/cameras/{cam}/image"
        ET.SubElement(sensor, "update_rate").text = str(fps)
        camera = ET.SubElement(sensor, "camera")
        ET.SubElement(camera, "camera_info_topic").text = f"/{GZ_PREFIX}/cameras/{cam}/camera_info"
        image = ET.SubElement(camera, "image")
        ET.SubElement(image, "height").text = str(image_size[0])
        ET.SubElement(image, "width").text = str(image_size[1])
        ET.SubElement(image, "format").text = "R8G8B8"
    return ET.tostring(robot, encoding="unicode")
