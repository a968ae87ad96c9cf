"""Parameter names given to a node against those it declares: the message for a misspelt name."""

import pytest

from lerobot_core.param_check import UnknownParameterError, check_parameter_names, unknown_parameters


def test_a_misspelt_name_is_named_with_the_node_and_the_closest_declared_name():
    with pytest.raises(UnknownParameterError) as e:
        check_parameter_names({"rate_hzz": 5.0, "count": 3}, ["rate_hz", "count", "period_s"], "/source")
    assert str(e.value) == (
        "node '/source' has no parameter 'rate_hzz' (did you mean 'rate_hz'?); "
        "it declares: count, period_s, rate_hz"
    )


def test_where_prefixes_and_unrelated_names_get_no_suggestion():
    with pytest.raises(UnknownParameterError, match=r"^p.yaml: node '/a' has no parameters 'b', 'zzz'"):
        check_parameter_names(["zzz", "b"], ["alpha"], "/a", "p.yaml")


def test_rclpy_own_parameters_are_always_known_and_not_listed():
    assert unknown_parameters(["use_sim_time", "qos_overrides./x.publisher.depth", "fps"], ["fps"]) == []
    with pytest.raises(UnknownParameterError) as e:
        check_parameter_names(["fsp"], ["fps", "use_sim_time"], "/n")
    assert "use_sim_time" not in str(e.value) and "'fps'" in str(e.value)
