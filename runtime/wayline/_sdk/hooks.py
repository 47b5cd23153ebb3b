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
import inspect
import json
import sys
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, overload

from .._core import projections
from .._core.events import Event
from .._core.futures import WFuture
from .._core.projections import HookCreated
from .._core.replay import HookRecord
from .._core.serde import decode, encode
from ..durations import Duration
from ..errors import InvalidPayloadError, SerializationError
from .context import current_replay
from .plain_shapes import (
    COMPILE_LEFT,
    PATTERN_SECONDS,
    PLAIN_KINDS,
    key_problem,
    kind_of,
    kind_problem,
    kinds_of,
    literal_values,
    plain_element,
    plain_problems,
    value_problem,
)

H = TypeVar("H", bound="Hook")
T = TypeVar("T")


# What this module needs of a hook's world entry, a world and a client (the world and the
# client sit above the sdk: it names only these shapes, never their modules).
class HookEntry(Protocol):
    @property
    def token(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def correlation_id(self) -> str: ...
    @property
    def active(self) -> bool: ...


class EventReader(Protocol):
    async def list_events(self, run_id: str) -> Sequence[Event]: ...


class HookWorld(EventReader, Protocol):
    async def get_hook(self, token: str) -> HookEntry | None: ...


class HookClient(Protocol):
    @property
    def world(self) -> HookWorld: ...

    async def resume_hook(
        self,
        token: str,
        payload: Any,
        *,
        delivery_id: str | None = None,
        buffer: Duration | None,
    ) -> str | None: ...


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
        record = replay.create_hook(token, timeout, cls, metadata, cls.type_name())
        record.shape = _shape_of(cls)
        try:
            value: H = await record.first
        finally:
            replay.dispose_hook(record)
        return value

    @overload
    @classmethod
    async def resume(
        cls,
        client: HookClient,
        token: str,
        payload: Any,
        *,
        delivery_id: str | None = None,
        buffer: None = None,
    ) -> str: ...
    @overload
    @classmethod
    async def resume(
        cls,
        client: HookClient,
        token: str,
        payload: Any,
        *,
        delivery_id: str | None = None,
        buffer: Duration | None,
    ) -> str | None: ...
    @classmethod
    async def resume(
        cls,
        client: HookClient,
        token: str,
        payload: Any,
        *,
        delivery_id: str | None = None,
        buffer: Duration | None = None,
    ) -> str | None:
        """Outside a workflow: deliver ``payload`` (an instance, or a mapping that validates
        as this class) to the hook holding ``token``; returns the run id. Raises
        :class:`wayline.errors.InvalidPayloadError` naming the field when it does not
        validate, or when the hook waits for another type; nothing is written then. With
        ``buffer`` the payload, validated as this class first, waits for a hook that does not
        exist yet (``Client.resume_hook``); None when it was stored."""
        cls._check_typed("resume")
        hook = await client.world.get_hook(token)
        if hook is not None and hook.active:
            recorded = await recorded_type(client.world, hook)
            if recorded is not None and recorded != cls.type_name():
                raise InvalidPayloadError(
                    f"hook {token!r} waits for {recorded}, not {cls.type_name()}", token=token
                )
        value = validate(cls, payload, token)
        return await client.resume_hook(token, value, delivery_id=delivery_id, buffer=buffer)


class HookHandle(Hook, Generic[T]):
    """What ``wayline.create_hook`` returns: ``await hook`` gives the first payload;
    ``async for payload in hook`` gives every payload in log order; ``hook.dispose()`` frees
    its token (a new hook in this run or another may then hold it). ``T`` is the payload's
    type: the ``type=`` given to ``create_hook``, else ``Any``."""

    def __init__(self, record: HookRecord, webhook_url: str | None = None) -> None:
        self._record = record
        self._next = 0
        self._webhook_url = webhook_url

    @property
    def token(self) -> str:
        return self._record.token

    @property
    def webhook_url(self) -> str | None:
        """The signed URL that resumes this hook with a POST of JSON, for a hook created with
        ``webhook=True``; None otherwise (docs/console.md, "Webhook URLs")."""
        return self._webhook_url

    def dispose(self) -> None:
        """Stop receiving payloads and free the token (written before the run's next calls)."""
        current_replay("dispose").dispose_hook(self._record)

    def __await__(self) -> Generator[Any, None, T]:
        first: WFuture[T] = self._record.first
        return first.__await__()

    def __aiter__(self) -> HookHandle[T]:
        return self

    async def __anext__(self) -> T:
        index = self._next
        self._next += 1
        rec = self._record
        if index == 0:
            first: WFuture[T] = rec.first
            return await first
        if index < len(rec.payloads):
            payload: T = rec.payloads[index]
            return payload
        fut: WFuture[T] = rec.waiters.setdefault(index, WFuture(f"hook {rec.token}#{index}"))
        return await fut


_SHAPES: dict[type[Any], dict[str, Any] | None] = {}


def _shape_of(cls: type[Any]) -> dict[str, Any] | None:
    """The class's ``shape``, or None when its payload is not a JSON object with fields (or
    pydantic cannot describe the class): such a payload is checked where the class is. One
    schema per class, cached."""
    if cls not in _SHAPES:
        try:
            schema = _schema(cls)
        except Exception:
            schema = {}
        top = _top(schema)
        is_object = top.get("type") == "object" and "properties" in top
        _SHAPES[cls] = _bounded(schema) if is_object else None
    return _SHAPES[cls]


def recorded(hint: Any) -> tuple[str | None, dict[str, Any] | None]:
    """What ``create_hook(type=...)`` records so that a resumer refuses a bad payload before
    anything is written (as for a :class:`Hook` subclass): the class's ``module:Qualname``,
    and its shape when its payload is a JSON object. ``(None, None)`` for no type or a type
    that is not a class (``list[int]``): the workflow validates those on arrival."""
    if not isinstance(hint, type):
        return None, None
    return f"{hint.__module__}:{hint.__qualname__}", _shape_of(hint)


def _schema(cls: type[Any]) -> dict[str, Any]:
    import pydantic

    schema: dict[str, Any] = pydantic.TypeAdapter(cls).json_schema(
        schema_generator=_by_accepted_keys()
    )
    return schema


def _by_accepted_keys() -> type[Any]:
    """pydantic's JSON schema writer, changed for each model whose JSON schema does not name
    every key the class takes: a field taken by its name as well as its alias
    (``populate_by_name``, ``validate_by_name``), by one of several aliases (``AliasChoices``),
    or left out of the schema (``SkipJsonSchema``), and a model whose schema is closed by hand
    (``json_schema_extra``) though the class is not. Such a model is written open (no
    ``additionalProperties: false``, so no ``closed``), and a required field that has another
    key is written not required, so that a payload the class takes is never refused by shape;
    the class checks it."""
    from pydantic.json_schema import GenerateJsonSchema

    class _AcceptedKeys(GenerateJsonSchema):
        # the core schema's definitions (a key that is an Enum is a reference to one) and the
        # config of each class being written, innermost last: what a mapping's key check is
        core_definitions: list[Any] = []
        configs: list[Mapping[str, Any]] = []

        def generate(self, schema: Any, mode: Any = "validation") -> Any:
            found = schema.get("definitions") if schema.get("type") == "definitions" else None
            self.core_definitions = list(found or [])
            self.configs = []
            return super().generate(schema, mode)

        def _configured(self, schema: Any, write: Any) -> Any:
            self.configs.append(schema.get("config") or {})
            try:
                return write(schema)
            finally:
                self.configs.pop()

        def model_schema(self, schema: Any) -> Any:
            out = self._configured(schema, super().model_schema)
            model = schema.get("cls")
            if isinstance(out, dict) and isinstance(getattr(model, "model_fields", None), dict):
                _open_to_keys(out, model)
            return out

        def dataclass_schema(self, schema: Any) -> Any:
            out = self._configured(schema, super().dataclass_schema)
            args = schema.get("schema") or {}
            _open_by_core(out, args.get("fields") or [], schema.get("config") or {})
            return out

        def typed_dict_schema(self, schema: Any) -> Any:
            out = self._configured(schema, super().typed_dict_schema)
            fields = schema.get("fields") or {}
            named = [{**field, "name": name} for name, field in fields.items()]
            _open_by_core(out, named, schema.get("config") or {})
            return out

        def dict_schema(self, schema: Any) -> Any:
            # pydantic writes a mapping's key type only where it is a constrained string or
            # a definition (``propertyNames``): ``dict[int, str]`` says nothing of its keys.
            # The key's own schema, under a name of ours, is what the shape records of it
            out = super().dict_schema(schema)
            keys = schema.get("keys_schema")
            if isinstance(out, dict) and keys is not None:
                out[_KEYS] = self.generate_inner(keys)
                config = self.configs[-1] if self.configs else {}
                out.update(key_checks(keys, self.core_definitions, config))
            return out

    return _AcceptedKeys


_KEYS = "x-wayline-keys"
"""Where the JSON schema the recorder reads holds a mapping's key schema (never written out)."""

_KEY_RULES = "x-wayline-key-rules"
"""Where it holds a string key's ``pattern``, ``minLength`` and ``maxLength`` as the class
checks them (never written out)."""

_KEY_TAKES = "x-wayline-key-takes"
"""Where it holds the values of a ``Literal`` or an ``Enum`` key that a JSON object's key names
for the class (never written out)."""


def key_checks(
    keys: Mapping[str, Any], definitions: list[Any], config: Mapping[str, Any]
) -> dict[str, Any]:
    """What a mapping's key check is, read from its core schema ``keys``: a string key's rules
    (:data:`_KEY_RULES`), only where the class checks the key as it is given (no
    ``strip_whitespace``, ``to_lower``, ``to_upper``, in the key or the class's config, and no
    validator of the user's around it; its pattern only as a string for pydantic's own regex
    engine, not compiled by Python's ``re``); and
    which of a ``Literal``'s or an ``Enum``'s values a JSON object's key can name
    (:data:`_KEY_TAKES`), found by the class's own key check with each value as a JSON key is
    written (``Literal[1]`` takes no ``"1"``, an ``IntEnum`` does). Nothing where it cannot be
    told."""
    core = _core_resolved(keys, definitions)
    kind = core.get("type")
    if kind == "str":
        shifts = ("strip_whitespace", "to_lower", "to_upper")
        if any(core.get(k) for k in shifts) or any(config.get(f"str_{k}") for k in shifts):
            return {}
        pattern = core.get("pattern")
        if "python-re" in (config.get("regex_engine"), core.get("regex_engine")) or not isinstance(
            pattern, str
        ):
            # Python's ``re`` reads a pattern otherwise than the engines that check it by the
            # shape (its ``$`` also matches before a last newline): the class checks it. So
            # does pydantic a pattern given compiled (``re.compile(r"^[a-z]+$", re.I)``), with
            # its flags, whatever the engine named
            pattern = None
        rules = {
            "pattern": pattern if isinstance(pattern, str) else None,
            "minLength": core.get("min_length"),
            "maxLength": core.get("max_length"),
        }
        found = {k: v for k, v in rules.items() if v is not None}
        return {_KEY_RULES: found} if found else {}
    if kind not in ("literal", "enum"):
        return {}
    given = core.get("expected") if kind == "literal" else core.get("members")
    values = [getattr(v, "value", v) for v in given or []]
    try:
        from pydantic_core import SchemaValidator

        # a literal's or an enum's schema refers to nothing else: it is built alone, not with
        # every definition of the class
        check = SchemaValidator(dict(core))
    except Exception:
        return {}
    return {_KEY_TAKES: [v for v in values if _takes(check, v)]}


def _takes(check: Any, value: Any) -> bool:
    """Whether a key check takes ``value`` as a JSON object's key writes it (``1`` as ``"1"``,
    ``True`` as ``"true"``), as the console's form sends it."""
    if value is None or not isinstance(value, (str, int, float)):
        return False
    written = value if isinstance(value, str) else json.dumps(value)
    try:
        check.validate_python(written)
    except Exception:
        return False
    return True


def _core_resolved(schema: Mapping[str, Any], definitions: list[Any]) -> Mapping[str, Any]:
    """A core schema with a ``definition-ref`` replaced by the definition it names."""
    if schema.get("type") != "definition-ref":
        return schema
    for found in definitions:
        if isinstance(found, Mapping) and found.get("ref") == schema.get("schema_ref"):
            return found
    return schema


def _open_to_keys(out: dict[str, Any], model: Any) -> None:
    """:func:`_by_accepted_keys` for one model's JSON schema ``out``."""
    if not isinstance(out.get("properties"), Mapping):
        return
    config = getattr(model, "model_config", {}) or {}
    by_name = bool(config.get("populate_by_name") or config.get("validate_by_name"))
    keyed = {name: _keys_of(name, info, by_name) for name, info in model.model_fields.items()}
    through = {name: _through_of(info) for name, info in model.model_fields.items()}
    _open_keys(out, config.get("extra") == "forbid", keyed, through)


def _open_keys(
    out: dict[str, Any],
    forbid: bool,
    keyed: Mapping[str, set[str]],
    through: Mapping[str, set[str]] | None = None,
) -> None:
    """Open ``out`` (and make a field not required) where a field is taken by a key its JSON
    schema does not name, or by more than one key, or through a path (``keyed``: each field's
    keys; ``through``: the first keys of its paths, ``AliasPath("a", 0)``'s ``a``). The
    schema names a field taken through a path by its name, typed as the field, though a
    payload need not give that name and the path's key holds what the path reads from (a list,
    an object): such a property is not required, and one a path reads from has no type."""
    fields = out["properties"]
    if not forbid and out.get("additionalProperties") is False:
        # closed by hand (``json_schema_extra``) for the schema's readers, not for validation:
        # the class takes and drops an unknown key, so the shape must not refuse it
        del out["additionalProperties"]
    required = out.get("required")
    for name, keys in keyed.items():
        paths = (through or {}).get(name) or set()
        if not keys & set(fields) or len(keys) > 1 or paths:
            # a key the schema does not name: the model takes a key no property names
            if out.get("additionalProperties") is False:
                del out["additionalProperties"]
            if isinstance(required, list):
                named = keys | ({name} if paths else set())
                required[:] = [key for key in required if key not in named]
        for key in paths & set(fields):
            fields[key] = {}  # what a path reads from, not the field's value: its kind unsaid


def _open_by_core(out: Any, fields: list[Any], config: Mapping[str, Any]) -> None:
    """:func:`_open_to_keys` for a pydantic dataclass's or a TypedDict's JSON schema ``out``,
    read from its core schema's ``fields`` (each with its ``name`` and ``validation_alias``)
    and ``config``: such a class with ``extra="forbid"`` is recorded closed as a model is, so a
    field it takes by its name as well as its alias must not be refused by shape either."""
    if not isinstance(out, dict) or not isinstance(out.get("properties"), Mapping):
        return
    by_name = bool(config.get("validate_by_name"))
    forbid = config.get("extra_fields_behavior") == "forbid"
    keyed: dict[str, set[str]] = {}
    through: dict[str, set[str]] = {}
    for field in fields:
        name, alias = field.get("name"), field.get("validation_alias")
        if not isinstance(name, str):
            continue
        paths = (
            alias if isinstance(alias, list) and alias and isinstance(alias[0], list) else [alias]
        )
        keys = {p[0] if isinstance(p, list) and p else p for p in paths if p is not None}
        keyed[name] = {k for k in keys if isinstance(k, str)} | (
            {name} if alias is None or by_name else set()
        )
        deep = {p[0] for p in paths if isinstance(p, list) and len(p) > 1}
        through[name] = {k for k in deep if isinstance(k, str)}
    _open_keys(out, forbid, keyed, through)


def _through_of(info: Any) -> set[str]:
    """The first keys of the paths a model's field is taken through (``AliasPath("a", 0)``:
    ``a``, whose value is what the path reads from, not the field's)."""
    alias = info.validation_alias if info.validation_alias is not None else info.alias
    choices = getattr(alias, "choices", None)
    found: set[str] = set()
    for choice in choices if isinstance(choices, list) else [alias]:
        path = getattr(choice, "path", None)
        if isinstance(path, list) and len(path) > 1 and isinstance(path[0], str):
            found.add(path[0])
    return found


def _keys_of(name: str, info: Any, by_name: bool) -> set[str]:
    """The keys of a payload a model's field ``name`` is taken from."""
    alias = info.validation_alias if info.validation_alias is not None else info.alias
    keys: set[str] = set()
    choices = getattr(alias, "choices", None)
    for choice in choices if isinstance(choices, list) else [alias]:
        path = getattr(choice, "path", None)
        first = path[0] if isinstance(path, list) and path else choice
        if isinstance(first, str):
            keys.add(first)
    if alias is None or by_name:
        keys.add(name)
    return keys


def validate(cls: type[Any], payload: Any, token: str) -> Any:
    if isinstance(payload, cls):
        return payload
    try:
        return decode(encode(payload, what=f"payload for hook {token!r}"), cls, what="payload")
    except SerializationError as err:
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: {err.message}", token=token
        ) from None


