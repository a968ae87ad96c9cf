"""Graph profiles: one YAML file naming the nodes of a graph, their parameters and remappings.

The same parsed :class:`Profile` feeds both ``ros2 launch lerobot_bringup <name>.launch.py`` (real ROS
workspaces) and ``lerobot-launch <name>`` (the project's own runner, one process per node), so the
two ways of starting a graph cannot drift apart. This module is ROS-free.

Schema::

    description: one line
    arguments:                      # overridable as name:=value
      rate_hz: {default: 50.0, description: publish rate in Hz}
      policy_path: {required: true, type: checkpoint, description: ...}
    nodes:
      - name: joint_source          # unique ROS node name
        package: lerobot_drivers
        executable: synthetic_joints
        namespace: ""               # optional
        parameters: {rate_hz: "${rate_hz}"}
        remappings: {joint_states: /follower/joint_states}
        required: true              # optional; when the node exits, the graph stops
        stop_last: false            # optional; emulated hardware: stopped after every other node,
                                    #   so drivers reach their safe state against a live device
        if_installed: false         # optional; start only where the node's package is installed
        unless_installed: ""        # optional; a package: skip this node where that package is installed
                                    #   (e.g. our TF node where robot_state_publisher exists)
        python: ""                  # optional; the Python interpreter to run the node's executable with
                                    #   (e.g. a LeRobot venv's, "${python}"); "" = the executable's own
        if: true                    # optional; start the node only when this is true (e.g. "${use_x}")
        unless: false               # optional; do not start the node when this is true

An argument's type is its default's (bool, int, float, str, list): ``rate_hz:=fast`` is refused
before anything starts, naming the argument. ``type`` names it where the default cannot:
``path`` (a file or folder; ``--show`` prints where it really is), ``checkpoint`` (a policy
checkpoint folder or Hub id, checked by the launcher before start), ``contract`` (a mapping
contract: a YAML path or a shipped contract's name, loaded by the launcher before start), ``seed`` (a whole number, or
``auto``: the seed after the last one the dataset named by the argument ``dataset`` holds, 0 for a
new one). ``required: true`` (no default needed) refuses to start without a value when a node
that is started uses the argument.

``${name}`` alone keeps the argument's value and type; inside a longer string it is substituted as
text. ``${share:pkg}`` is the share directory of package ``pkg``; ``${read:pkg/path}`` the text of
the file ``path`` in it (e.g. a URDF for robot_state_publisher's ``robot_description``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_SUBST = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*|share:[A-Za-z0-9_]+|read:[A-Za-z0-9_]+/[A-Za-z0-9_./-]+)\}")
_NODE_KEYS = {
    "name",
    "package",
    "executable",
    "namespace",
    "parameters",
    "remappings",
    "required",
    "args",
    "python",
    "stop_last",
    "if_installed",
    "unless_installed",
    "if",
    "unless",
}
_TOP_KEYS = {"description", "arguments", "nodes"}
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
PARAM_TYPES = (bool, int, float, str)
_ARG_KEYS = {"default", "description", "required", "type", "dataset"}
ARG_TYPES = ("bool", "int", "float", "str", "list", "path", "checkpoint", "contract", "seed")


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Argument:
    name: str
    default: Any
    description: str = ""
    required: bool = False
    type: str = "str"  # one of ARG_TYPES; from the default unless the profile names it
    dataset: str = ""  # type seed: the argument naming the dataset whose seeds `auto` continues

    def help_line(self) -> str:
        """`--help`: what to give and what is taken without it."""
        default = "required" if self.required else f"default {format_value(self.default)}"
        return f"{self.type}, {default}" + (f": {self.description}" if self.description else "")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    package: str
    executable: str
    namespace: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    required: bool = True
    args: tuple[str, ...] = ()
    stop_last: bool = False
    if_installed: bool = False
    unless_installed: str = ""
    disabled: str = ""  # why an `if` / `unless` condition keeps the node off; '' = on
    uses: tuple[str, ...] = ()  # the profile arguments its fields substitute
    python: str = ""  # the interpreter its executable (a Python entry script) runs with; '' = its own
    python_field: str = ""  # the profile's text for it (e.g. "${python}"): errors name what the user typed

    def skip_reason(self, installed: Callable[[str], bool]) -> str:
        """Why the node is not started where `installed(package)` says what exists; '' to start it."""
        if self.disabled:
            return self.disabled
        if self.if_installed and not installed(self.package):
            return f"package '{self.package}' is not installed"
        if self.unless_installed and installed(self.unless_installed):
            return f"package '{self.unless_installed}' is installed"
        return ""

    def ros_args(self, params_file: str | None = None) -> list[str]:
        """Arguments after the executable, as `ros2 run` would pass them."""
        out = list(self.args) + ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            out += ["-r", f"__ns:={_absolute(self.namespace)}"]
        if params_file:
            out += ["--params-file", params_file]
        for src, dst in self.remappings:
            out += ["-r", f"{src}:={dst}"]
        return out

    def params_yaml(self) -> str:
        """The node's parameters as a ROS 2 parameters file (keyed by its fully qualified name)."""
        fq = "/" + "/".join(p for p in (self.namespace.strip("/"), self.name) if p)
        return yaml.safe_dump({fq: {"ros__parameters": self.parameters}}, sort_keys=False)


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    arguments: dict[str, Argument]
    nodes: tuple[NodeSpec, ...]
    values: dict[str, Any]
    given: frozenset[str] = frozenset()  # the arguments set on the command line
    notes: dict[str, str] = field(default_factory=dict)  # how an argument's value was worked out

    def missing_required(self) -> list[Argument]:
        """Required arguments without a value that a node to be started uses."""
        used = {a for n in self.nodes if not n.disabled for a in n.uses}
        return [
            a
            for a in self.arguments.values()
            if a.required and a.name in used and self.values[a.name] in ("", None)
        ]

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"profile '{self.name}' has no node '{name}' (nodes: {[n.name for n in self.nodes]})")


