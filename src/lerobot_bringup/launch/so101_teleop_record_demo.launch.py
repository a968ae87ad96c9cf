# ros2 launch lerobot_bringup so101_teleop_record_demo.launch.py [dataset_root:=... num_episodes:=...]
# The node list and parameters live in profiles/so101_teleop_record_demo.yaml (also run by `lerobot-launch so101_teleop_record_demo`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("so101_teleop_record_demo")
