"""Turn a graph profile into a launch description for `ros2 launch` (real ROS 2 workspaces).

Imported only by the launch files; `launch` / `launch_ros` are imported lazily so the rest of the
package works where they are not installed.
"""

from __future__ import annotations


def generate_profile_launch_description(profile_name: str):
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    from lerobot_bringup.profile import load_profile

    declared = load_profile(profile_name)  # defaults only: for the argument list and early errors
    actions = [
        DeclareLaunchArgument(a.name, default_value=str(a.default), description=a.description)
        for a in declared.arguments.values()
    ]
    actions.append(OpaqueFunction(function=_nodes_for, args=[profile_name]))
    return LaunchDescription(actions)


def _nodes_for(context, profile_name: str):
    from launch.actions import EmitEvent, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch_ros.actions import Node

    from lerobot_bringup.profile import load_profile, package_installed, parse_overrides

    declared = load_profile(profile_name)
    overrides = parse_overrides([f"{k}:={context.launch_configurations[k]}" for k in declared.arguments])
    profile = load_profile(profile_name, overrides)
    from lerobot_bringup.runner import check_arguments

    check_arguments(profile)  # a required argument left out, a checkpoint that is not there
    actions = []
    for spec in profile.nodes:
        if spec.skip_reason(package_installed):
            continue  # e.g. our TF node where robot_state_publisher is installed
        node = Node(
            package=spec.package,
            executable=spec.executable,
            name=spec.name,
            namespace=spec.namespace or None,
            parameters=[spec.parameters] if spec.parameters else None,
            remappings=list(spec.remappings) or None,
            arguments=list(spec.args) or None,
            prefix=spec.python or None,  # another venv's interpreter (deploy_remote_gpu's python:=)
            output="screen",
            emulate_tty=True,
        )
        actions.append(node)
        if spec.required:
            actions.append(
                RegisterEventHandler(
                    OnProcessExit(
                        target_action=node,
                        on_exit=[EmitEvent(event=Shutdown(reason=f"required node '{spec.name}' exited"))],
                    )
                )
            )
    return actions