_NESTED_DEPTH = 16
"""How deep the recorded shape follows nested models and lists of lists (a model that contains
itself stops here, as does a forged shape the server checks). Each level is a fieldset in the
console's form: 16 is deeper than any hand-written payload model, and a model that contains
itself (a linked list, a tree) is followed 16 levels, within :data:`SHAPE_BYTES`, and taken as
JSON below that."""

SHAPE_BYTES = 64 * 1024
"""The most JSON a recorded shape may take. The shape rides in the hook's ``hook_created``
event, which is never stored out of line and must stay well under NATS's 1 MiB message: a
recursive union (an expression tree whose six node models each hold the union again) followed
four levels deep is 1.4 MB. A shape records the most levels whose walk fits in this; the
levels left out are checked where the class is, and the console's form takes them as JSON."""


class _TooLarge(Exception):
    """A walk that has passed :data:`SHAPE_BYTES`: it is given up at once, so that a class
    whose shape would be millions of fields costs no more than the budget to try."""


@dataclass
class _Walk:
    """One attempt at recording a shape: how many levels of models it follows, and how many
    bytes of JSON its fields have taken so far (a lower bound on the shape's size)."""

    levels: int
    spent: int = 0
    cut: bool = False
    """Whether the walk left out a level (a model, or a list that is no list of plain values,
    below its last level): one that did not records the whole class, as would any deeper."""

    def take(self, name: str) -> None:
        self.add(len(name) + 8)  # "name":[], and a comma, at the least

    def add(self, chars: int) -> None:
        # a lower bound of the JSON's size kept close to it, so that a walk past the budget
        # is given up after about SHAPE_BYTES of shape, not several times that
        self.spent += chars
        if self.levels and self.spent > SHAPE_BYTES:
            raise _TooLarge


