from glob import glob

from setuptools import find_packages, setup

package_name = "lerobot_core"

with open("package.xml") as f:
    DESCRIPTION = f.read().split("<description>")[1].split("</description>")[0]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"] + glob("README.md")),
        (
            "share/" + package_name + "/config",
            glob("lerobot_core/config/*.xml"),
        ),  # for FASTDDS_DEFAULT_PROFILES_FILE
    ],
    # config/contracts: the shipped mapping contracts, found by name (lerobot_core.contract.shipped)
    package_data={package_name: ["config/*.xml", "config/contracts/*.yaml"]},
    install_requires=["setuptools", "numpy", "pyyaml"],
    extras_require={"test": ["pytest"]},  # lets `colcon test` run the pytest suite
    zip_safe=False,  # dds_transport and contract.shipped read config/ beside their modules
    maintainer="lerobot_ros maintainers",
    maintainer_email="maintainers@lerobot-ros.dev",
    description=DESCRIPTION,
    license="Apache-2.0",
    entry_points={
        # fixtures and a per-process ROS_DOMAIN_ID for every pytest run in the workspace (registered here
        # only: a second registration would load the plugin twice)
        "pytest11": ["lerobot_ros = lerobot_core.ros.testing.pytest_plugin"],
    },
)
