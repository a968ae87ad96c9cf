# ros2 launch lerobot_bringup profile.launch.py profile:=<name>   (any profile by name or path)
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction


def _expand(context):
    from lerobot_bringup.launch_glue import _nodes_for

    return _nodes_for(context, context.launch_configurations["profile"])


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument("profile", description="profile name (lerobot-launch --list) or YAML path"),
            OpaqueFunction(function=_expand),
        ]
    )
