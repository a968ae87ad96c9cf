from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ACT_SMALL = FIXTURES / "act_small" / "pretrained_model"


@pytest.fixture(scope="session")
def act_reference():
    with np.load(FIXTURES / "act_small" / "reference.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def act_observations(act_reference):
    return {k[len("obs.") :]: v for k, v in act_reference.items() if k.startswith("obs.")}
