# ros2 launch lerobot_bringup so101_teleop_record.launch.py dataset_root:=... task:="..." [leader_port:=... follower_port:=...]
# The node list and parameters live in profiles/so101_teleop_record.yaml (also run by `lerobot-launch so101_teleop_record`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("so101_teleop_record")
