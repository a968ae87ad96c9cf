"""lerobot_sim: MuJoCo/gymnasium simulations on the real robot's ROS 2 topics, and policy evaluation.

Importing the package registers its gymnasium environments (cheap: no MuJoCo import until ``make``).
"""

from lerobot_sim.registration import register_envs

register_envs()
