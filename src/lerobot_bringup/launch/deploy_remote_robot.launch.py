# ros2 launch lerobot_bringup deploy_remote_robot.launch.py policy_path:=/path/to/pretrained_model
# The node list and parameters live in profiles/deploy_remote_robot.yaml (also run by `lerobot-launch deploy_remote_robot`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("deploy_remote_robot")
