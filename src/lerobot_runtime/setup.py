import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_runtime",
    share=("test/fixtures",),  # the test checkpoints: the node's, the sim's and bringup's tests use them
    install_requires=["setuptools", "numpy"],
    console_scripts=["lerobot-policy-predict = lerobot_runtime.predict_cli:main"],
)
