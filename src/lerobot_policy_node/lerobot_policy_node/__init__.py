"""Runs LeRobot policy checkpoints (ACT, Diffusion) at a steady control rate with asynchronous chunked inference and safety limits."""