def _absolute(ns: str) -> str:
    return ns if ns.startswith("/") else "/" + ns


def default_share_lookup(package: str) -> str:
    """Share directory of a package through the ament index (AMENT_PREFIX_PATH), like ament_index_python."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix and Path(prefix, "share", "ament_index", "resource_index", "packages", package).exists():
            return str(Path(prefix, "share", package))
    raise ProfileError(
        f"package '{package}' not found in AMENT_PREFIX_PATH (is the workspace built and sourced?)"
    )


def package_installed(package: str) -> bool:
    """Whether `package` is in the ament index (AMENT_PREFIX_PATH), as ``ros2 run`` would find it."""
    try:
        default_share_lookup(package)
    except ProfileError:
        return False
    return True


def profile_search_path() -> list[Path]:
    paths = [Path(p) for p in os.environ.get("LEROBOT_ROS_PROFILE_PATH", "").split(os.pathsep) if p]
    try:
        paths.append(Path(default_share_lookup("lerobot_bringup")) / "profiles")
    except ProfileError:
        pass
    paths.append(Path(__file__).resolve().parent.parent / "profiles")  # source checkout
    return paths


def find_profile(name_or_path: str) -> Path:
    """A path to a YAML file, or the name of a profile shipped in lerobot_bringup/profiles."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not p.is_file():
            raise ProfileError(f"{p}: profile file not found")
        return p
    tried = []
    for d in profile_search_path():
        cand = d / f"{name_or_path}.yaml"
        tried.append(str(cand))
        if cand.is_file():
            return cand
    known = sorted({f.stem for d in profile_search_path() if d.is_dir() for f in d.glob("*.yaml")})
    raise ProfileError(
        f"unknown profile '{name_or_path}' (known: {', '.join(known) or 'none'}; looked in {tried})"
    )


