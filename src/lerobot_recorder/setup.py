import sys
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_recorder",
    console_scripts=[
        "recorder = lerobot_recorder.recorder_node:main",
        "lerobot-record-control = lerobot_recorder.record_control:main",
        "lerobot-bag-import = lerobot_recorder.bag_import_cli:main",
        "lerobot-bag-export = lerobot_recorder.bag_export:main",
        "lerobot-ros-dataset-viz = lerobot_recorder.dataset_viz:main",
    ],
)
