"""USB foot pedal as a Linux evdev input device, read with plain ``os.read`` (ROS-free, no extra package).

A pedal such as the PCsensor FootSwitch is a keyboard to the kernel: each pedal sends a key code.
``/dev/input/by-id/usb-PCsensor_FootSwitch-event-kbd`` yields ``struct input_event`` records
(struct timeval, __u16 type, __u16 code, __s32 value); a key press is type EV_KEY with value 1.
Reading it needs read access to the device (e.g. ``sudo setfacl -m u:$USER:rw <device>``).
"""

from __future__ import annotations

import os
import select
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping

# struct input_event on 64-bit Linux: long tv_sec, long tv_usec, u16 type, u16 code, s32 value
EVENT_FORMAT = "llHHi"
EVENT_SIZE = struct.calcsize(EVENT_FORMAT)
EV_KEY = 1
KEY_PRESS, KEY_RELEASE, KEY_REPEAT = 1, 0, 2

# the key codes foot pedals ship with (linux/input-event-codes.h); any other code can be given as a number
KEY_CODES = {
    "KEY_A": 30,
    "KEY_B": 48,
    "KEY_C": 46,
    "KEY_SPACE": 57,
    "KEY_ENTER": 28,
    "KEY_LEFT": 105,
    "KEY_RIGHT": 106,
    "KEY_UP": 103,
    "KEY_DOWN": 108,
    "KEY_PAGEUP": 104,
    "KEY_PAGEDOWN": 109,
    "KEY_1": 2,
    "KEY_2": 3,
    "KEY_3": 4,
    "BTN_LEFT": 272,
    "BTN_RIGHT": 273,
    "BTN_MIDDLE": 274,
}


class PedalError(RuntimeError):
    pass


def parse_key_map(entries: Iterable[str], commands: Iterable[str]) -> dict[int, str]:
    """["KEY_A:pause", "48:takeover", ...] -> {key code: command}; a clear error for bad entries."""
    allowed = tuple(commands)
    out: dict[int, str] = {}
    for entry in entries:
        if not entry:
            continue
        key, sep, command = entry.partition(":")
        key, command = key.strip(), command.strip()
        if not sep or not key or not command:
            raise ValueError(f"pedal_keys entry {entry!r}: expected 'KEY_NAME:command' or 'code:command'")
        if command not in allowed:
            raise ValueError(
                f"pedal_keys entry {entry!r}: command {command!r} is not one of {', '.join(allowed)}"
            )
        if key.isdigit():
            code = int(key)
        elif key.upper() in KEY_CODES:
            code = KEY_CODES[key.upper()]
        else:
            raise ValueError(
                f"pedal_keys entry {entry!r}: unknown key {key!r}; use a key code number or one of "
                f"{', '.join(KEY_CODES)}"
            )
        out[code] = command
    return out


def pack_event(code: int, value: int = KEY_PRESS, type_: int = EV_KEY, t: float | None = None) -> bytes:
    """One input_event record (what the kernel writes; tests write these into a FIFO)."""
    t = time.time() if t is None else t
    return struct.pack(EVENT_FORMAT, int(t), int((t % 1) * 1e6), type_, code, value)


class PedalReader:
    """Opens the device at once (so a bad path fails at start) and yields the codes of key presses."""

    def __init__(self, path: str):
        self.path = path
        if not path:
            raise PedalError(
                "pedal_device is empty: give the evdev path, e.g. /dev/input/by-id/...-event-kbd"
            )
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise PedalError(
                f"pedal device {path} does not exist: is the pedal plugged in? "
                "(ls /dev/input/by-id/ lists the input devices)"
            ) from None
        except OSError as exc:
            raise PedalError(f"pedal device {path}: {exc.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise PedalError(f"pedal device {path} is a directory, not an input device")
        try:
            # non-blocking: a FIFO opens without a writer, and reads never hang the reader thread
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError:
            raise PedalError(
                f"pedal device {path} is not readable by this user: grant access, e.g. "
                f"`sudo setfacl -m u:$USER:rw {path}`"
            ) from None
        except OSError as exc:
            raise PedalError(f"pedal device {path} cannot be opened: {exc.strerror}") from None
        self._buf = b""

    def read_presses(self, timeout: float) -> list[int]:
        """Key codes pressed within ``timeout`` seconds ([] if none); repeats and releases are dropped."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return []
        try:
            data = os.read(self.fd, EVENT_SIZE * 64)
        except BlockingIOError:
            return []
        except OSError as exc:
            raise PedalError(
                f"pedal device {self.path}: read failed ({exc.strerror}); was it unplugged?"
            ) from None
        if not data:  # end of a file, or a FIFO without a writer: nothing new, do not spin
            time.sleep(timeout)
            return []
        self._buf += data
        n = len(self._buf) // EVENT_SIZE
        chunk, self._buf = self._buf[: n * EVENT_SIZE], self._buf[n * EVENT_SIZE :]
        return [
            code
            for _s, _us, type_, code, value in struct.iter_unpack(EVENT_FORMAT, chunk)
            if type_ == EV_KEY and value == KEY_PRESS
        ]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def commands_for(codes: Iterable[int], key_map: Mapping[int, str]) -> list[str]:
    return [key_map[c] for c in codes if c in key_map]


class PedalThread:
    """A pedal read on a thread of its own: each press's commands go to ``deliver`` (the node queues
    them for its executor, so they run where its other inputs run), until ``stop`` or ``alive()`` is
    false. A read error goes to ``on_error`` and ends the thread."""

    def __init__(self, path: str, key_map: Mapping[int, str]):
        self.reader = PedalReader(path)  # a bad path fails here, naming it
        self.key_map = key_map
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(
        self,
        deliver: Callable[[list[str]], None],
        alive: Callable[[], bool],
        on_error: Callable[[str], None],
    ) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(deliver, alive, on_error), name="pedal", daemon=True
        )
        self._thread.start()

    def _run(self, deliver, alive, on_error) -> None:
        while not self._stop.is_set() and alive():
            try:
                codes = self.reader.read_presses(0.1)
            except PedalError as exc:
                on_error(str(exc))
                return
            commands = commands_for(codes, self.key_map)
            if commands:
                deliver(commands)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        self._thread = None

    def close(self) -> None:
        self.stop()
        self.reader.close()
