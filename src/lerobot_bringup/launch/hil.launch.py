# ros2 launch lerobot_bringup hil.launch.py [policy_path:=...]
# The node list and parameters live in profiles/hil.yaml (also run by `lerobot-launch hil`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("hil")
