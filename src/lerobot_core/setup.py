import sys
from glob import glob
from pathlib import Path

# the packaging every package of the workspace shares: src/lerobot_core/ament_setup.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lerobot_core"))
from ament_setup import ament_python_package

ament_python_package(
    "lerobot_core",
    data_files=[
        ("share/lerobot_core/config", glob("lerobot_core/config/*.xml"))
    ],  # for FASTDDS_DEFAULT_PROFILES_FILE
    # config/contracts: the shipped mapping contracts, found by name (lerobot_core.contract.shipped)
    package_data={"lerobot_core": ["config/*.xml", "config/contracts/*.yaml"]},
    install_requires=["setuptools", "numpy", "pyyaml"],
    zip_safe=False,  # dds_transport and contract.shipped read config/ beside their modules
    # fixtures and a per-process ROS_DOMAIN_ID for every pytest run in the workspace (registered here
    # only: a second registration would load the plugin twice)
    entry_points={"pytest11": ["lerobot_ros = lerobot_core.ros.testing.pytest_plugin"]},
)