def list_profiles() -> dict[str, str]:
    """Profile name -> description, for `lerobot-launch --list`."""
    out: dict[str, str] = {}
    for d in profile_search_path():
        for f in sorted(d.glob("*.yaml")) if d.is_dir() else []:
            if f.stem not in out:
                try:
                    out[f.stem] = (yaml.safe_load(f.read_text()) or {}).get("description", "")
                except yaml.YAMLError:
                    out[f.stem] = "(invalid YAML)"
    return out


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`name:=value` command-line pairs; values are parsed as YAML scalars (1 -> int, true -> bool)."""
    out: dict[str, Any] = {}
    for item in items:
        if ":=" not in item:
            raise ProfileError(f"argument '{item}' is not of the form name:=value")
        k, v = item.split(":=", 1)
        try:
            out[k] = yaml.safe_load(v) if v != "" else ""
        except yaml.YAMLError:
            out[k] = v
    return out


def load_profile(
    name_or_path: str | os.PathLike,
    overrides: Mapping[str, Any] | None = None,
    share_lookup: Callable[[str], str] = default_share_lookup,
) -> Profile:
    path = find_profile(str(name_or_path))
    where = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        loc = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ProfileError(f"{where}{loc}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: top level must be a mapping with 'nodes'")
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {sorted(unknown)} (allowed: {sorted(_TOP_KEYS)})")

    arguments: dict[str, Argument] = {}
    for aname, spec in (raw.get("arguments") or {}).items():
        arguments[aname] = _argument(aname, spec, f"{where}: arguments.{aname}")
    for a in arguments.values():
        if a.type == "seed" and a.dataset not in arguments:
            raise ProfileError(
                f"{where}: arguments.{a.name}.dataset: must name the argument of the dataset folder "
                f"(declared: {sorted(arguments)})"
            )

    values = {a.name: a.default for a in arguments.values()}
    for k, v in (overrides or {}).items():
        if k not in arguments:
            raise ProfileError(f"{where}: unknown argument '{k}' (declared: {sorted(arguments) or 'none'})")
        values[k] = _typed(arguments[k], v)
    notes: dict[str, str] = {}
    for a in arguments.values():
        if a.type == "seed" and values[a.name] == "auto":
            values[a.name], notes[a.name] = seed_after(values[a.dataset])
    uses: set[str] = set()

    def subst(value: Any, key: str) -> Any:
        if isinstance(value, str):
            whole = _SUBST.fullmatch(value)
            if whole:
                return resolve(whole.group(1), key)
            return _SUBST.sub(lambda m: str(resolve(m.group(1), key)), value)
        if isinstance(value, list):
            return [subst(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: subst(v, f"{key}.{k}") for k, v in value.items()}
        return value

    def resolve(token: str, key: str) -> Any:
        if token.startswith("share:"):
            try:
                return share_lookup(token[6:])
            except ProfileError as e:
                raise ProfileError(f"{where}: {key}: {e}") from None
        if token.startswith("read:"):
            package, rel = token[5:].split("/", 1)
            try:
                return (Path(share_lookup(package)) / rel).read_text(encoding="utf-8")
            except (ProfileError, OSError) as e:
                raise ProfileError(f"{where}: {key}: ${{{token}}}: {e}") from None
        if token not in values:
            raise ProfileError(
                f"{where}: {key}: unknown argument '${{{token}}}' (declared: {sorted(values)})"
            )
        uses.add(token)
        return values[token]

    nodes_raw = raw.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise ProfileError(f"{where}: nodes: must be a non-empty list")
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for i, n in enumerate(nodes_raw):
        key = f"nodes[{i}]"
        if not isinstance(n, dict):
            raise ProfileError(f"{where}: {key}: must be a mapping")
        if isinstance(n.get("name"), str):
            key = f"nodes[{i}] ({n['name']})"
        unknown = set(n) - _NODE_KEYS
        if unknown:
            raise ProfileError(
                f"{where}: {key}: unknown key(s) {sorted(unknown)} (allowed: {sorted(_NODE_KEYS)})"
            )
        for req in ("name", "package", "executable"):
            if not isinstance(n.get(req), str) or not n[req]:
                raise ProfileError(f"{where}: {key}.{req}: required, a non-empty string")
        name = n["name"]
        if not _NAME_RE.match(name):
            raise ProfileError(f"{where}: {key}.name: '{name}' is not a valid ROS node name")
        if name in seen:
            raise ProfileError(f"{where}: {key}.name: duplicate node name '{name}'")
        seen.add(name)
        uses.clear()
        disabled = ""
        for cond, when in (("if", False), ("unless", True)):
            if cond in n:
                on = subst(n[cond], f"{key}.{cond}")
                if not isinstance(on, bool):
                    raise ProfileError(f"{where}: {key}.{cond}: must be true or false, got {on!r}")
                if on is when:
                    disabled = disabled or f"{cond}: {n[cond]} is {str(on).lower()}"
        uses.clear()  # the condition's arguments are not what the node needs to run
        params = subst(n.get("parameters") or {}, f"{key}.parameters")
        if not isinstance(params, dict):
            raise ProfileError(f"{where}: {key}.parameters: must be a mapping")
        for pk, pv in params.items():
            _check_param(pv, f"{where}: {key}.parameters.{pk}")
        remaps = subst(n.get("remappings") or {}, f"{key}.remappings")
        if not isinstance(remaps, dict):
            raise ProfileError(f"{where}: {key}.remappings: must be a mapping from: to")
        args = subst(n.get("args") or [], f"{key}.args")
        python = str(subst(n.get("python") or "", f"{key}.python"))
        nodes.append(
            NodeSpec(
                name=name,
                package=n["package"],
                executable=n["executable"],
                namespace=str(subst(n.get("namespace") or "", f"{key}.namespace")),
                parameters=params,
                remappings=tuple((str(a), str(b)) for a, b in remaps.items()),
                required=bool(n.get("required", True)),
                args=tuple(str(a) for a in args),
                stop_last=bool(n.get("stop_last", False)),
                if_installed=bool(n.get("if_installed", False)),
                unless_installed=str(n.get("unless_installed") or ""),
                disabled=disabled,
                uses=tuple(sorted(uses)),
                python=python,
                python_field=str(n.get("python") or ""),
            )
        )
    return Profile(
        path.stem,
        path,
        str(raw.get("description", "")),
        arguments,
        tuple(nodes),
        values,
        frozenset(overrides or ()),
        notes,
    )


def _argument(name: str, spec: Any, key: str) -> Argument:
    if not isinstance(spec, dict) or ("default" not in spec and not spec.get("required")):
        raise ProfileError(f"{key}: must be a mapping with 'default' or 'required: true' (and 'description')")
    unknown = set(spec) - _ARG_KEYS
    if unknown:
        raise ProfileError(f"{key}: unknown key(s) {sorted(unknown)} (allowed: {sorted(_ARG_KEYS)})")
    default = spec.get("default", "")
    kind = spec.get("type") or _type_of(default)
    if kind not in ARG_TYPES:
        raise ProfileError(f"{key}.type: {kind!r} is not one of {', '.join(ARG_TYPES)}")
    return Argument(
        name,
        default,
        str(spec.get("description", "")),
        required=bool(spec.get("required", False)),
        type=kind,
        dataset=str(spec.get("dataset", "")),
    )


def format_value(value: Any) -> str:
    """A value as it is typed on the command line (true, 0.5, [front, wrist], "" for empty)."""
    if isinstance(value, str):
        return value if value else '""'
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _type_of(default: Any) -> str:
    for kind, cls in (("bool", bool), ("int", int), ("float", float), ("list", list)):
        if isinstance(default, cls):
            return kind
    return "str"


_EXPECTED = {
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "list": "a list, e.g. [a, b]",
    "seed": "a whole number or auto",
}


def _typed(arg: Argument, value: Any) -> Any:
    """A command-line value in the argument's type (rate_hz:=20 stays a float), or ProfileError
    naming the argument: a wrong type is refused before anything starts, not by a node that dies."""
    kind = arg.type
    ok = value
    if kind == "bool":
        ok = value if isinstance(value, bool) else None
    elif kind == "int":
        ok = value if isinstance(value, int) and not isinstance(value, bool) else None
    elif kind == "float":
        ok = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    elif kind == "list":
        ok = value if isinstance(value, list) else None
    elif kind == "seed":
        ok = value if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)) else None
    elif not isinstance(value, str):  # str, path, checkpoint, contract: the text as typed
        ok = str(value).lower() if isinstance(value, bool) else str(value)
    if ok is None:
        raise ProfileError(f"argument {arg.name}:={format_value(value)}: expected {_EXPECTED[kind]}")
    return ok


def seed_after(dataset_root: Any) -> tuple[int, str]:
    """`seed:=auto`: the first seed a recording into `dataset_root` has not used, and how it was found."""
    from lerobot_recorder.sim_seeds import next_seed

    return next_seed(Path(str(dataset_root)).expanduser().absolute())


def _check_param(value: Any, key: str) -> None:
    """ROS parameters are scalars or homogeneous lists of scalars."""
    if isinstance(value, PARAM_TYPES):
        return
    if isinstance(value, list):
        kinds = {type(v) for v in value}
        if all(issubclass(k, PARAM_TYPES) for k in kinds) and (len(kinds) <= 1 or kinds <= {int, float}):
            return
        raise ProfileError(
            f"{key}: a list parameter must hold values of one type, got {sorted(k.__name__ for k in kinds)}"
        )
    raise ProfileError(f"{key}: unsupported parameter value {value!r} (use a scalar or a list of scalars)")
