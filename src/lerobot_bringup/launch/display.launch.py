# ros2 launch lerobot_bringup display.launch.py [namespace:=...] [urdf:=...] [rviz_config:=...] [rviz:=false]
# The SO-101 and its cameras in rviz, next to a running robot, sim or teleop graph (they publish
# joint_states and cameras/<name>/image_raw):
#   robot_state_publisher   robot_description + TF from joint_states (where the package is installed;
#                           otherwise lerobot_drivers' robot_description_publisher + joint_state_tf)
#   rviz2                   the shipped rviz/so101.rviz (robot model, TF, front camera image)
import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _installed(package: str) -> bool:
    try:
        get_package_share_directory(package)
    except PackageNotFoundError:
        return False
    return True


def _graph(context):
    bringup = get_package_share_directory("lerobot_bringup")
    namespace = LaunchConfiguration("namespace").perform(context)
    urdf = LaunchConfiguration("urdf").perform(context) or os.path.join(bringup, "urdf", "so101.urdf")
    rviz_config = LaunchConfiguration("rviz_config").perform(context) or os.path.join(
        bringup, "rviz", "so101.rviz"
    )
    actions = []
    if _installed("robot_state_publisher"):
        with open(urdf, encoding="utf-8") as f:
            description = f.read()
        actions.append(
            Node(
                package="robot_state_publisher",
                executable="robot_state_publisher",
                namespace=namespace,
                parameters=[{"robot_description": description}],
            )
        )
    else:
        actions += [
            LogInfo(
                msg="robot_state_publisher is not installed: using lerobot_drivers' description and TF nodes"
            ),
            Node(
                package="lerobot_drivers",
                executable="robot_description_publisher",
                namespace=namespace,
                parameters=[{"urdf_path": urdf}],
            ),
            Node(
                package="lerobot_drivers",
                executable="joint_state_tf",
                namespace=namespace,
                parameters=[{"urdf_path": urdf}],
            ),
        ]
    if LaunchConfiguration("rviz").perform(context).lower() == "true":
        actions.append(
            Node(package="rviz2", executable="rviz2", arguments=["-d", rviz_config], output="screen")
        )
    return actions


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "namespace", default_value="", description="robot namespace (topics under it)"
            ),
            DeclareLaunchArgument(
                "urdf", default_value="", description="URDF file (default: urdf/so101.urdf)"
            ),
            DeclareLaunchArgument(
                "rviz_config", default_value="", description="rviz config (default: rviz/so101.rviz)"
            ),
            DeclareLaunchArgument("rviz", default_value="true", description="start rviz2"),
            OpaqueFunction(function=_graph),
        ]
    )
