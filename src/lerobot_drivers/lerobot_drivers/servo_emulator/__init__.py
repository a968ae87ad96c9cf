"""A servo bus emulator (ROS-free): the servos of one Feetech or Dynamixel bus behind a pty.

Each servo has its real control table (EEPROM/RAM bytes at the manuals' addresses), answers
PING/READ/WRITE/SYNC READ/SYNC WRITE with checksummed (Feetech) or CRC-16 (Dynamixel 2.0) status
packets after its Return_Delay_Time, drops packets with a bad checksum (Feetech) or answers them
with a CRC error (Dynamixel), ignores traffic at a baud rate different from its own, and moves
with a first-order response towards its goal while torque is on (torque off: it stays where it
is, or where a hand puts it). Faults (over-temperature, overload, voltage) can be injected; the
servo then reports them in its status byte and cuts torque, as the real ones do.

- :mod:`.servo`: one servo (registers, motion, faults);
- :mod:`.bus`: a bus of servos answering instruction packets, per family via its family object;
- :mod:`.process`: the pty transport, :class:`EmulatorProcess` and the ``lerobot-servo-emulator`` CLI.
"""

from lerobot_drivers.servo_emulator.process import (
    EmulatorProcess,
    ServoBusEmulator,
    emulator_for_robot,
    main,
)

__all__ = [
    "EmulatorProcess",
    "ServoBusEmulator",
    "emulator_for_robot",
    "main",
]
