# ros2 launch lerobot_bringup deploy.launch.py policy_path:=/path/to/pretrained_model
# The node list and parameters live in profiles/deploy.yaml (also run by `lerobot-launch deploy`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("deploy")
