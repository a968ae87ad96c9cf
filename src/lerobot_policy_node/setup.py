import os
from glob import glob

from setuptools import find_packages, setup

package_name = "lerobot_policy_node"


def share_tree(*folders):
    """Install every file under the given folders to share/<pkg>/<same relative path>."""
    entries = {}
    for folder in folders:
        for path in glob(os.path.join(folder, "**", "*"), recursive=True):
            if os.path.isfile(path) and "__pycache__" not in path:
                entries.setdefault(os.path.join("share", package_name, os.path.dirname(path)), []).append(
                    path
                )
    return sorted(entries.items())


with open("package.xml") as f:
    DESCRIPTION = f.read().split("<description>")[1].split("</description>")[0]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"] + glob("README.md")),
        ("bin", sorted(glob("bin/*"))),  # lerobot-* commands by name from install/setup.bash
        *share_tree("launch", "config"),
    ],
    install_requires=["setuptools"],
    extras_require={"test": ["pytest"]},  # lets `colcon test` run the pytest suite
    zip_safe=True,
    maintainer="lerobot_ros maintainers",
    maintainer_email="maintainers@lerobot-ros.dev",
    description=DESCRIPTION,
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "control_arbiter = lerobot_policy_node.control_arbiter_node:main",
            "lerobot-ros-replay = lerobot_policy_node.replay_cli:main",
            "policy = lerobot_policy_node.policy_node:main",
        ],
    },
)
