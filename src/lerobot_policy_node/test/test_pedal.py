"""Foot pedal (evdev) reading: clear errors at start, key presses from a FIFO and from a file."""

import os
import stat
import threading

import pytest

from lerobot_policy_node.arbiter import COMMANDS
from lerobot_policy_node.pedal import (
    EV_KEY,
    KEY_PRESS,
    KEY_RELEASE,
    KEY_REPEAT,
    PedalError,
    PedalReader,
    commands_for,
    pack_event,
    parse_key_map,
)

EV_SYN, EV_MSC = 0, 4


def test_missing_device_names_the_path(tmp_path):
    path = tmp_path / "usb-PCsensor_FootSwitch-event-kbd"
    with pytest.raises(PedalError, match=rf"pedal device {path} does not exist"):
        PedalReader(str(path))


def test_directory_and_empty_path_are_refused(tmp_path):
    with pytest.raises(PedalError, match="is a directory"):
        PedalReader(str(tmp_path))
    with pytest.raises(PedalError, match="pedal_device is empty"):
        PedalReader("")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_device_says_how_to_grant_access(tmp_path):
    path = tmp_path / "event-kbd"
    path.write_bytes(b"")
    path.chmod(0)
    with pytest.raises(PedalError, match=rf"{path} is not readable.*setfacl"):
        PedalReader(str(path))


def _keyboard_burst(code):
    """What a pedal press looks like from the kernel: MSC scan, KEY down, SYN, then KEY up, SYN."""
    return (
        pack_event(4, 0x70004, EV_MSC)
        + pack_event(code, KEY_PRESS)
        + pack_event(0, 0, EV_SYN)
        + pack_event(code, KEY_REPEAT)
        + pack_event(code, KEY_RELEASE)
        + pack_event(0, 0, EV_SYN)
    )


def test_presses_from_a_fifo_split_across_writes(tmp_path):
    fifo = tmp_path / "pedal"
    os.mkfifo(fifo)
    reader = PedalReader(str(fifo))  # opens without a writer (non-blocking)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    data = _keyboard_burst(30) + _keyboard_burst(48)
    done = threading.Event()

    def writer():
        with open(fifo, "wb", buffering=0) as f:
            f.write(data[:37])  # a record cut in two: the reader must wait for the rest
            f.flush()
            done.wait(1.0)
            f.write(data[37:])

    t = threading.Thread(target=writer)
    t.start()
    got = []
    for _ in range(50):
        got += reader.read_presses(0.05)
        if len(got) >= 1:
            done.set()
        if len(got) >= 2:
            break
    t.join()
    reader.close()
    assert got == [30, 48]  # presses only: no repeat, release, scan or sync events


def test_presses_from_a_regular_file_then_quiet_at_end(tmp_path):
    path = tmp_path / "events"
    path.write_bytes(_keyboard_burst(46))
    reader = PedalReader(str(path))
    assert reader.read_presses(0.01) == [46]
    assert reader.read_presses(0.01) == []  # end of file: nothing new, no busy loop
    reader.close()


def test_key_map_parsing_and_mapping():
    km = parse_key_map(["KEY_A:pause", "48:takeover", "key_c:resume", ""], COMMANDS)
    assert km == {30: "pause", 48: "takeover", 46: "resume"}
    assert commands_for([30, 99, 46], km) == ["pause", "resume"]
    with pytest.raises(ValueError, match="expected 'KEY_NAME:command'"):
        parse_key_map(["KEY_A"], COMMANDS)
    with pytest.raises(ValueError, match="command 'fly' is not one of"):
        parse_key_map(["KEY_A:fly"], COMMANDS)
    with pytest.raises(ValueError, match="unknown key 'KEY_Z'"):
        parse_key_map(["KEY_Z:pause"], COMMANDS)


def test_event_layout_is_the_kernel_struct():
    ev = pack_event(30, KEY_PRESS, EV_KEY, t=12.5)
    assert len(ev) == 24  # struct input_event on 64-bit Linux
