"""URDF kinematic chains and forward kinematics (ROS-free, numpy only).

Parses the joints of a URDF (origin xyz/rpy, axis, type, limits) and computes, for given joint
positions, each joint's parent->child transform (what a TF broadcaster publishes) and every
link's pose in the root frame.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np


class UrdfError(ValueError):
    """A URDF that cannot be used; the message names the file and the element."""


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    type: str  # revolute, continuous, prismatic, fixed
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    axis: tuple[float, float, float]
    lower: Optional[float] = None
    upper: Optional[float] = None

    @property
    def movable(self) -> bool:
        return self.type in ("revolute", "continuous", "prismatic")


def _floats(text: Optional[str], n: int, default: float, where: str) -> tuple[float, ...]:
    if text is None:
        return (default,) * n
    try:
        values = tuple(float(v) for v in text.split())
    except ValueError:
        raise UrdfError(f"{where}: {text!r} is not {n} numbers") from None
    if len(values) != n:
        raise UrdfError(f"{where}: expected {n} numbers, got {text!r}")
    return values


def parse_urdf(source: Union[str, Path], is_text: bool = False, where: Optional[str] = None) -> RobotModel:
    """Parse a URDF file (or text with ``is_text``); ``where`` names the source in errors."""
    where = where or ("robot_description" if is_text else str(source))
    try:
        root = ET.fromstring(source) if is_text else ET.parse(str(source)).getroot()
    except (ET.ParseError, OSError) as exc:
        raise UrdfError(f"cannot parse URDF {where}: {exc}") from None
    if root.tag != "robot":
        raise UrdfError(f"URDF {where}: root element is <{root.tag}>, expected <robot>")
    links = [link.get("name") for link in root.findall("link")]
    joints = []
    for j in root.findall("joint"):
        name = j.get("name")
        jtype = j.get("type")
        parent = j.find("parent")
        child = j.find("child")
        if name is None or jtype is None or parent is None or child is None:
            raise UrdfError(f"URDF {where}: joint {name!r} needs name, type, <parent> and <child>")
        origin = j.find("origin")
        axis = j.find("axis")
        limit = j.find("limit")
        ctx = f"URDF {where}, joint {name!r}"
        xyz = _floats(origin.get("xyz") if origin is not None else None, 3, 0.0, ctx + " origin xyz")
        rpy = _floats(origin.get("rpy") if origin is not None else None, 3, 0.0, ctx + " origin rpy")
        ax = (
            _floats(axis.get("xyz") if axis is not None else None, 3, 0.0, ctx + " axis")
            if axis is not None
            else (1.0, 0.0, 0.0)
        )
        lower = upper = None
        if limit is not None and jtype in ("revolute", "prismatic"):
            lower = float(limit.get("lower", 0.0))
            upper = float(limit.get("upper", 0.0))
        joints.append(
            UrdfJoint(name, jtype, parent.get("link"), child.get("link"), xyz, rpy, ax, lower, upper)
        )
    return RobotModel(root.get("name", ""), links, joints)


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF convention: R = Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def axis_angle_matrix(axis, angle: float) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    n = np.linalg.norm(a)
    if n == 0:
        return np.eye(3)
    x, y, z = a / n
    c, s = math.cos(angle), math.sin(angle)
    one_c = 1 - c
    return np.array(
        [
            [c + x * x * one_c, x * y * one_c - z * s, x * z * one_c + y * s],
            [y * x * one_c + z * s, c + y * y * one_c, y * z * one_c - x * s],
            [z * x * one_c - y * s, z * y * one_c + x * s, c + z * z * one_c],
        ]
    )


def homogeneous(rotation: np.ndarray, translation) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rotation
    t[:3, 3] = translation
    return t


def quaternion_xyzw(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """Rotation matrix -> unit quaternion (x, y, z, w), w >= 0."""
    m = rotation
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        w, x, y, z = 0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        w, x, y, z = (m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        w, x, y, z = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        w, x, y, z = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s
    if w < 0:
        x, y, z, w = -x, -y, -z, -w
    return (x, y, z, w)


class RobotModel:
    def __init__(self, name: str, links: list[str], joints: list[UrdfJoint]):
        self.name = name
        self.links = links
        self.joints = joints
        self.by_child = {j.child: j for j in joints}
        children = set(self.by_child)
        roots = [link for link in links if link not in children]
        self.root = roots[0] if roots else (joints[0].parent if joints else "")

    @property
    def movable_joints(self) -> list[UrdfJoint]:
        return [j for j in self.joints if j.movable]

    def joint(self, name: str) -> UrdfJoint:
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"URDF {self.name!r} has no joint {name!r}")

    @staticmethod
    def joint_transform(joint: UrdfJoint, q: float = 0.0) -> np.ndarray:
        """parent -> child transform of a joint at position q (rad or m)."""
        origin = homogeneous(rpy_matrix(*joint.rpy), joint.xyz)
        if joint.type in ("revolute", "continuous"):
            motion = homogeneous(axis_angle_matrix(joint.axis, q), (0.0, 0.0, 0.0))
        elif joint.type == "prismatic":
            motion = homogeneous(np.eye(3), np.asarray(joint.axis, dtype=float) * q)
        else:
            motion = np.eye(4)
        return origin @ motion

    def joint_transforms(self, positions: Mapping[str, float], include_fixed: bool = True):
        """[(joint, parent, child, 4x4)] for movable joints with a position (and fixed ones)."""
        out = []
        for j in self.joints:
            if j.movable:
                if j.name not in positions:
                    continue
                out.append((j, j.parent, j.child, self.joint_transform(j, float(positions[j.name]))))
            elif include_fixed:
                out.append((j, j.parent, j.child, self.joint_transform(j)))
        return out

    def forward_kinematics(self, positions: Mapping[str, float]) -> dict[str, np.ndarray]:
        """Pose (4x4) of every link in the root frame; missing joint positions count as 0."""
        poses: dict[str, np.ndarray] = {self.root: np.eye(4)}

        def pose(link: str) -> np.ndarray:
            if link in poses:
                return poses[link]
            j = self.by_child.get(link)
            if j is None:
                raise UrdfError(f"link {link!r} is not connected to the root {self.root!r}")
            p = pose(j.parent) @ self.joint_transform(j, float(positions.get(j.name, 0.0)))
            poses[link] = p
            return p

        for link in self.links:
            pose(link)
        return poses
