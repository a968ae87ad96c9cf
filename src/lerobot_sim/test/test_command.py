import math

import numpy as np
import pytest

from lerobot_core.safety import CommandError, SafetyLimits
from lerobot_sim.so101_model import JointLimits

PREV = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])


def test_safety_clamps_to_limits_and_bounds_step():
    lim = JointLimits.so101()
    safety = SafetyLimits.build(6, lim.lower, lim.upper, max_step=0.1)
    out = safety.apply(np.array([5.0, -5.0, 0.35, 0.4, 0.5, 0.6]), PREV)
    assert out[0] == pytest.approx(0.2)  # bounded step from 0.1
    assert out[1] == pytest.approx(0.1)
    assert out[2] == pytest.approx(0.35)
    unbounded = SafetyLimits.build(6, lim.lower, lim.upper, max_step=math.inf)
    out = unbounded.apply(np.array([5.0, -5.0, 0, 0, 0, 9.0]), PREV)
    assert out[0] == pytest.approx(lim.upper[0]) and out[1] == pytest.approx(lim.lower[1])
    assert out[5] == pytest.approx(lim.upper[5])


@pytest.mark.parametrize("bad", [[math.nan] * 6, [0.0, math.inf, 0, 0, 0, 0], [0.0] * 3])
def test_safety_rejects_non_finite_and_wrong_size(bad):
    lim = JointLimits.so101()
    with pytest.raises(CommandError):
        SafetyLimits.build(6, lim.lower, lim.upper, 0.1).apply(np.array(bad), PREV)
