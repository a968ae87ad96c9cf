"""Profiles, launch wrappers and config defaults agree with the nodes; the main-job graph lifts the cube."""

import ast
import os
from importlib.metadata import distribution
from pathlib import Path

import pytest
import rclpy
import yaml

from lerobot_bringup.profile import load_profile
from lerobot_core.ament import share_path
from lerobot_core.ros.params import declared_defaults
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_msgs.msg import EpisodeInfo

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

BRINGUP = Path(__file__).resolve().parents[1]
PROFILES = ["sim_so101", "sim_so101_robot", "sim_gym_pusht", "sim_gym_aloha"]
# every node with a defaults file: (package, executable, config/<file>)
CONFIGS = [
    ("lerobot_sim", "sim", "sim.yaml"),
    ("lerobot_sim", "gym_bridge", "gym_bridge.yaml"),
    ("lerobot_sim", "gz_command_relay", "gz_command_relay.yaml"),
    ("lerobot_drivers", "motor_bus", "motor_bus.yaml"),
    ("lerobot_policy_node", "policy", "policy.yaml"),
]


def _node_classes():
    from lerobot_drivers.motor_bus_node import MotorBusNode
    from lerobot_policy_node.policy_node import PolicyNode
    from lerobot_sim.gym_bridge_node import GymBridgeNode
    from lerobot_sim.gz_command_relay_node import GzCommandRelayNode
    from lerobot_sim.scripted_expert_node import ScriptedExpertNode
    from lerobot_sim.sim_node import SimNode

    return {
        "sim": SimNode,
        "gym_bridge": GymBridgeNode,
        "scripted_expert": ScriptedExpertNode,
        "gz_command_relay": GzCommandRelayNode,
        "motor_bus": MotorBusNode,
        "policy": PolicyNode,
    }


@pytest.fixture(scope="module")
def declared():
    """Parameter names and defaults each executable declares (nodes built on a private context)."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    out = {}
    try:
        for exe, cls in _node_classes().items():
            node = cls(context=ctx)
            out[exe] = {
                name: value
                for name, value in declared_defaults(node).items()
                if name not in ("use_sim_time", "start_type_description_service")
            }
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    return out


@pytest.mark.parametrize("name", PROFILES)
def test_profile_nodes_and_parameters_exist(name, declared):
    profile = load_profile(BRINGUP / "profiles" / f"{name}.yaml", share_lookup=lambda pkg: f"/share/{pkg}")
    # the executables lerobot_sim installs (its console scripts), as the installed package says
    installed = {
        e.name: e.value for e in distribution("lerobot_sim").entry_points if e.group == "console_scripts"
    }
    for node in profile.nodes:
        assert node.package == "lerobot_sim"
        assert installed.get(node.executable, "").startswith("lerobot_sim."), node.executable
        unknown = set(node.parameters) - set(declared[node.executable])
        assert not unknown, f"{name}: {node.name} sets undeclared parameter(s) {sorted(unknown)}"
    wrapper = ast.parse((BRINGUP / "launch" / f"{name}.launch.py").read_text())
    calls = [
        n
        for n in ast.walk(wrapper)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "generate_profile_launch_description"
    ]
    assert [c.args[0].value for c in calls] == [name]


@pytest.mark.parametrize(("package", "exe", "file"), CONFIGS)
def test_config_defaults_equal_the_declared_defaults(package, exe, file, declared):
    params = yaml.safe_load((share_path(package) / "config" / file).read_text())[exe]["ros__parameters"]
    assert params == {k: v for k, v in declared[exe].items()}


@pytest.mark.ros
def test_main_job_graph_runs_the_scripted_expert_to_success(ros_node):
    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    args = ["sim_so101", "image_width:=64", "image_height:=48"]
    with RosProcess("lerobot_bringup", "lerobot-launch", args=args, ros_args=False) as graph:
        ok = wait_until(lambda: any(m.is_success and m.terminated for m in info.messages), 60)
        assert ok, graph.output()[-3000:]
    done = [m for m in info.messages if m.terminated][0]
    # realtime on a loaded machine may cost an episode; seeds follow the profile's seed:=0
    assert done.seed == done.episode_index and done.max_reward > 0.9


@pytest.mark.ros
def test_deploy_sim_says_when_the_policy_drives_at_what_rate_and_how_episodes_end():
    """`lerobot-launch deploy_sim_so101` with the ACT fixture: the lines a user reads while it runs."""
    act = share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model"
    args = ["deploy_sim_so101", f"policy_path:={act}", "image_width:=64", "image_height:=48"]
    with RosProcess("lerobot_bringup", "lerobot-launch", args=args, ros_args=False) as graph:
        wanted = (
            "driving: the policy commands the robot",  # once, when the first command goes out
            "driving: last 10 s: control",  # then the rates every 10 s
            "episode 0 (seed 0) ended: timeout after 300 steps (10.0 s), reward sum",  # the sim's verdict
        )
        ok = wait_until(lambda: all(w in graph.output() for w in wanted), 120)
        out = graph.output()
        assert ok, out[-4000:]
    rates = [line for line in out.splitlines() if "driving: last 10 s" in line][0]
    assert "[policy]" in rates and " Hz of 30 (" in rates and "inference " in rates, rates
    start = [line for line in out.splitlines() if "the policy commands the robot" in line][0]
    assert "control 30 Hz, policy 30 fps, 5 action(s) used per chunk" in start, start
