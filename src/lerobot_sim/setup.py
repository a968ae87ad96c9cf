import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_sim",
    share=("launch", "config", "mjcf"),
    console_scripts=[
        "sim = lerobot_sim.sim_node:main",
        "gym_bridge = lerobot_sim.gym_bridge_node:main",
        "scripted_expert = lerobot_sim.scripted_expert_node:main",
        "corrective_human = lerobot_sim.corrective_human_node:main",
        "evaluator = lerobot_sim.evaluator_node:main",
        "gz_command_relay = lerobot_sim.gz_command_relay_node:main",
        "lerobot-sim-eval = lerobot_sim.eval_cli:main",
    ],
)
