"""Typed hooks: a pydantic model or a dataclass that subclasses ``wayline.Hook`` (the
reference SDK's ``defineHook``, vercel-py's ``BaseHook``).

    class Approval(wayline.Hook, pydantic.BaseModel):
        approved: bool
        by: str

    # inside a workflow
    approval = await Approval.wait(f"approve:{order_id}", timeout="1d")
    # anywhere else
    await Approval.resume(client, f"approve:{order_id}", Approval(approved=True, by="ana"))

``wait`` creates the hook, returns the first payload validated as the class, and disposes the
hook (its token is free again: the same run may wait on it once more). The class is recorded
with the hook, so ``resume`` -- this one, ``Client.resume_hook`` or ``wayline hooks resume`` in
a process that can import the class -- refuses a payload that does not validate, naming the
field, before anything is written. ``wayline.Hook`` itself stays the type of what
``wayline.create_hook`` returns (an untyped handle), so existing code keeps working.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, TypeVar

from .._core.durations import Duration
from .._core.serde import decode, encode
from ..errors import InvalidPayloadError, SerializationError
from .context import current_replay

if TYPE_CHECKING:
    from ..client import Client
    from ..world import HookInfo, World

H = TypeVar("H", bound="Hook")


class Hook:
    """Subclass it in a pydantic model or a dataclass to declare a typed hook payload. Without
    fields it is the type of ``wayline.create_hook``'s handle."""

    @classmethod
    def type_name(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"

    @classmethod
    def _check_typed(cls, api: str) -> None:
        if cls is Hook or (
            not hasattr(cls, "__dataclass_fields__") and not hasattr(cls, "model_fields")
        ):
            raise TypeError(
                f"{cls.__qualname__}.{api}() needs a typed hook: subclass wayline.Hook in a "
                "pydantic model or a dataclass"
            )

    @classmethod
    async def wait(
        cls: type[H],
        token: str | None = None,
        *,
        timeout: Duration | None = None,
        metadata: Any = None,
    ) -> H:
        """Inside a workflow: create a hook holding ``token``, wait for its first payload
        (validated as this class; :class:`wayline.HookTimeout` after ``timeout``), then
        dispose the hook so its token is free again."""
        cls._check_typed("wait")
        replay = current_replay("Hook.wait")
        handle = replay.create_hook(token, timeout, cls, metadata, cls.type_name())
        handle._record.shape = _shape_of(cls)
        try:
            value: H = await handle
        finally:
            replay.dispose_hook(handle._record)
        return value

    @classmethod
    async def resume(
        cls, client: Client, token: str, payload: Any, *, delivery_id: str | None = None
    ) -> str:
        """Outside a workflow: deliver ``payload`` (an instance, or a mapping that validates
        as this class) to the hook holding ``token``; returns the run id. Raises
        :class:`wayline.errors.InvalidPayloadError` naming the field when it does not
        validate, or when the hook waits for another type; nothing is written then."""
        cls._check_typed("resume")
        hook = await client.world.get_hook(token)
        if hook is not None and hook.active:
            recorded = await recorded_type(client.world, hook)
            if recorded is not None and recorded != cls.type_name():
                raise InvalidPayloadError(
                    f"hook {token!r} waits for {recorded}, not {cls.type_name()}", token=token
                )
        value = validate(cls, payload, token)
        return await client.resume_hook(token, value, delivery_id=delivery_id)


_SHAPES: dict[type[Any], dict[str, Any]] = {}


def _shape_of(cls: type[Any]) -> dict[str, Any]:
    if cls not in _SHAPES:
        _SHAPES[cls] = shape(cls)
    return _SHAPES[cls]


def validate(cls: type[Any], payload: Any, token: str) -> Any:
    if isinstance(payload, cls):
        return payload
    try:
        return decode(encode(payload, what=f"payload for hook {token!r}"), cls, what="payload")
    except SerializationError as err:
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: {err.message}", token=token
        ) from None


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def shape(cls: type[Any]) -> dict[str, Any]:
    """The top level of the class's JSON schema -- required fields and the JSON type of each
    field -- recorded with the hook so that a process without the class (the operator, the
    CLI) still refuses a payload that misses a field or has the wrong kind of value."""
    import pydantic

    schema = pydantic.TypeAdapter(cls).json_schema()
    fields: dict[str, list[str]] = {}
    for name, prop in (schema.get("properties") or {}).items():
        options = prop.get("anyOf", [prop])
        kinds = [o.get("type") for o in options]
        if all(isinstance(k, str) and k in _JSON_TYPES for k in kinds):
            fields[name] = kinds
        else:
            fields[name] = []  # a nested or constrained type: checked where the class is
    return {"required": list(schema.get("required") or []), "fields": fields}


def check_shape(recorded: Any, payload: Any, token: str) -> None:
    if not isinstance(recorded, dict):
        return
    if not isinstance(payload, dict):
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: expected an object with fields "
            f"{', '.join(recorded.get('fields') or {})}",
            token=token,
        )
    problems = [
        f"{name}: Field required" for name in recorded.get("required") or [] if name not in payload
    ]
    for name, kinds in (recorded.get("fields") or {}).items():
        if name not in payload or not kinds:
            continue
        value = payload[name]
        allowed = tuple(t for k in kinds for t in _JSON_TYPES[k])
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            problems.append(f"{name}: expected {' or '.join(kinds)}, got {type(value).__name__}")
    if problems:
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: {'; '.join(problems)}", token=token
        )


async def created_data(world: World, hook: HookInfo) -> dict[str, Any]:
    for e in await world.list_events(hook.run_id):
        if e.type.value == "hook_created" and e.correlation_id == hook.correlation_id:
            return dict(e.data)
    return {}


async def recorded_type(world: World, hook: HookInfo) -> str | None:
    name = (await created_data(world, hook)).get("type")
    return str(name) if name else None


def find_type(name: str) -> type[Any] | None:
    """The class recorded as ``module:Qualname``, if this process has (or can import) it."""
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not importable here: the workflow validates it on arrival
            return None
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) else None


async def check_resume(world: World, hook: HookInfo, payload: Any) -> None:
    """Refuse, before anything is written, a payload that a typed hook would not accept: in
    full where this process has the class, by its recorded shape everywhere else."""
    data = await created_data(world, hook)
    name = data.get("type")
    if not name:
        return
    cls = find_type(str(name))
    if cls is not None:
        validate(cls, payload, hook.token)
        return
    plain = encode(payload, what=f"payload for hook {hook.token!r}")
    check_shape(data.get("shape"), plain, hook.token)
