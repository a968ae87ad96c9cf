import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_drivers",
    share=("launch", "config"),
    console_scripts=[
        "motor_bus = lerobot_drivers.motor_bus_node:main",
        "servo_emulator = lerobot_drivers.servo_emulator_node:main",
        "teleop = lerobot_drivers.teleop_node:main",
        "camera = lerobot_drivers.camera_node:main",
        "robot_description_publisher = lerobot_drivers.robot_description_node:main",
        "joint_state_tf = lerobot_drivers.joint_state_tf_node:main",
        "lerobot-servo-emulator = lerobot_drivers.servo_emulator:main",
        "lerobot-ros-calibrate = lerobot_drivers.calibrate:main",
    ],
)
