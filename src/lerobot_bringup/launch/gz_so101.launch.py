# ros2 launch lerobot_bringup gz_so101.launch.py [namespace:=...] [headless:=true]
# The SO-101 in Gazebo (gz sim) on the real robot's topics, for workspaces that have Gazebo with
# ros_gz_sim, ros_gz_bridge and robot_state_publisher. Not a profile: `gz sim` is not a ROS node.
#   gz sim (world config/gz_world_so101.sdf of lerobot_sim)
#   robot_state_publisher   robot_description = urdf/so101.urdf + gz plugins (lerobot_sim.gazebo)
#   ros_gz_sim create       spawns the model from the robot_description topic
#   ros_gz_bridge           config/gz_bridge_so101.yaml: joint_states, cameras/<name>/image_raw|camera_info, /clock
#   gz_command_relay        joint_commands | forward_position_controller/commands | joint_trajectory -> per-joint gz
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lerobot_sim.gazebo import MODEL_NAME, add_gazebo_plugins

BRIDGE_CONFIG = "gz_bridge_so101.yaml"
WORLD = "gz_world_so101.sdf"


def _graph(context):
    bringup = get_package_share_directory("lerobot_bringup")
    sim = get_package_share_directory("lerobot_sim")
    namespace = LaunchConfiguration("namespace").perform(context)
    headless = LaunchConfiguration("headless").perform(context).lower() == "true"
    with open(os.path.join(bringup, "urdf", "so101.urdf"), encoding="utf-8") as f:
        description = add_gazebo_plugins(f.read())
    world = os.path.join(sim, "config", WORLD)
    gz_sim = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")
        ),
        launch_arguments={"gz_args": f"-r {'-s ' if headless else ''}{world}"}.items(),
    )
    sim_time = {"use_sim_time": True}
    return [
        gz_sim,
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            namespace=namespace,
            parameters=[{"robot_description": description, **sim_time}],
        ),
        Node(
            package="ros_gz_sim",
            executable="create",
            namespace=namespace,
            arguments=["-topic", "robot_description", "-name", MODEL_NAME, "-z", "0.0"],
        ),
        Node(
            package="ros_gz_bridge",
            executable="parameter_bridge",
            namespace=namespace,
            parameters=[{"config_file": os.path.join(sim, "config", BRIDGE_CONFIG), **sim_time}],
        ),
        Node(
            package="lerobot_sim",
            executable="gz_command_relay",
            namespace=namespace,
            parameters=[{"autostart": True, **sim_time}],
        ),
    ]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "namespace", default_value="", description="robot namespace (topics under it)"
            ),
            DeclareLaunchArgument(
                "headless", default_value="false", description="run gz sim without its GUI"
            ),
            OpaqueFunction(function=_graph),
        ]
    )
