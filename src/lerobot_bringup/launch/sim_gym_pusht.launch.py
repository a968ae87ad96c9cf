# ros2 launch lerobot_bringup sim_gym_pusht.launch.py [name:=value ...]
# The node list and parameters live in profiles/sim_gym_pusht.yaml (also run by `lerobot-launch sim_gym_pusht`).
from lerobot_bringup.launch_glue import generate_profile_launch_description


def generate_launch_description():
    return generate_profile_launch_description("sim_gym_pusht")
