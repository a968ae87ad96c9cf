# ros2 launch lerobot_bringup hil_sim_so101.launch.py [policy_path:=...]
# The node list and parameters live in profiles/hil_sim_so101.yaml (also run by `lerobot-launch hil_sim_so101`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("hil_sim_so101")
