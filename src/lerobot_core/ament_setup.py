"""The setup() call every ament_python package of the workspace shares (one home for the packaging).

Each package's setup.py puts this folder on sys.path and calls ``ament_python_package`` with what
is its own: name, folders installed to share/<pkg>/, console scripts, requirements. What every
package installs the same way lives here: the ament resource index marker, package.xml and README
under share/<pkg>/, the bin/ commands, the description read from package.xml, the license.

Not a module of the lerobot_core Python package (nothing imports it at run time): colcon runs it from
the source tree, from every package's setup.py, also before lerobot_core is built.
"""

import os
from glob import glob

from setuptools import find_packages, setup


def share_tree(package_name, *folders):
    """Every file under the given folders, installed to share/<pkg>/<same relative path>."""
    entries = {}
    for folder in folders:
        for path in glob(os.path.join(folder, "**", "*"), recursive=True):
            if os.path.isfile(path) and "__pycache__" not in path:
                target = os.path.join("share", package_name, os.path.dirname(path))
                entries.setdefault(target, []).append(path)
    return sorted(entries.items())


def ament_python_package(name, *, share=(), data_files=(), console_scripts=(), entry_points=None, **options):
    """setup() for the ament_python package ``name``, run from its folder (as colcon does).

    share: folders installed as trees under share/<name>/ (launch, config, test/fixtures, ...);
    data_files: further (target, files) pairs; options: the rest of setup()'s keywords, which
    override the defaults below (install_requires, extras_require, zip_safe, package_data).
    """
    with open("package.xml") as f:
        description = f.read().split("<description>")[1].split("</description>")[0]
    commands = sorted(glob("bin/*"))  # lerobot-* commands by name from install/setup.bash
    entry_points = dict(entry_points or {})
    if console_scripts:
        entry_points["console_scripts"] = list(console_scripts)
    setup(
        name=name,
        version="0.1.0",
        packages=find_packages(exclude=["test", "test.*"]),
        data_files=[
            ("share/ament_index/resource_index/packages", ["resource/" + name]),
            ("share/" + name, ["package.xml"] + glob("README.md")),
            *([("bin", commands)] if commands else []),
            *data_files,
            *share_tree(name, *share),
        ],
        **{
            "install_requires": ["setuptools"],
            "extras_require": {"test": ["pytest"]},  # lets `colcon test` run the pytest suite
            "zip_safe": True,
            **options,
        },
        maintainer="lerobot_ros maintainers",
        maintainer_email="maintainers@lerobot-ros.dev",
        description=description,
        license="Apache-2.0",
        entry_points=entry_points,
    )
