"""The mapping contract: which ROS topics become which LeRobot features, and how they are aligned.

A contract is a YAML file (reference: docs/recording.md; the shipped ones, found by name, in
lerobot_core/config/contracts/, see :mod:`.shipped`)::

    fps: 30
    robot_type: so101_follower
    units: radians                      # radians (as published) | degrees | normalized
    task: Pick up the cube              # or {topic: /task, default: ...}
    calibration:                        # for units: normalized (LeRobot's -100..100 / 0..100)
      gripper: {range: [0.0, 1.7], mode: "0_100"}
    features:
      observation.state:                # one source, or a list of sources concatenated in order
        topic: /joint_states
        fields: [position]              # position -> <joint>.pos, velocity -> .vel, effort -> .effort
        joints: [shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper]
        policy: interpolate             # stream keys: policy, tolerance, max_staleness, timeline,
        max_staleness: 0.1              #   qos, rate, required (see STREAM_KEYS)
      action: {topic: /leader/joint_states, joints: [...]}
      observation.images.front: {topic: /cameras/front/image_raw, policy: nearest, tolerance: 0.02}

Supported message types: sensor_msgs/msg/JointState, std_msgs/msg/Float64MultiArray and
trajectory_msgs/msg/JointTrajectory (first point) for vector features; geometry_msgs/msg/PoseStamped
for an object's pose (``observation.environment_state``: components x y z qw qx qy qz as published,
metres and quaternion, chosen with ``joints``, named ``<prefix><component>``); sensor_msgs/msg/Image
(rgb8, bgr8, rgba8, bgra8, mono8) and sensor_msgs/msg/CompressedImage (jpeg, png) for
``observation.images.<name>``; std_msgs/msg/String for the task; lerobot_msgs/msg/ControlStatus
(the control arbiter's mode) for ``complementary_info.is_intervention`` / ``complementary_info.<x>``
with ``field: mode`` (human-in-the-loop; ticks while the arbiter holds make no frame: ``paused``).

Each *topic* is one alignment stream (``lerobot_core.alignment.StreamSpec`` named by the
topic). Use:

    contract = Contract.load("my_robot.yaml")            # a path, a shipped name, or Contract.from_flags(...)
    contract = contract.resolve({topic: (msgtype, first_msg)})   # fills joints / image sizes
    features = contract.features()                       # -> DatasetWriter.create(features=...)
    aligner = Aligner(contract.fps, contract.stream_specs())
    aligner.push(topic, *contract.extract(topic, msg, msgtype, receive_ns))   # value, stamp_ns, receive_ns
    frame, task = contract.make_frame(aligned.values)    # -> writer.add_frame(frame, task=task)

Errors in the file raise :class:`ContractError` naming the file and the key path; a message that
does not fit the contract raises ``ValueError`` naming the topic.

Modules: :mod:`.schema` (the file's keys and choices, validation, ContractError), :mod:`.model`
(Contract: resolution, features, stream specs, frames), :mod:`.extraction` (message -> values, a
table keyed by message type), :mod:`.shipped` (the shipped contracts, found by name). The package
exports what the stack's modules use; the rest of the schema (STREAM_KEYS, FIELDS, ...) is :mod:`.schema`'s.
"""

from .extraction import msgtype_of  # noqa: F401 (the package is the public API)
from .model import Contract  # noqa: F401
from .schema import (  # noqa: F401
    COMPRESSED_IMAGE,
    CONTROL_STATUS,
    IMAGE,
    IMAGE_PREFIX,
    IMAGE_TYPES,
    JOINT_STATE,
    JOINT_TRAJECTORY,
    LATCHED_TYPES,
    UNITS,
    ContractError,
    ImageSource,
    NonFiniteSampleError,
    normalize_msgtype,
)
from .shipped import CONTRACTS_DIR, find_contract, shipped_contracts  # noqa: F401
