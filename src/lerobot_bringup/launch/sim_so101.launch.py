# ros2 launch lerobot_bringup sim_so101.launch.py [name:=value ...]
# The node list and parameters live in profiles/sim_so101.yaml (also run by `lerobot-launch sim_so101`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("sim_so101")
