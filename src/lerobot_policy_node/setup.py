import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_policy_node",
    share=("launch", "config"),
    console_scripts=[
        "control_arbiter = lerobot_policy_node.control_arbiter_node:main",
        "lerobot-ros-replay = lerobot_policy_node.replay_cli:main",
        "policy = lerobot_policy_node.policy_node:main",
    ],
)
