"""`lerobot-launch`: start a graph profile here, one process per node, like `ros2 launch` would.

Every node runs as its installed executable (``lib/<pkg>/<exe>``) with ``--ros-args`` built from the
profile, in its own session so that a terminal Ctrl-C reaches the runner only; the runner forwards
exactly one SIGINT to each node, waits, then escalates to SIGTERM and SIGKILL. When a required node
exits the graph stops: exit status 0 if it exited cleanly, otherwise non-zero with the node's name.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from lerobot_bringup.profile import (
    NodeSpec,
    Profile,
    ProfileError,
    list_profiles,
    load_profile,
    package_installed,
    parse_overrides,
)
from lerobot_core.ament import die_with_parent, find_executable, prefixes
from lerobot_core.param_check import UnknownParameterError, check_parameter_names

CLEAN_EXIT = {0, -signal.SIGINT, 128 + signal.SIGINT}
_GENERIC_FAILURE = re.compile(r"autostart: \w+ failed; exiting")


@dataclass
class Running:
    spec: NodeSpec
    proc: subprocess.Popen
    reader: threading.Thread


def ros_environment(base: dict[str, str] | None = None, discovery: str = "LOCALHOST") -> dict[str, str]:
    """The environment handed to every node: DDS on loopback (or, asked for with --discovery SUBNET, the
    host's subnet: remote inference between two hosts) and an explicit domain, always."""
    env = dict(os.environ if base is None else base)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery
    if not env.get("ROS_DOMAIN_ID"):
        raise RuntimeError(
            "ROS_DOMAIN_ID is not set: `source env.sh` (or export ROS_DOMAIN_ID=<0..101>) first"
        )
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def skipped_nodes(profile: Profile, installed=package_installed) -> list[tuple[NodeSpec, str]]:
    """The nodes not started here (``if_installed`` / ``unless_installed``) and why."""
    return [(spec, why) for spec in profile.nodes if (why := spec.skip_reason(installed))]


def python_for(spec: NodeSpec, where: str) -> str:
    """The node's `python` (a venv's interpreter, e.g. LeRobot's), checked before start: it must run and
    import rclpy (this ROS distro's wheels for its Python version) and rosbags (lerobot_core decodes
    serialized messages with it)."""
    arg = re.fullmatch(r"\$\{(\w+)\}", spec.python_field)
    where = f"argument {arg[1]}:={spec.python}" if arg else f"{where}: {spec.python!r}"
    path = shutil.which(spec.python) or spec.python
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ProfileError(f"{where}: not an executable file")
    probe = subprocess.run([path, "-c", "import rclpy, rosbags"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ProfileError(
            f"{where}: cannot run the node ({last}); its venv needs this ROS distro's "
            "wheels for its Python (requirements-ros-wheels*.txt) and rosbags (scripts/make-lerobot-ref-venv.sh "
            "makes such a venv)"
        )
    return path


def command_lines(
    profile: Profile, workdir: Path, installed=package_installed
) -> list[tuple[NodeSpec, list[str]]]:
    """Resolve each node to its command line; parameters go through a params file per node."""
    out = []
    for i, spec in enumerate(profile.nodes):
        if spec.skip_reason(installed):
            continue
        try:
            exe = find_executable(spec.package, spec.executable)
        except FileNotFoundError as e:
            raise ProfileError(f"{profile.path}: nodes[{i}] ({spec.name}).executable: {e}") from None
        params_file = None
        if spec.parameters:
            params_file = workdir / f"{spec.name}.params.yaml"
            params_file.write_text(spec.params_yaml())
        interpreter = (
            [python_for(spec, f"{profile.path}: nodes[{i}] ({spec.name}).python")] if spec.python else []
        )
        out.append(
            (spec, [*interpreter, str(exe), *spec.ros_args(str(params_file) if params_file else None)])
        )
    return out


def declared_parameters(package: str, executable: str) -> set[str] | None:
    """The parameter names `executable` declares, from its defaults file ``share/<package>/config/
    <executable>.yaml`` (tested to hold every declared default); None for a node without one."""
    for prefix in prefixes():
        path = Path(prefix, "share", package, "config", f"{executable}.yaml")
        if path.is_file():
            try:
                params = (yaml.safe_load(path.read_text()) or {})[executable]["ros__parameters"]
            except (yaml.YAMLError, KeyError, TypeError):
                return None  # not a defaults file of this node: the node checks at start
            return set(params)
    return None


def check_parameters(profile: Profile) -> None:
    """Fail before anything starts when a profile gives a node a parameter it does not declare.

    Covers the nodes with a defaults file; every node also checks its own overrides when it starts
    (``lerobot_core.ros.node.run_node``), so the others fail at start with the same message.
    """
    for i, spec in enumerate(profile.nodes):
        declared = declared_parameters(spec.package, spec.executable) if spec.parameters else None
        if declared is None:
            continue
        try:
            fq = "/" + "/".join(p for p in (spec.namespace.strip("/"), spec.name) if p)
            check_parameter_names(spec.parameters, declared, fq, f"nodes[{i}] ({spec.name}).parameters")
        except UnknownParameterError as e:
            raise ProfileError(f"{profile.path}: {e}") from None


def check_checkpoint(value: str) -> None:
    """A policy checkpoint folder (or a Hub id in the cache) that the policy node can read."""
    from lerobot_runtime.errors import PolicyLoadError
    from lerobot_runtime.policy import read_policy_config

    try:
        read_policy_config(value)
    except PolicyLoadError as exc:
        raise ValueError(str(exc)) from None


def check_contract(value: str) -> None:
    """A mapping contract that loads: a YAML path, or a shipped contract's name (a typo is refused
    listing the shipped ones, before the recorder or the policy node fails at configure)."""
    from lerobot_core.contract import Contract, ContractError

    try:
        Contract.load(value)
    except ContractError as exc:
        raise ValueError(str(exc)) from None


CHECKERS = {"checkpoint": check_checkpoint, "contract": check_contract}


def check_policy_contracts(profile: Profile) -> None:
    """A policy node's checkpoint against its contract, before anything starts: a checkpoint that
    reads what the contract does not give (the cube's pose from an images contract, another camera,
    another joint count) is refused naming the profile arguments, as the node would refuse it later."""
    from lerobot_core.contract import Contract, ContractError
    from lerobot_policy_node.deployment import DeploymentError, fit_checkpoint, from_contract
    from lerobot_runtime.errors import PolicyLoadError
    from lerobot_runtime.policy import read_policy_config

    for spec in profile.nodes:
        params = spec.parameters
        if spec.disabled or (spec.package, spec.executable) != ("lerobot_policy_node", "policy"):
            continue
        if not params.get("policy_path") or not params.get("contract"):
            continue
        try:
            _, pc = read_policy_config(str(params["policy_path"]))
            deployment = from_contract(Contract.load(str(params["contract"])))
            fit_checkpoint(
                deployment, pc, str(params.get("dataset_root") or ""), str(params.get("dataset_units") or "")
            )
        except (DeploymentError, PolicyLoadError, ContractError) as exc:
            names = [a for a in ("policy_path", "contract") if a in spec.uses]
            given = " ".join(f"{a}:={profile.values[a]}" for a in names)
            hint = (
                " (the profile's contract:= argument picks another one: lerobot-launch "
                f"{profile.name} --help)"
                if "contract" in names
                else ""
            )
            raise ProfileError(f"{given or spec.name}: {exc}{hint}") from None


def check_arguments(profile: Profile, checkers=None) -> None:
    """Refuse, before anything starts, a required argument left out and a value that cannot work
    (a checkpoint folder that does not exist): the message names the argument as the user types it."""
    checkers = CHECKERS if checkers is None else checkers
    missing = profile.missing_required()
    if missing:
        lines = [f"  {a.name}:=...   {a.description}" for a in missing]
        raise ProfileError(
            f"profile '{profile.name}' needs {', '.join(a.name for a in missing)}:\n" + "\n".join(lines)
        )
    used = {a for n in profile.nodes if not n.disabled for a in n.uses}
    for a in profile.arguments.values():
        value = profile.values[a.name]
        check = checkers.get(a.type)
        if check is None or a.name not in used or value in ("", None):
            continue
        try:
            check(str(value))
        except ValueError as exc:
            raise ProfileError(f"argument {a.name}:={value}: {exc}") from None


def print_help(profile: Profile) -> None:
    """`lerobot-launch PROFILE --help`: the profile's arguments, their types, defaults and meaning."""
    print(f"usage: lerobot-launch {profile.name} [name:=value ...] [--show]\n")
    print(f"{profile.description}\n" if profile.description else "", end="")
    print(f"profile file: {profile.path}")
    if not profile.arguments:
        print("arguments: none")
        return
    print("arguments (name:=value):")
    for a in profile.arguments.values():
        print(f"  {a.name}")
        print(f"      {a.help_line()}")
    print("\n--show prints the resolved nodes and command lines without starting anything.")


def params_dir(profile: Profile) -> Path:
    """Where `--show` keeps the params files its command lines name (they outlive the call)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lerobot_ros" / "launch" / profile.name


def show(profile: Profile) -> None:
    """Print the profile's resolved arguments and each node's command line, runnable as printed."""
    print(f"profile '{profile.name}' ({profile.path})")
    if profile.arguments:
        print("arguments:")
        width = max(len(n) for n in profile.arguments)
        for name, arg in profile.arguments.items():
            value = profile.values.get(name, arg.default)
            mark = "   (set on the command line)" if name in profile.given else ""
            if arg in profile.missing_required():
                mark = f"   (required: give {name}:=...)"
            print(f"  {name.ljust(width)} := {value!r}{mark}")
            if name in profile.notes:
                print(f"  {''.ljust(width)}    {profile.notes[name]}")
            if arg.type == "path" and value:
                where = Path(str(value)).expanduser().absolute()
                state = "exists" if where.exists() else "does not exist yet"
                print(f"  {''.ljust(width)}    folder used: {where} ({state})")
    workdir = params_dir(profile)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"nodes (params files kept in {workdir}):")
    for spec, cmd in command_lines(profile, workdir):
        print(f"  {spec.name}: {' '.join(cmd)}")
        if spec.parameters:
            print("    parameters: " + ", ".join(f"{k}={_short(v)}" for k, v in spec.parameters.items()))
    for spec, why in skipped_nodes(profile):
        print(f"  {spec.name}: not started ({why})")


def _short(value) -> str:
    """A parameter as --show prints it: a file's text (a URDF) by its size, not in full."""
    if isinstance(value, str) and ("\n" in value or len(value) > 120):
        return f"<text, {len(value)} characters>"
    return repr(value)


def _pump(name: str, stream, width: int, errors: dict[str, str]) -> None:
    prefix = f"[{name}]".ljust(width + 2)
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        reason = _error_text(line)
        if reason:
            errors[name] = reason
        sys.stdout.write(prefix + line)
        sys.stdout.flush()
    stream.close()


def _error_text(line: str) -> str:
    """The reason in a node's error line (rclpy's ``[ERROR] [t] [node]: text`` or ``error: text``)."""
    line = line.strip()
    if "[ERROR]" in line or "[FATAL]" in line:
        text = line.split("]: ", 1)[-1]
        # run_node's closing line says only which transition failed: the line before holds the reason
        return "" if _GENERIC_FAILURE.fullmatch(text) else text
    if line.startswith("error: "):
        return line[len("error: ") :]
    return ""


class GraphRunner:
    def __init__(self, profile: Profile, shutdown_timeout: float = 10.0, discovery: str = "LOCALHOST"):
        self.profile, self.discovery = profile, discovery
        self.shutdown_timeout = shutdown_timeout
        self.running: list[Running] = []
        self._stop_requested = threading.Event()
        self.errors: dict[str, str] = {}  # node -> its last error line
        self._failure = ""  # the reason the graph stopped, said last

    def request_stop(self, *_args) -> None:
        self._stop_requested.set()

    def run(self) -> int:
        env = ros_environment(discovery=self.discovery)
        with tempfile.TemporaryDirectory(prefix="lerobot-launch-") as tmp:
            commands = command_lines(self.profile, Path(tmp))
            width = max(len(s.name) for s, _ in commands)
            self._log(
                f"profile '{self.profile.name}' ({self.profile.path}): {len(commands)} node(s), "
                f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, discovery {self.discovery}"
            )
            for spec, why in skipped_nodes(self.profile):
                self._log(f"not starting {spec.name}: {why}")
            for spec, cmd in commands:
                proc = subprocess.Popen(
                    cmd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
                reader = threading.Thread(
                    target=_pump, args=(spec.name, proc.stdout, width, self.errors), daemon=True
                )
                reader.start()
                self.running.append(Running(spec, proc, reader))
                self._log(f"started {spec.name} (pid {proc.pid}): {' '.join(cmd)}")
            return self._supervise()

    def _supervise(self) -> int:
        status = 0
        reported: set[str] = set()
        while not self._stop_requested.is_set():
            for r in self.running:
                code = r.proc.poll()
                if code is None or r.spec.name in reported:
                    continue
                reported.add(r.spec.name)
                if code in CLEAN_EXIT:
                    self._log(f"node '{r.spec.name}' exited cleanly")
                else:
                    self._log(f"ERROR: node '{r.spec.name}' died with exit code {code}")
                if r.spec.required:
                    if code not in CLEAN_EXIT:
                        status = 1
                        self._log(f"required node '{r.spec.name}' is gone: stopping the graph")
                        r.reader.join(timeout=2.0)  # its last lines, with the reason
                        why = self.errors.get(r.spec.name, f"exit code {code}")
                        self._failure = f"node '{r.spec.name}' failed: {why}"
                    self._stop_requested.set()
                    break
            if all(r.proc.poll() is not None for r in self.running):
                break
            time.sleep(0.05)
        failed = self.shutdown()
        if failed and status == 0:
            status = 1
        if self._failure:  # the last line: why the graph stopped, not the shutdown that followed
            print(f"lerobot-launch: error: {self._failure}", file=sys.stderr, flush=True)
        return status

    def shutdown(self) -> list[str]:
        """Stop the graph; returns the nodes that did not end cleanly.

        Two stages: every node first, then the ones marked ``stop_last`` (emulated hardware), so a
        driver reaches its safe state against a device that is still there. Each stage sends one
        SIGINT per live node, then SIGTERM, then SIGKILL.
        """
        bad: list[str] = []
        for stage in (
            [r for r in self.running if not r.spec.stop_last],
            [r for r in self.running if r.spec.stop_last],
        ):
            bad += self._stop(stage)
        for r in self.running:
            r.reader.join(timeout=2.0)
        return bad

    def _stop(self, group: list[Running]) -> list[str]:
        alive = [r for r in group if r.proc.poll() is None]
        for r in alive:
            _signal(r.proc, signal.SIGINT)
        deadline = time.monotonic() + self.shutdown_timeout
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for r in alive:
                try:
                    r.proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._log(f"node '{r.spec.name}' did not stop in time: sending {sig.name}")
                    _signal(r.proc, sig)
            deadline = time.monotonic() + 3.0
        for r in group:
            r.proc.wait()
        if alive:
            self._log("stopped " + ", ".join(f"'{r.spec.name}'" for r in alive))
        bad = [r for r in alive if r.proc.returncode not in CLEAN_EXIT]
        for r in bad:
            self._log(f"ERROR: node '{r.spec.name}' ended with exit code {r.proc.returncode} during shutdown")
        return [r.spec.name for r in bad]

    @staticmethod
    def _log(msg: str) -> None:
        sys.stdout.write(f"[lerobot-launch] {msg}\n")
        sys.stdout.flush()


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the node and anything it spawned
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="lerobot-launch",
        description="Start a lerobot_ros graph profile (the same YAML `ros2 launch lerobot_bringup <name>.launch.py` reads). "
        "`lerobot-launch PROFILE --help` lists the profile's arguments.",
        add_help=False,
    )
    ap.add_argument("-h", "--help", action="store_true", help="this help; after a profile: its arguments")
    ap.add_argument("profile", nargs="?", help="profile name (see --list) or path to a profile YAML")
    ap.add_argument("overrides", nargs="*", metavar="name:=value", help="profile arguments")
    ap.add_argument("--list", action="store_true", help="list the shipped profiles and exit")
    ap.add_argument(
        "--show", action="store_true", help="print the resolved nodes and command lines, start nothing"
    )
    ap.add_argument(
        "--shutdown-timeout", type=float, default=10.0, help="seconds to wait after SIGINT (default 10)"
    )
    ap.add_argument(
        "--discovery",
        choices=("LOCALHOST", "SUBNET"),
        default="LOCALHOST",
        help="DDS discovery range of the nodes (default LOCALHOST: nothing leaves this host); SUBNET for a "
        "graph split over two hosts (remote inference: docs/remote_inference.md)",
    )
    # flags and name:=value pairs in any order (`lerobot-launch PROFILE --show rate_hz:=20`)
    a = ap.parse_intermixed_args(argv)
    if a.help and not a.profile:
        ap.print_help()
        return 0
    if a.help:
        try:
            print_help(load_profile(a.profile))
        except ProfileError as e:
            print(f"lerobot-launch: error: {e}", file=sys.stderr)
            return 2
        return 0
    if a.list or not a.profile:
        for name, desc in list_profiles().items():
            print(f"{name:24s} {desc}")
        return 0 if a.list else 2
    try:
        profile = load_profile(a.profile, parse_overrides(a.overrides))
        check_parameters(profile)
        if a.show:
            show(profile)
            return 0
        check_arguments(profile)
        check_policy_contracts(profile)
        runner = GraphRunner(profile, a.shutdown_timeout, a.discovery)
        signal.signal(signal.SIGINT, runner.request_stop)
        signal.signal(signal.SIGTERM, runner.request_stop)
        return runner.run()
    except (ProfileError, RuntimeError) as e:
        print(f"lerobot-launch: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
