"""Records live ROS 2 topics and rosbag2 files into LeRobotDataset v3 (parquet + mp4), with one time-alignment core."""
