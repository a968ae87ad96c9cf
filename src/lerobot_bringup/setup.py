import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_bringup",
    share=("launch", "config", "profiles", "urdf", "rviz"),
    console_scripts=[
        "lerobot-launch = lerobot_bringup.runner:main",
        "synthetic_joints = lerobot_bringup.nodes.synthetic_joints_node:main",
        "topic_monitor = lerobot_bringup.nodes.topic_monitor_node:main",
    ],
)
