from glob import glob

from setuptools import find_packages, setup

package_name = "lerobot_recorder"


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
            "recorder = lerobot_recorder.recorder_node:main",
            "lerobot-record-control = lerobot_recorder.record_control:main",
            "lerobot-bag-import = lerobot_recorder.bag_import_cli:main",
            "lerobot-bag-export = lerobot_recorder.bag_export:main",
            "lerobot-ros-dataset-viz = lerobot_recorder.dataset_viz:main",
        ],
    },
)
