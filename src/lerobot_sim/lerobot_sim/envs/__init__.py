"""Gymnasium environments of lerobot_sim."""
