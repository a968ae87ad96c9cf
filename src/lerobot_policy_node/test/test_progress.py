"""What the policy node logs while driving: the start, then control and inference rates per period."""

from lerobot_policy_node.controller import HOLDING, RUNNING, ControllerStats
from lerobot_policy_node.progress import ProgressReport


def test_driving_is_announced_once_then_rates_every_period():
    report = ProgressReport(control_rate_hz=30.0, fps=30.0, n_action_steps=5, period_s=10.0)
    stats = ControllerStats()
    report.restart(100.0, stats)
    assert report.update(100.5, stats) == []  # holding, nothing to say yet
    stats.steps, stats.held_steps, stats.state = 1, 15, RUNNING
    (line,) = report.update(101.0, stats)
    assert line == (
        "driving: the policy commands the robot (1.0 s after start); control 30 Hz, policy 30 fps, "
        "5 action(s) used per chunk; rates every 10 s"
    )
    assert report.update(105.0, stats) == []
    stats.steps, stats.held_steps, stats.chunks, stats.inference_latency_sum_s = 286, 15, 50, 2.5
    stats.rate_limited_steps = 4
    (line,) = report.update(110.0, stats)
    assert line == (
        "driving: last 10 s: control 30.1 Hz of 30 (286 commands, 15 held), inference 5.00 Hz (50 ms each), "
        "safety filter: 0 clamped, 4 step-limited"
    )
    stats.held_steps, stats.state, stats.message = 315, HOLDING, "stale observation (joints: stale)"
    (line,) = report.update(120.0, stats)
    assert line == (
        "holding: last 10 s: control 30.0 Hz of 30 (0 commands, 300 held), inference 0.00 Hz; "
        "holding because: stale observation (joints: stale)"
    )


def test_a_restarted_controller_starts_the_report_over():
    report = ProgressReport(control_rate_hz=60.0, fps=30.0, n_action_steps=10)
    stats = ControllerStats(steps=500, held_steps=3)
    report.restart(0.0, stats)
    report.update(1.0, ControllerStats(steps=501, held_steps=3))
    fresh = ControllerStats(steps=2)  # counters went back: a new run
    (line,) = report.update(50.0, fresh)
    assert line.startswith("driving: the policy commands the robot (0.0 s after start); control 60 Hz")
