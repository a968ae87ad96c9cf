# ros2 launch lerobot_bringup record_sim_metaworld.launch.py [task:=reach-v3] [dataset_root:=...]
# The node list and parameters live in profiles/record_sim_metaworld.yaml (also run by `lerobot-launch record_sim_metaworld`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("record_sim_metaworld")
