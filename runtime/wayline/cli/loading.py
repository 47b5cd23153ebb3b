"""Finding user code: a module (dotted name) or a ``.py`` file, and the workflows in it."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import sys
import sysconfig
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from .._core import ordering
from .._core.definitions import WorkflowDefinition
from .._core.ids import is_run_id
from .._core.search_attributes import Where, encode, parse_assignment, parse_where
from ..arguments import UsageParser as UsageParser
from ..arguments import port_arg as port_arg
from ..arguments import range_arg as range_arg
from ..arguments import whole_arg as whole_arg
from ..errors import WaylineError
from ..world.business_ids import check_business_id


class UsageError(Exception):
    """Bad input on the command line: printed as one ``error:`` line, exit code 2."""


def looks_like_file(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def import_app(spec: str) -> ModuleType:
    """Import ``spec``: a path to a ``.py`` file, or a dotted module name importable from the
    current directory (as ``python -m`` would)."""
    if not spec:
        raise UsageError("no module given (a dotted module name or a path to a .py file)")
    if looks_like_file(spec):
        return _import_file(Path(spec))
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as err:
        if err.name is not None and (spec == err.name or spec.startswith(err.name + ".")):
            raise UsageError(
                f"cannot import module {spec!r}: no module named {err.name!r} "
                f"(looked in {cwd} and the installed packages)"
            ) from None
        raise UsageError(_import_failure(spec, err)) from None
    except (Exception, SystemExit) as err:
        # a module that exits as it is imported (a script's code outside its `__main__`
        # guard) would end the command with the module's code, 0 for a plain sys.exit()
        raise UsageError(_import_failure(spec, err)) from None


def _import_file(path: Path) -> ModuleType:
    if path.is_dir():
        raise UsageError(
            f"cannot import {str(path)!r}: a directory (give a .py file in it, or a module's "
            "dotted name)"
        )
    if not path.is_file():
        py = path.with_name(path.name + ".py")
        hint = f" (did you mean {str(py)!r}?)" if path.suffix != ".py" and py.is_file() else ""
        raise UsageError(f"cannot import {str(path)!r}: no such file{hint}")
    if path.suffix != ".py":
        raise UsageError(f"cannot import {str(path)!r}: not a .py file")
    resolved = path.resolve()
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file's sibling modules import as they do for python
    name = resolved.stem if resolved.stem.isidentifier() else "wayline_app"
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) == str(resolved):
            return existing
        name = f"wayline_app_{abs(hash(str(resolved))):x}"
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:  # pragma: no cover - .py always loads
        raise UsageError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:
        del sys.modules[name]
        raise UsageError(_import_failure(str(path), err)) from None
    return module


def _import_failure(spec: str, err: BaseException) -> str:
    where = ""
    frames = traceback.extract_tb(err.__traceback__)
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({err.filename}:{err.lineno})"
    elif frames:
        # the user's line, not the library's: a decorator refusing its options raises inside
        # wayline, and the line to fix is the one that applied it
        outside = [f for f in frames if not f.filename.startswith(_NOT_USERS)]
        last = (outside or frames)[-1]
        where = f" ({last.filename}:{last.lineno})"
    if isinstance(err, SystemExit):
        why = f"it exits as it is imported (sys.exit({err.code!r}))"
        return f"importing {spec!r} failed: {why}{where}"
    return f"importing {spec!r} failed: {type(err).__name__}: {err}{where}"


_NOT_USERS = (
    str(Path(__file__).resolve().parents[1]) + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    "<",
)
"""Where no line of the application is: the wayline package, the standard library (typing's
generic classes call the constructors), importlib's frozen modules."""


def workflows_in(module: ModuleType) -> list[WorkflowDefinition[..., Any]]:
    """Every workflow definition a module holds, in definition order, each once."""
    seen: dict[int, WorkflowDefinition[..., Any]] = {}
    for value in vars(module).values():
        if isinstance(value, WorkflowDefinition) and id(value) not in seen:
            seen[id(value)] = value
    return list(seen.values())


