"""LeRobotDataset v3.0 writer and reader (ROS-free: no rclpy import).

from lerobot_dataset import DatasetWriter, DatasetReader, DatasetError
"""

from .errors import DatasetError
from .format import CODEBASE_VERSION, DEFAULT_FEATURES
from .reader import DatasetReader
from .writer import DatasetWriter

__all__ = ["CODEBASE_VERSION", "DEFAULT_FEATURES", "DatasetError", "DatasetReader", "DatasetWriter"]
