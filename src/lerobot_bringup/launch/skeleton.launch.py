# ros2 launch lerobot_bringup skeleton.launch.py [rate_hz:=100.0]
# The node list and parameters live in profiles/skeleton.yaml (also run by `lerobot-launch skeleton`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("skeleton")