def split_target(target: str) -> tuple[str, str | None]:
    """``MODULE_OR_FILE:WORKFLOW`` -> (module, workflow); without a colon, (target, None)."""
    module, sep, name = target.rpartition(":")
    if not sep:
        return target, None
    if not module or not name:
        raise UsageError(f"bad target {target!r}: expected MODULE_OR_FILE:WORKFLOW")
    return module, name


def load_target(
    target: str,
) -> tuple[WorkflowDefinition[..., Any], list[WorkflowDefinition[..., Any]]]:
    """Import the module of ``MODULE_OR_FILE:WORKFLOW`` and find the workflow, by attribute
    name or by its registered name. Without ``:WORKFLOW`` the module must hold exactly one.
    Returns the workflow and every workflow of the module (a worker needs them all)."""
    module_spec, name = split_target(target)
    module = import_app(module_spec)
    found = workflows_in(module)
    if not found:
        raise UsageError(
            f"{module_spec!r} defines no workflow (decorate one with @wayline.workflow)"
        )
    if name is None:
        if len(found) == 1:
            return found[0], found
        names = ", ".join(sorted(w.name for w in found))
        raise UsageError(
            f"{module_spec!r} defines several workflows ({names}): pick one as {module_spec}:NAME"
        )
    attribute = getattr(module, name, None)
    if isinstance(attribute, WorkflowDefinition):
        return attribute, found
    for definition in found:
        if definition.name == name:
            return definition, found
    names = ", ".join(sorted({w.name for w in found}))
    raise UsageError(f"no workflow {name!r} in {module_spec!r} (workflows there: {names})")


def namespace_arg(text: str) -> str:
    """A Kubernetes namespace name (an RFC 1123 label; argparse ``type=``)."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a namespace name: at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return text


def business_id_arg(text: str) -> str:
    """``--id`` (argparse ``type=``): a business id within its limits."""
    try:
        return check_business_id(text)
    except WaylineError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def _ordering_arg(text: str, field: str) -> int | str:
    """``text`` as the ``field`` of a run's ordering, checked as ``StartOptions`` checks it, so
    a bad value is refused with its bounds before anything is started."""
    value: int | str = text
    if field != "fairness_key":
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{field} is an integer, not {text!r}") from None
    order: dict[str, Any] = {"priority": ordering.DEFAULT_PRIORITY, "fairness_key": None}
    order["fairness_weight"] = 1
    order[field] = value
    try:
        ordering.check(order["priority"], order["fairness_key"], order["fairness_weight"])
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def priority_arg(text: str) -> int:
    """``--priority`` (argparse ``type=``): 0 (served first) to 9."""
    return int(_ordering_arg(text, "priority"))


def fairness_key_arg(text: str) -> str:
    """``--fairness-key`` (argparse ``type=``): 1 to 256 characters."""
    return str(_ordering_arg(text, "fairness_key"))


def fairness_weight_arg(text: str) -> int:
    """``--fairness-weight`` (argparse ``type=``): 1 to 100."""
    return int(_ordering_arg(text, "fairness_weight"))


def run_arg(text: str) -> str:
    """A RUN_ID argument (argparse ``type=``): a run id, or a business id within its limits."""
    return text if is_run_id(text) else business_id_arg(text)


def add_run_argument(
    parser: argparse.ArgumentParser, dest: str = "run_id", *, optional: bool = False
) -> None:
    """The RUN_ID argument of every command that acts on one run, and the ``--namespace`` a
    business id given there was started in. ``optional``: a command that can name its runs
    another way (``--where``) takes none too."""
    parser.add_argument(
        dest,
        metavar="RUN_ID",
        nargs="?" if optional else None,
        type=run_arg,
        help="a run id (wf_...), or the id it was started with (wayline start --id), which "
        "names the newest run started with it",
    )
    parser.add_argument(
        "--namespace",
        type=namespace_arg,
        metavar="NAME",
        help="the namespace a business id was started in (wayline start --namespace); "
        "default: none",
    )


def where_arg(text: str) -> Where:
    """``--where`` (argparse ``type=``): ``key OP value``; a bad one exits 2 naming why."""
    try:
        return parse_where(text)
    except WaylineError as err:
        raise argparse.ArgumentTypeError(err.message) from None


def attr_arg(text: str) -> tuple[str, Any]:
    """``--attr key=value`` (argparse ``type=``): a search attribute, typed and checked."""
    try:
        name, value = parse_assignment(text)
        encode({name: value})
    except WaylineError as err:
        raise argparse.ArgumentTypeError(err.message) from None
    return name, value


def seconds_arg(text: str) -> float:
    """An option's number of seconds (argparse ``type=``): 0 or more, finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):  # NaN and inf too
        raise argparse.ArgumentTypeError(f"seconds must be 0 or more, got {text}")
    return value


