import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_dataset",
    # the LeRobot-written datasets and the LeRobot-side checkers, for the tests of the packages above:
    # lerobot_core.ament.share_path("lerobot_dataset") / "test/fixtures"
    share=("test/fixtures",),
    install_requires=["setuptools", "numpy", "pyarrow", "av"],
    extras_require={"test": ["pytest"], "push": ["huggingface_hub", "pyyaml"]},
    console_scripts=[
        "lerobot-dataset-info = lerobot_dataset.info:main",
        "lerobot-ros-dataset-push = lerobot_dataset.push:main",
    ],
)