def shape(cls: type[Any]) -> dict[str, Any]:
    """The class's JSON schema as far as a process without the class can check it: required
    fields and the JSON type of each field, and the same for each field that is a nested
    model (``nested``), a list of models (``items``) or a union of models (``unions``), up to
    ``_NESTED_DEPTH`` levels deep and :data:`SHAPE_BYTES` in all, recorded with the hook so
    that the operator and the CLI still refuse a payload that misses a field or has the wrong
    kind of value, at any of those levels. The top level is always recorded whole."""
    return _bounded(_schema(cls))


def _bounded(schema: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`shape` of a class's JSON schema: as many levels as fit in :data:`SHAPE_BYTES`."""
    top, defs = _top(schema), schema.get("$defs") or {}

    # A shape grows with its levels, so the most that fit are found by walks that go deeper
    # until one leaves nothing out (the whole class: most classes, a few small walks) or
    # passes the budget, then by halving the gap between the deepest walk that fit and the
    # first that did not. A walk costs about its shape's size, and one past the budget is
    # given up at the budget. Where the shape grows by half or more a level (a tree, a
    # recursive union) the walks go one level deeper each, and their sizes add up to a few
    # budgets at most; where it grows slowly (a chain of wide models, a wide model holding a
    # thin chain) each walk goes twice as many levels deeper as the last, so 16 levels take
    # five or six walks, not sixteen of about the budget each.
    best, fits, step = _fields(top, defs, _Walk(0)), 0, 1
    size, too_large = len(json.dumps(best)), _NESTED_DEPTH + 1
    levels = 1
    while True:
        walk = _Walk(levels)
        found = _walked(top, defs, walk)
        if found is None:
            too_large = levels
        else:
            grown = len(json.dumps(found))
            slow = grown < size * 1.5 ** (levels - fits)  # less than half again a level
            best, step = found, step * 2 if slow else 1
            fits, size = levels, grown
            if not walk.cut:
                break
        if fits >= _NESTED_DEPTH or fits + 1 >= too_large:
            break
        growing = too_large > _NESTED_DEPTH  # no walk has passed the budget yet
        levels = min(fits + step, _NESTED_DEPTH) if growing else (fits + too_large) // 2
    return best


def _walked(top: Mapping[str, Any], defs: Mapping[str, Any], walk: _Walk) -> dict[str, Any] | None:
    """The shape one walk records, or None when it passes :data:`SHAPE_BYTES`."""
    try:
        found = _fields(top, defs, walk)
    except _TooLarge:
        return None
    return found if len(json.dumps(found)) <= SHAPE_BYTES else None


def _top(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema's own object: a model that refers to itself is a ``$ref`` at the top."""
    return _resolved(schema, schema.get("$defs") or {})


def _resolved(option: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``option`` with a local ``$ref`` (``#/$defs/Name``, how pydantic names a nested
    model) replaced by its definition; anything else as it is."""
    ref = option.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(found, Mapping):
            return found
    return option


def _options(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A property's alternatives, resolved: ``anyOf`` (``A | B``, ``Optional[A]``) and
    ``oneOf`` (a discriminated union) flattened one level, so ``Optional`` of a discriminated
    union is its models and null."""
    out: list[Mapping[str, Any]] = []
    for option in prop.get("anyOf") or prop.get("oneOf") or [prop]:
        option = _resolved(option, defs)
        inner = option.get("oneOf") or option.get("anyOf")
        if isinstance(inner, list) and option is not prop:
            out += [_resolved(o, defs) for o in inner if isinstance(o, Mapping)]
        else:
            out.append(option)
    return out


def _is_model(option: Mapping[str, Any]) -> bool:
    return option.get("type") == "object" and "properties" in option


def _is_mapping(option: Mapping[str, Any]) -> bool:
    """A ``dict[str, V]``: an object of no fields whose every value is a ``V``."""
    return (
        option.get("type") == "object"
        and "properties" not in option
        and _map_values(option) is not None
    )


def _map_values(option: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of a mapping's values: its ``additionalProperties`` (``true`` for any value:
    ``dict[str, Any]``, ``dict[str, object]``), or the one schema of its ``patternProperties``,
    which is how pydantic writes a mapping whose key has a pattern (and then writes no
    ``additionalProperties``); None for an object of no such values."""
    values = option.get("additionalProperties")
    if values is True:
        return {}
    if isinstance(values, Mapping):
        return values
    patterned = option.get("patternProperties")
    if values is None and isinstance(patterned, Mapping) and len(patterned) == 1:
        (only,) = patterned.values()
        return only if isinstance(only, Mapping) else None
    return None


_ANY: dict[str, Any] = {"any": True}
"""What a mapping's value is when it may be any JSON value (``dict[str, Any]``,
``dict[str, JsonValue]``): a key an older reader does not know, so it checks no such value
and its form keeps the mapping one JSON text area, as before."""


def _mapping(
    options: list[Mapping[str, Any]],
    models: list[Mapping[str, Any]],
    defs: Mapping[str, Any],
    walk: _Walk,
    depth: int,
    values_depth: int,
) -> dict[str, Any] | None:
    """A mapping (``dict[str, int]``, ``dict[str, Model]``) as ``{"map": <what each value is,
    as a list's item is said>}``, with ``or`` (``{"shape": ...}``, titled) for a model beside it
    (``Model | dict[str, int]``); None for an object of any other kind (``dict[str, Any]``,
    two mappings or two models: checked where the class is). Other options beside it (null, a
    plain value) are the field's kinds. The model is walked only once the mapping is known."""
    maps = [o for o in options if o.get("type") == "object" and not _is_model(o)]
    if len(maps) != 1 or not _is_mapping(maps[0]) or len(models) > 1:
        return None
    values = _map_values(maps[0]) or {}
    # any value, maybe null (``dict[str, Any]``, ``dict[str, Any | None]``): an option of no
    # schema at all takes every JSON value
    anything = any(not option for option in _options(values, defs))
    element = _ANY if anything else _list_element(values, defs, walk, values_depth)
    if element is None:
        return None
    walk.take("map")
    out: dict[str, Any] = {"map": element}
    key = _key_of(maps[0], defs)
    if key is not None:
        walk.take(json.dumps(key))
        out["key"] = key
    if models:
        model = _fields(models[0], defs, walk, depth + 1)
        model["title"] = str(models[0].get("title") or "")
        walk.take(model["title"])
        out["or"] = {"shape": model}
    return out


def _key_of(mapping: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a mapping's key is when it is not any string, said as a list's plain item is
    (``{"kinds": ["integer"]}`` for ``dict[int, str]``, ``{"kinds": ["string"], "values":
    ["low", "high"]}`` for a ``Literal`` or an ``Enum``); None for a string key, and for a key
    no plain element says (checked where the class is)."""
    keys = mapping.get(_KEYS, mapping.get("propertyNames"))
    if not isinstance(keys, Mapping):
        return None
    found = plain_element(_options(keys, defs))
    if found is None:
        return None
    takes = mapping.get(_KEY_TAKES)
    if "values" in found and isinstance(takes, list):
        # keys the class takes no JSON key for (``Literal[1]``): ``takes`` names those it does
        # take; an older reader passes the key over and offers every value, as before
        named = {(kind_of(v), v) for v in takes}
        found["takes"] = [v for v in found["values"] if (kind_of(v), v) in named]
    rules = mapping.get(_KEY_RULES)
    if found == {"kinds": ["string"]} and isinstance(rules, Mapping):
        # a pattern or lengths: an older reader takes the key as any string, as before
        found.update(rules)
    return None if found == {"kinds": ["string"]} else found


def _union(
    models: list[Mapping[str, Any]], tag: Any, defs: Mapping[str, Any], walk: _Walk, depth: int
) -> dict[str, Any]:
    """The branches of a union of models: each one's title and shape, and, for a
    discriminated union (``tag``: the field that tells them apart), the value that names it
    (and ``values``, every one that does, when its tag allows several: ``Literal["a", "b"]``)."""
    branches = []
    for model in models:
        branch: dict[str, Any] = {"title": str(model.get("title") or "")}
        walk.take(branch["title"])
        if isinstance(tag, str):
            named = (model.get("properties") or {}).get(tag) or {}
            values = [named["const"]] if "const" in named else list(named.get("enum") or [None])
            if values[0] is not None:
                branch["value"] = values[0]
            if len(values) > 1:
                branch["values"] = values
        branch["shape"] = _fields(model, defs, walk, depth + 1)
        branches.append(branch)
    out: dict[str, Any] = {"branches": branches}
    if isinstance(tag, str):
        out["tag"] = tag
    return out


def _list_element(
    prop: Mapping[str, Any], defs: Mapping[str, Any], walk: _Walk, depth: int
) -> dict[str, Any] | None:
    """What a list's item is: a plain value (:func:`plain_element`, at any depth), else, above
    the walk's levels, a model, a union of models, or a list itself (``{"list": <what its
    item is>}``: ``list[list[int]]``, ``list[list[Model]]``, one level each); None for
    anything else (checked where the class is)."""
    options = _options(prop, defs)
    plain = plain_element(options)
    if plain is not None:
        walk.take(json.dumps(plain))
        return plain
    if depth >= walk.levels:
        walk.cut = True
        return None
    if len(options) == 1 and options[0].get("type") == "array":
        return _list_of(options[0], defs, walk, depth)
    return _element(_Item(prop, options, defs, depth), walk)


def _list_of(
    array: Mapping[str, Any], defs: Mapping[str, Any], walk: _Walk, depth: int
) -> dict[str, Any] | None:
    """A list's item that is a list itself (``{"list": <what its item is>}``), one level
    deeper; None where the inner list's item is not recorded."""
    inner = array.get("items")
    element = _list_element(inner, defs, walk, depth + 1) if isinstance(inner, Mapping) else None
    if element is None:
        return None
    walk.take("list")
    return {"list": element}


@dataclass(frozen=True)
class _Item:
    """A list's item or a field as a walk meets it: its schema (``prop``), the options it may
    be (``_options`` of it against ``defs``) and how many levels of models down it stands.
    What :func:`_element`, :func:`_either`, :func:`_choices` and :func:`_parts` say of it."""

    prop: Mapping[str, Any]
    options: list[Mapping[str, Any]]
    defs: Mapping[str, Any]
    depth: int

    @property
    def models(self) -> list[Mapping[str, Any]]:
        """The options that are models, in order."""
        return [o for o in self.options if _is_model(o)]

    def union(self, walk: _Walk) -> dict[str, Any]:
        """Its models as a union (:func:`_union`), told apart by the item's discriminator."""
        return _union(self.models, _tag(self.prop, self.defs), self.defs, walk, self.depth)


def _element(item: _Item, walk: _Walk) -> dict[str, Any] | None:
    """What a list's item is, when it is a model (``{"shape": ...}``) or a union of models
    (``{"union": ...}``); None for anything else (checked where the class is)."""
    options, models, depth = item.options, item.models, item.depth
    if any(_is_mapping(o) for o in options):
        # ``list[dict[str, int]]``, ``list[Model | dict[str, int]]``: a mapping, maybe or a
        # model; beside anything else, checked where the class is
        rest = [o for o in options if not _is_model(o) and not _is_mapping(o)]
        found = None if rest else _mapping(options, models, item.defs, walk, depth, depth + 1)
        return found if found is not None else _choices(item, walk)
    if len(models) == 1 and len(options) == 1:
        return {"shape": _fields(models[0], item.defs, walk, depth + 1)}
    if len(models) >= 2 and len(models) == len(options):
        return {"union": item.union(walk)}
    return _either(item, walk)


def _either(item: _Item, walk: _Walk) -> dict[str, Any] | None:
    """What a list's item is when it may be several kinds of thing (``Model | int``,
    ``list[int] | None``, ``Model | list[int]``): ``{"options": [...]}``, one element each for
    its model (``shape``, with the model's ``title``) or its union of models (``union``), its
    list (``list``) and its plain values (``kinds``, with ``values`` for a literal), in that
    order; None for anything else (a mapping, two kinds of list: checked where the class is).
    A key of its own, so an older reader passes such items over rather than refusing, say, a
    null item of ``list[list[int] | None]`` as no list."""
    options, models, defs, depth = item.options, item.models, item.defs, item.depth
    lists = [o for o in options if o.get("type") == "array"]
    plain = [o for o in options if not _is_model(o) and o.get("type") != "array"]
    if len(lists) > 1:
        if models:
            return _choices(item, walk)
        return _lists_item(lists, plain, models, defs, walk, depth)
    if bool(models) + bool(lists) + bool(plain) < 2:
        return None
    # what is not recorded is found before the models are walked: a model beside a mapping
    # (``Big | dict[str, int]``) was walked in full on every walk and thrown away, which cost
    # the worker's loop the model's size each walk and left the rest of the class fewer levels
    found = plain_element(plain) if plain else None
    if plain and found is None:
        return None
    listed = _list_of(lists[0], defs, walk, depth) if lists else None
    if lists and listed is None:
        return None
    walk.take("options")
    return {"options": _parts(item, walk, [listed, found])}


def _parts(item: _Item, walk: _Walk, rest: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The elements of an item's ``options`` or ``choices``: its model (``shape``, titled) or
    its union of models (``union``), then each of ``rest`` that is recorded, in order. The
    models are walked last, once every other part is known to be recorded."""
    out: list[dict[str, Any]] = []
    models = item.models
    if len(models) == 1:
        model = _fields(models[0], item.defs, walk, item.depth + 1)
        model["title"] = str(models[0].get("title") or "")
        walk.take(model["title"])
        out.append({"shape": model})
    elif models:
        out.append({"union": item.union(walk)})
    for part in rest:
        if part is not None:
            if "kinds" in part:
                walk.take(json.dumps(part))
            out.append(part)
    return out


def _choices(item: _Item, walk: _Walk) -> dict[str, Any] | None:
    """What a list's item or a field is when it may be several kinds of thing that ``options``
    and ``maps`` do not say: a model beside two kinds of list (``Model | list[int] |
    list[str]``), a mapping beside two models or a list (``dict[str, int] | A | B``,
    ``dict[str, int] | list[int]``). ``{"choices": [...]}``: one element each for its model
    (``shape``, titled) or union of models (``union``), its list (``list``) or kinds of list
    (``lists``), its mapping (``map``, with ``key``) and its plain values (``kinds``), in that
    order; None where a part is not recorded (checked where the class is). A key of its own,
    never ``options``: an older reader would hold a mapping to the model beside it, or a list
    to its one list, and refuse what the class takes; it passes ``choices`` over."""
    options, models, defs, depth = item.options, item.models, item.defs, item.depth
    lists = [o for o in options if o.get("type") == "array"]
    maps = [o for o in options if o.get("type") == "object" and not _is_model(o)]
    plain = [o for o in options if o.get("type") not in ("array", "object")]
    if len(maps) > 1 or len(lists) > _MOST_OPTIONS or (maps and not _is_mapping(maps[0])):
        return None
    if bool(models) + bool(lists) + bool(maps) + bool(plain) < 2:
        return None
    found = plain_element(plain) if plain else None
    if plain and found is None:
        return None
    listed: dict[str, Any] | None = None
    if len(lists) == 1:
        listed = _list_of(lists[0], defs, walk, depth)
    elif lists:
        either = _alternatives(lists, defs, walk, depth + 1)
        listed = {"lists": either} if either is not None else None
    if lists and listed is None:
        return None
    mapped = _mapping(maps, [], defs, walk, depth, depth + 1) if maps else None
    if maps and mapped is None:
        return None
    walk.take("choices")
    return {"choices": _parts(item, walk, [listed, mapped, found])}


def _alternatives(
    lists: list[Mapping[str, Any]], defs: Mapping[str, Any], walk: _Walk, depth: int
) -> list[dict[str, Any]] | None:
    """What the item of each of several kinds of list is (``list[int] | list[str]``: each a
    list's item as :func:`_list_element` says it), or None when one of them is not recorded."""
    found: list[dict[str, Any]] = []
    for array in lists:
        inner = array.get("items")
        element = _list_element(inner, defs, walk, depth) if isinstance(inner, Mapping) else None
        if element is None:
            return None
        found.append(element)
    walk.take("lists")
    return found


def _lists_item(
    lists: list[Mapping[str, Any]],
    plain: list[Mapping[str, Any]],
    models: list[Mapping[str, Any]],
    defs: Mapping[str, Any],
    walk: _Walk,
    depth: int,
) -> dict[str, Any] | None:
    """A list's item that is one of several kinds of list, maybe a plain value too
    (``list[list[int] | list[str] | None]``): ``{"lists": [...], "plain": {...}}``, keys an
    older reader does not know, so it passes such items over. None beside a model, or past
    :data:`_MOST_OPTIONS` lists (checked where the class is)."""
    if models or len(lists) > _MOST_OPTIONS:
        return None
    found = plain_element(plain) if plain else None
    if plain and found is None:
        return None
    either = _alternatives(lists, defs, walk, depth + 1)
    if either is None:
        return None
    out: dict[str, Any] = {"lists": either}
    if found is not None:
        walk.take(json.dumps(found))
        out["plain"] = found
    return out


def _tag(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    """The discriminator's field name of a discriminated union (``Field(discriminator=...)``),
    which pydantic writes next to its ``oneOf``, itself maybe inside ``Optional``'s ``anyOf``."""
    for option in [prop, *(prop.get("anyOf") or [])]:
        found = _resolved(option, defs).get("discriminator")
        if isinstance(found, Mapping):
            return found.get("propertyName")
    return None


def _fields(
    schema: Mapping[str, Any], defs: Mapping[str, Any], walk: _Walk, depth: int = 0
) -> dict[str, Any]:
    walk.add(len('{"required": [], "fields": {}}'))
    fields: dict[str, list[str]] = {}
    nested: dict[str, Any] = {}
    unions: dict[str, Any] = {}
    items: dict[str, Any] = {}
    values: dict[str, Any] = {}
    alternatives: dict[str, Any] = {}
    maps: dict[str, Any] = {}
    choices: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        walk.take(str(name))
        options = _options(prop, defs)
        kinds = kinds_of(options)
        if kinds is None:
            fields[name] = []  # a constrained or unnamed type: checked where the class is
            continue
        fields[name] = kinds
        walk.add(sum(len(k) + 2 for k in kinds))  # "integer", each
        literal = literal_values(options)
        if literal is not None:  # a Literal: the form offers its values, the server checks them
            walk.take(json.dumps(literal))
            values[name] = literal
        lists = [o for o in options if o.get("type") == "array"]
        if len(lists) == 1 and isinstance(lists[0].get("items"), Mapping):
            # a list of plain values (list[int], list[int | str]) at any depth: its items are
            # typed inputs; of models, unions of models or lists, above the walk's levels
            element = _list_element(lists[0]["items"], defs, walk, depth)
            if element is not None:
                items[name] = element
        elif 1 < len(lists) <= _MOST_OPTIONS:
            # two kinds of list (``list[int] | list[str]``): what each one's item is, under a
            # key of its own, so an older reader checks no item of one against the other's
            either = _alternatives(lists, defs, walk, depth)
            if either is not None:
                alternatives[name] = either
        if depth >= walk.levels:
            walk.cut = walk.cut or any(_is_model(o) or _is_mapping(o) for o in options)
            continue
        models = [o for o in options if _is_model(o)]
        if any(o.get("type") == "object" and not _is_model(o) for o in options):
            # a mapping (``dict[str, int]``), maybe beside a model (``Model | dict[str, int]``):
            # under a key of its own (``maps``), never as a model's ``nested``, which an older
            # reader would hold a mapping to
            mapped = _mapping(options, models, defs, walk, depth, depth)
            if mapped is not None:
                maps[name] = mapped
            elif len(models) > 1:
                # a mapping beside two models (``dict[str, int] | A | B``): under a key of its
                # own, which an older reader passes over
                chosen = _choices(_Item(prop, options, defs, depth), walk)
                if chosen is not None:
                    choices[name] = chosen
            continue
        if len(models) == 1:
            nested[name] = _fields(models[0], defs, walk, depth + 1)
            if any((k in PLAIN_KINDS and k != "null") or k == "array" for k in kinds):
                # a model or a plain value (``Model | int``) or a list (``Model | list[int]``):
                # the form's choice names the model
                nested[name]["title"] = str(models[0].get("title") or name)
                walk.take(nested[name]["title"])
        elif len(models) >= 2:
            unions[name] = _union(models, _tag(prop, defs), defs, walk, depth)
    out: dict[str, Any] = {"required": list(schema.get("required") or []), "fields": fields}
    if schema.get("additionalProperties") is False:
        # ``extra="forbid"``: a key no field names is refused by shape too. A key of its own,
        # so an older reader passes it over and refuses nothing it took before
        walk.take("closed")
        out["closed"] = True
    # keys older readers do not know: they check the levels they know, as before
    for key, found in (
        ("nested", nested),
        ("unions", unions),
        ("items", items),
        ("values", values),
        ("lists", alternatives),
        ("maps", maps),
        ("choices", choices),
    ):
        if found:
            out[key] = found
    return out


def check_shape(recorded: Any, payload: Any, token: str) -> None:
    if not isinstance(recorded, Mapping):
        return
    if not isinstance(payload, dict):
        fields = recorded.get("fields")
        names = ", ".join(str(n) for n in fields) if isinstance(fields, Mapping) else ""
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: expected an object with fields {names}",
            token=token,
        )
    left = _CHECK_LEFT.set([CHECK_VALUES])
    compiling = COMPILE_LEFT.set([PATTERN_SECONDS])
    try:
        problems = _shape_problems(recorded, payload, "", 0)
    finally:
        COMPILE_LEFT.reset(compiling)
        _CHECK_LEFT.reset(left)
    if problems:
        raise InvalidPayloadError(
            f"payload for hook {token!r} refused: {'; '.join(problems)}", token=token
        )


CHECK_VALUES = 200_000
"""The most values one check by a recorded shape looks at. Each level of a union without a tag
checks a value against every branch, so a forged shape of a few KiB (unions of two branches,
eight deep) times a list of 10,000 items was millions of checks, half a minute of the
console's loop; past this the rest of the payload is passed over, and checked where the class
is, as a shape's levels left out are."""

_CHECK_LEFT: ContextVar[list[int] | None] = ContextVar("_CHECK_LEFT", default=None)


def _spend(values: int) -> bool:
    """Whether the check may look at ``values`` more (:data:`CHECK_VALUES`, counted from
    :func:`check_shape`)."""
    left = _CHECK_LEFT.get()
    if left is None:
        return True
    left[0] -= values
    return left[0] >= 0


def _shape_problems(
    recorded: Mapping[str, Any], payload: dict[str, Any], at: str, depth: int
) -> list[str]:
    """What ``payload`` lacks or mistypes against a recorded shape (``at``: the path of the
    nested object, for the messages). A shape read from the log is checked as far as it is
    well-formed: a part that is not is passed over, never a failure of the resume."""
    if not _spend(1 + len(payload) + sum(len(v) for v in payload.values() if isinstance(v, list))):
        return []
    required = recorded.get("required")
    problems = [
        f"{at}{name}: Field required"
        for name in (required if isinstance(required, list) else [])
        if isinstance(name, str) and name not in payload
    ]
    fields = recorded.get("fields")
    for name, kinds in fields.items() if isinstance(fields, Mapping) else ():
        found = kind_problem(kinds, payload[name], f"{at}{name}") if name in payload else None
        problems += [found] if found else []
    problems += plain_problems(recorded, payload, at)
    problems += _extra_problems(recorded, payload, at)
    if depth >= _NESTED_DEPTH:
        return problems
    for key, check in (("nested", _shape_problems), ("unions", _union_problems)):
        for name, inner, value in _described(recorded, key, Mapping, payload, dict):
            problems += check(inner, value, f"{at}{name}.", depth + 1)
    for name, element, values in _described(recorded, "items", Mapping, payload, list):
        for index, value in enumerate(values):
            problems += _element_problems(element, value, f"{at}{name}[{index}]", depth + 1)
    for name, mapped, value in _described(recorded, "maps", Mapping, payload, dict):
        problems += _element_problems(mapped, value, f"{at}{name}", depth)
    for name, element, value in _described(recorded, "choices", Mapping, payload, object):
        if value is not None:
            problems += _element_problems(element, value, f"{at}{name}", depth)
    for name, either, values in _described(recorded, "lists", list, payload, list):
        problems += _lists_problems(either, values, f"{at}{name}", depth)
    return problems


def _described(
    recorded: Mapping[str, Any],
    key: str,
    part: type[Any],
    payload: dict[str, Any],
    given: type[Any],
) -> Iterator[tuple[str, Any, Any]]:
    """Each field that the recorded shape describes under ``key`` (``nested``, ``items``,
    ``choices``, ``maps``, ``lists``) whose description is a ``part`` and whose value in the
    payload is a ``given``: its name, its description and its value. The rest is passed over
    here: a ``key`` that is no mapping or a description of another type (a forged shape), and a
    value of another type or left out (the field's kinds and ``required`` speak of those)."""
    described = recorded.get(key)
    for name, inner in described.items() if isinstance(described, Mapping) else ():
        value = payload.get(name)
        if isinstance(inner, part) and isinstance(value, given):
            yield name, inner, value


def _item_problems(element: Mapping[str, Any], item: Any, at: str, depth: int) -> list[str]:
    """What one item of a list of lists, or one value of a mapping, breaks: a plain value by
    its kinds (and a literal's values), anything else as a list's item."""
    if "kinds" in element:
        found = kind_problem(element.get("kinds"), item, at) or value_problem(
            element.get("values"), item, at
        )
        return [found] if found else []
    return _element_problems(element, item, at, depth + 1)


def _map_problems(
    element: Mapping[str, Any], mapped: Mapping[str, Any], value: Any, at: str, depth: int
) -> list[str]:
    """What a mapping (``{"map": <its values' item>}``) breaks, each value named by its key
    (``stock.apple: expected integer, got str``, as pydantic names it); with ``or``, a model
    the object may be instead, nothing when it fits that model. One look a key, counted."""
    if not isinstance(value, dict):
        return [f"{at}: expected object, got {type(value).__name__}"]
    if depth > _NESTED_DEPTH or not _spend(len(value)):
        return []  # a forged shape, or a payload past the check's budget: passed over
    model = element.get("or")
    shaped = model.get("shape") if isinstance(model, Mapping) else None
    as_model = (
        _shape_problems(shaped, value, f"{at}.", depth + 1) if isinstance(shaped, Mapping) else None
    )
    if as_model == []:
        return []
    problems: list[str] = []
    key_shape = element.get("key")
    for key, item in value.items():
        where = f"{at}.{str(key)[:80]}"
        wrong = key_problem(key_shape, str(key), where) if key_shape is not None else None
        problems += [wrong] if wrong else []
        problems += _item_problems(mapped, item, where, depth)
    return problems if as_model is None or not problems else min(as_model, problems, key=len)


def _lists_problems(either: list[Any], value: list[Any], at: str, depth: int) -> list[str]:
    """What a list that may be one of several kinds of list (``list[int] | list[str]``) breaks:
    nothing when all its items fit one kind's item, else the problems of the kind it fits
    best. More than :data:`_MOST_OPTIONS` kinds, which no writer records, are passed over."""
    kinds = [e for e in either if isinstance(e, Mapping)]
    if not kinds or len(either) > _MOST_OPTIONS:
        return []
    found = [_element_problems({"list": e}, value, at, depth) for e in kinds]
    if any(not problems for problems in found):
        return []
    return min(found, key=len)


_MOST_EXTRA = 10
"""The most unknown keys of one object a refusal names: a payload of 100,000 unknown keys is
refused by the first ten, not by a message of megabytes."""


def _extra_problems(recorded: Mapping[str, Any], payload: dict[str, Any], at: str) -> list[str]:
    """The keys of ``payload`` that no field of a closed shape (``closed``: a model with
    ``extra="forbid"``) names, in pydantic's words; nothing for an open shape or a forged
    ``closed`` that is not ``true`` or whose ``fields`` is no mapping. One look per key (a set
    lookup), already counted by the caller's :func:`_spend`."""
    fields = recorded.get("fields")
    if recorded.get("closed") is not True or not isinstance(fields, Mapping):
        return []
    extra = [key for key in payload if key not in fields]
    said = [f"{at}{key}: Extra inputs are not permitted" for key in extra[:_MOST_EXTRA]]
    if len(extra) > _MOST_EXTRA:
        said.append(f"{at}: {len(extra) - _MOST_EXTRA} more keys not permitted")
    return said


def _element_problems(element: Mapping[str, Any], value: Any, at: str, depth: int) -> list[str]:
    """What one item of a list of models (or of a union of models, or of lists) lacks or
    mistypes. A list's own plain items are checked by :func:`plain_problems`; a list of
    lists' plain items here, as each level's item is a list."""
    listed = element.get("list")
    if isinstance(listed, Mapping):
        if not isinstance(value, list):
            return [f"{at}: expected array, got {type(value).__name__}"]
        if depth > _NESTED_DEPTH or not _spend(len(value)):  # a forged shape: passed over
            # (a writer records a list of lists whose field is on the last level, 15, and
            # this list is its item: one level below, 16, it is still checked)
            return []
        problems: list[str] = []
        for index, item in enumerate(value):
            problems += _item_problems(listed, item, f"{at}[{index}]", depth)
        return problems
    options = element.get("options")
    if isinstance(options, list):
        return _option_problems(options, value, at, depth)
    choices = element.get("choices")
    if isinstance(choices, list):
        return _choice_problems(choices, value, at, depth)
    mapped = element.get("map")
    if isinstance(mapped, Mapping):
        return _map_problems(element, mapped, value, at, depth)
    either = element.get("lists")
    if isinstance(either, list):
        if isinstance(value, list):
            return _lists_problems(either, value, at, depth)
        plain = element.get("plain")
        if isinstance(plain, Mapping) and "kinds" in plain:
            return _option_problems([plain, {"list": {}}], value, at, depth)
        return [f"{at}: expected array, got {type(value).__name__}"]
    inner = element.get("shape")
    union = element.get("union")
    if not isinstance(inner, Mapping) and not isinstance(union, Mapping):
        return []
    if not isinstance(value, dict):
        return [f"{at}: expected object, got {type(value).__name__}"]
    if isinstance(inner, Mapping):
        return _shape_problems(inner, value, f"{at}.", depth)
    assert isinstance(union, Mapping)
    return _union_problems(union, value, f"{at}.", depth)


_MOST_OPTIONS = 3
"""The most elements a list item's ``options`` has as a writer records it (:func:`_either`):
one for its model or union of models, one for its list and one for its plain values."""


def _option_problems(options: list[Any], value: Any, at: str, depth: int) -> list[str]:
    """What one item of a list whose items may be several kinds of thing (``options``) breaks:
    nothing when it fits one option; the problems of the option of its own JSON type (a list
    for ``list``, an object for ``shape`` or ``union``) when that one does not fit; else that
    it is of none of the options' types (``rows[1]: expected array or null, got str``).

    A writer makes at most :data:`_MOST_OPTIONS` (a model or a union of models, a list, the
    plain values): a longer list is forged and passed over, since each item is checked
    against each option and a log's 20,000 options times a payload's 1,000 items were
    minutes of the console's loop that :data:`CHECK_VALUES` did not count."""
    if len(options) > _MOST_OPTIONS:
        return []
    named: list[str] = []
    for option in options:
        if not isinstance(option, Mapping):
            continue
        if "kinds" in option:
            kinds = option.get("kinds")
            if kind_problem(kinds, value, at) is None:
                # of the option's kind: fine, or none of its literal's values
                wrong = value_problem(option.get("values"), value, at)
                return [wrong] if wrong else []
            named += [str(k) for k in kinds] if isinstance(kinds, list) else []
            continue
        if isinstance(option.get("list"), Mapping):
            if isinstance(value, list):
                return _element_problems(option, value, at, depth)
            named.append("array")
        elif isinstance(option.get("shape"), Mapping) or isinstance(option.get("union"), Mapping):
            if isinstance(value, dict):
                return _element_problems(option, value, at, depth)
            named.append("object")
    if not named:
        return []  # a forged option no writer makes: passed over
    kinds = " or ".join(dict.fromkeys(named))
    return [f"{at}: expected {kinds}, got {type(value).__name__}"]


_MOST_CHOICES = 4
"""The most elements ``choices`` has as a writer records it (:func:`_choices`): a model or a
union of models, a list or kinds of list, a mapping, and the plain values."""


def _choice_problems(choices: list[Any], value: Any, at: str, depth: int) -> list[str]:
    """What a value that may be several kinds of thing (``choices``) breaks: nothing when it
    fits one element of its JSON type (an object may fit the model or the mapping, as the class
    takes it), else the problems of the one it fits best, else that it is of none of the types
    (``slots[0]: expected object or array, got int``). A longer list, which no writer makes,
    is passed over."""
    if len(choices) > _MOST_CHOICES:
        return []
    named: list[str] = []
    found: list[list[str]] = []
    for choice in choices:
        if not isinstance(choice, Mapping):
            continue
        if "kinds" in choice:
            kinds = choice.get("kinds")
            if kind_problem(kinds, value, at) is None:
                wrong = value_problem(choice.get("values"), value, at)
                found.append([wrong] if wrong else [])
            else:
                named += [str(k) for k in kinds] if isinstance(kinds, list) else []
            continue
        listed = isinstance(choice.get("list"), Mapping) or isinstance(choice.get("lists"), list)
        shaped = isinstance(choice.get("map"), Mapping) or any(
            isinstance(choice.get(key), Mapping) for key in ("shape", "union")
        )
        if listed or shaped:
            named.append("array" if listed else "object")
            if isinstance(value, list if listed else dict):
                found.append(_element_problems(choice, value, at, depth))
    if found:
        return [] if any(not problems for problems in found) else min(found, key=len)
    if not named:
        return []  # a forged choice no writer makes: passed over
    return [f"{at}: expected {' or '.join(dict.fromkeys(named))}, got {type(value).__name__}"]


def _union_problems(
    union: Mapping[str, Any], payload: dict[str, Any], at: str, depth: int
) -> list[str]:
    """What ``payload`` lacks against the union's branch it names (a discriminated union: by
    its tag's value), or against every branch, when none fits (the closest one's problems)."""
    given = union.get("branches")
    branches = [
        b
        for b in (given if isinstance(given, list) else ())
        if isinstance(b, Mapping) and isinstance(b.get("shape"), Mapping)
    ]
    if not branches:
        return []
    tag = union.get("tag")
    if isinstance(tag, str) and all("value" in b for b in branches):
        named = [b for b in branches if payload.get(tag) in _tag_values(b)]
        if not named:
            values = " or ".join(json.dumps(v) for b in branches for v in _tag_values(b))
            return [f"{at}{tag}: expected {values}, got {json.dumps(payload.get(tag))}"]
        return _shape_problems(named[0]["shape"], payload, at, depth)
    found = [_shape_problems(b["shape"], payload, at, depth) for b in branches]
    if any(not problems for problems in found):
        return []
    return min(found, key=len)


def _tag_values(branch: Mapping[str, Any]) -> list[Any]:
    """The tag values that name a branch: ``values`` where the shape lists several (recorded
    since a tag may allow more than one), else its one ``value``."""
    values = branch.get("values")
    return values if isinstance(values, list) and values else [branch["value"]]


async def created(world: EventReader, hook: HookEntry) -> HookCreated | None:
    """The ``hook_created`` event of the hook holding ``hook.token``."""
    for e in await world.list_events(hook.run_id):
        if e.correlation_id == hook.correlation_id:
            p = projections.payload(e)
            if isinstance(p, HookCreated):
                return p
    return None


async def recorded_type(world: EventReader, hook: HookEntry) -> str | None:
    data = await created(world, hook)
    return data.type if data is not None else None


def find_type(name: str, *, load: bool = True) -> type[Any] | None:
    """The class recorded as ``module:Qualname``, if this process has (or, with ``load``, can
    import) it. Without ``load`` only a module this process has already imported is looked
    in: a console reads logs anyone may have written, and importing the module a log names
    would run that module's code (docs/console.md, "Hooks")."""
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        if not load:
            return None
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not importable here: the workflow validates it on arrival
            return None
    obj: Any = module
    for part in qualname.split("."):
        # what the module and its classes hold, never an attribute made on demand: a module's
        # __getattr__ (PEP 562) or a metaclass's runs code the log's writer chose the name
        # for (pydantic's raises an ImportError for a class it moved away)
        obj = inspect.getattr_static(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) else None


async def check_resume(
    world: EventReader, hook: HookEntry, value: Any, *, import_types: bool = True
) -> None:
    """Refuse, before anything is written, a payload that a typed hook would not accept: in
    full where this process has the class, by its recorded shape everywhere else. Without
    ``import_types`` a class is looked for only in modules already imported (:func:`find_type`)."""
    data = await created(world, hook)
    if data is None or not data.type:
        return
    cls = find_type(data.type, load=import_types)
    if cls is not None:
        validate(cls, value, hook.token)
        return
    plain = encode(value, what=f"payload for hook {hook.token!r}")
    check_shape(data.shape, plain, hook.token)