def json_text(text: str | None, option: str) -> str | None:
    """An option's JSON as given, or with ``@PATH`` the text of the file at PATH (``@-``:
    standard input), as curl's ``-d @file``: a payload over argv's limit. (JSON never starts
    with ``@``, so the two cannot be confused.) A file that cannot be read is a UsageError
    naming the option and the path."""
    if text is None or not text.startswith("@"):
        return text
    path = text[1:]
    if not path:
        raise UsageError(f"{option} @: no file named (@PATH reads PATH, @- standard input)")
    most = _most_json_bytes()
    try:
        if path == "-":
            stdin = sys.stdin
            if stdin is None:
                raise OSError("standard input is closed")
            data = (
                stdin.buffer.read(most + 1)
                if hasattr(stdin, "buffer")
                else stdin.read(most + 1).encode()
            )
        else:
            with open(path, "rb") as file:
                data = file.read(most + 1)
        if len(data) > most:  # /dev/zero, a wrong file: refused before it fills memory
            raise UsageError(
                f"{option} {text}: larger than {most} bytes (the largest payload a run takes, "
                "WAYLINE_MAX_INPUT_BYTES or WAYLINE_MAX_HOOK_PAYLOAD_BYTES, as indented JSON)"
            )
        return data.decode("utf-8-sig")
    except OSError as err:
        where = "standard input" if path == "-" else repr(path)
        raise UsageError(f"{option} {text}: cannot read {where}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{option} {text}: not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None


def _most_json_bytes() -> int:
    """The most an ``@PATH`` file may hold: four times the larger of the input and hook
    payload limits (a file's JSON may be indented; the limit itself is checked on the compact
    JSON when the value is used)."""
    from ..settings import Settings

    limits = Settings.from_env().limits
    return 4 * max(limits.input, limits.hook_payload)


def parse_json(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        at = f"position {err.pos}"
        if err.lineno > 1:  # a file's text: where a person looks for it
            at = f"line {err.lineno} column {err.colno}, {at}"
        raise UsageError(f"{option} is not valid JSON ({err.msg} at {at}): {_clip(text)}") from None
    except (RecursionError, ValueError) as err:  # nesting or integer digits past the limits
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err).split(";")[0]
        raise UsageError(f"{option} is not acceptable JSON ({why})") from None


def _clip(text: str, keep: int = 200) -> str:
    shown = repr(text)
    return shown if len(shown) <= keep else f"{shown[:keep]}... ({len(text)} characters)"


def option_json(text: str | None, option: str) -> tuple[str | None, Any]:
    """An option's JSON text and value ((None, None) without the option), given inline or as
    ``@PATH``/``@-`` (:func:`json_text`); invalid JSON in a file is refused as inline JSON
    is, with the ``@PATH`` named."""
    given = json_text(text, option)
    return given, parse_json(given, option if given == text else f"{option} {text}")


def as_arguments(value: Any) -> list[Any]:
    """A JSON array is the positional arguments, any other JSON value is the one argument.
    (A workflow taking one list: ``[[1, 2]]``.)"""
    return list(value) if isinstance(value, list) else [value]


def input_given(text: str | None) -> tuple[list[Any], Any]:
    """``--input`` as given (inline JSON, ``@PATH`` or ``@-``, read once) as a run's arguments
    (:func:`as_arguments`), and the JSON value it held; no ``--input`` is no arguments (and
    None)."""
    if text is None:
        return [], None
    value = option_json(text, "--input")[1]
    return as_arguments(value), value
