# ros2 launch lerobot_bringup record.launch.py [dataset_root:=...]
# The node list and parameters live in profiles/record.yaml (also run by `lerobot-launch record`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("record")
