"""JSON on the hot path: the standard library's ``json``, or compiled codecs where installed.

Every event a run appends is encoded once and decoded by every reader of the log, so these
two functions are on the path of every step. With ``pip install 'wayline[fast]'`` orjson
encodes and msgspec decodes; without them the standard library's C accelerator does both,
more slowly. The bytes mean the same either way, and each codec reads what the other wrote.

What the standard library does is the definition, and the compiled codecs defer to it
wherever the two would differ, so a value gives the same JSON value (and an unencodable one
the same error) whichever is installed:

- ``dumps`` (orjson): orjson refuses integers past 64 bits, keys that are not strings,
  subclasses of ``str``, ``int``, ``dict`` and ``list`` (``OPT_PASSTHROUGH_SUBCLASS`` hands
  them to ``default``, which refuses them), dataclasses and datetimes (the same) and nesting
  past 254 levels; each of those is encoded by ``json`` instead. So is output with any byte
  past ASCII (``json`` escapes every character past ASCII, ``ensure_ascii``, and the size
  limits count those bytes), and output holding a ``null`` where the value holds a NaN or
  an infinity: orjson writes those as ``null``, where ``json`` writes ``NaN`` and
  ``Infinity``. What is left differs from ``json``'s bytes only in how a small float is
  spelt (``0.00001`` for ``1e-05``), the same number to every reader. The nulls are
  checked without reading the output back: msgspec packs the value as MessagePack, where a
  NaN or an infinity keeps its float bytes, so this half needs msgspec as well as orjson.
  orjson also writes a ``uuid.UUID`` and an ``Enum`` that ``json`` refuses; no payload
  reaches this codec unchecked (``serde.encode`` has the standard library check every value
  a user hands over), so that never shows.
- ``loads`` (msgspec): msgspec refuses ``NaN`` and the infinities, numbers past a float's
  range, lone surrogates, a byte-order mark and UTF-16 or UTF-32; those are decoded by
  ``json`` instead, which gives what it always gave, its errors included. msgspec, unlike
  orjson, decodes an integer past 64 bits as that integer (orjson makes it a float).

``WAYLINE_CODEC=json`` keeps the standard library with the compiled codecs installed,
``WAYLINE_CODEC=fast`` insists on them (an error where one is missing). ``wayline.settings``
reads it when it is imported, as ``import wayline`` does before anything is encoded, and
hands it to :func:`use`; callers look ``dumps`` and ``loads`` up on this module at each call,
so the choice reaches them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_compact_encoder = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))`` builds this encoder anew on every call."""


def std_dumps(value: Any) -> bytes:
    """The standard library's compact JSON of ``value``, as bytes."""
    return _compact_encoder.encode(value).encode()


def std_dumps_text(value: Any) -> str:
    """The standard library's compact JSON of ``value``, as text."""
    return _compact_encoder.encode(value)


std_loads: Callable[[bytes | str], Any] = json.loads


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")
"""A MessagePack float64 (``0xcb`` and eight big-endian bytes) whose exponent bits are all
ones: a NaN or an infinity. ASCII text cannot hold ``0xcb`` or ``0xff``, so only the bytes of
another number can match by chance, and such a match only sends the value to ``json``."""


def _fast_dumps() -> Callable[[Any], bytes]:
    import msgspec
    import orjson

    encode = orjson.dumps
    pack = msgspec.msgpack.encode
    non_finite = _NON_FINITE.search
    options = (
        orjson.OPT_PASSTHROUGH_SUBCLASS
        | orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
    )

    def dumps(value: Any) -> bytes:
        try:
            data = encode(value, default=_refuse, option=options)
        except TypeError:  # orjson.JSONEncodeError is one: json encodes it, or refuses it
            return std_dumps(value)
        if not data.isascii():  # json escapes every character past ASCII (ensure_ascii)
            return std_dumps(value)
        if b"null" in data:
            # The null may stand for a NaN or an infinity. Most nulls are None (a run
            # summary's ``"error": null``), so the check must be cheap: msgspec writes the
            # value as MessagePack, which keeps every float as eight bytes, in C, and a search
            # for a non-finite one costs about half of reading the JSON back with orjson and
            # comparing (bench/codec_nulls.py), and a fraction of encoding with json.
            try:
                packed = pack(value)
            except (TypeError, ValueError, OverflowError):  # a type orjson takes, msgspec not
                return std_dumps(value)
            if non_finite(packed) is not None:
                return std_dumps(value)
        return data

    return dumps


def _fast_loads() -> Callable[[bytes | str], Any]:
    import msgspec

    decode = msgspec.json.decode
    decode_error = msgspec.DecodeError

    def loads(raw: bytes | str) -> Any:
        try:
            return decode(raw)
        except decode_error:  # json decodes it, or raises what it always raised
            return std_loads(raw)

    return loads


def _choose(name: str) -> tuple[str, Callable[[Any], bytes], Callable[[bytes | str], Any]]:
    """The codec ``WAYLINE_CODEC`` names: ``json``, ``fast`` (both halves, or an error), or
    ``auto`` (the default: each half compiled where its package is installed)."""
    if name not in ("", "auto", "json", "fast"):
        raise ValueError(f"WAYLINE_CODEC={name!r}: expected auto, json or fast")
    dumps: Callable[[Any], bytes] = std_dumps
    loads: Callable[[bytes | str], Any] = std_loads
    names: list[str] = []
    if name != "json":
        try:
            dumps = _fast_dumps()
            names.append("orjson")
        except ImportError:
            pass
        try:
            loads = _fast_loads()
            names.append("msgspec")
        except ImportError:
            pass
    if name == "fast" and len(names) < 2:
        raise ImportError(
            "WAYLINE_CODEC=fast, but orjson or msgspec is not installed: "
            "pip install 'wayline[fast]', or unset WAYLINE_CODEC"
        )
    return "+".join(names) or "json", dumps, loads


NAME, dumps, loads = _choose("auto")
"""The codec in use (``"orjson+msgspec"``, ``"json"``, or one compiled half), and its
compact ``dumps`` (to bytes) and ``loads`` (of bytes or text)."""


def use(name: str) -> None:
    """Make the codec ``name`` (``auto``, ``json`` or ``fast``) this process's: ValueError for
    another name, ImportError for ``fast`` where it is not installed."""
    global NAME, dumps, loads
    NAME, dumps, loads = _choose(name)


def dumps_text(value: Any) -> str:
    """``dumps`` as text, for a TEXT column."""
    return dumps(value).decode()


def codec(name: str) -> tuple[Callable[[Any], bytes], Callable[[bytes | str], Any]]:
    """The ``dumps`` and ``loads`` of ``json`` or ``fast``, for tests and benchmarks that
    compare them in one process (ImportError: ``fast`` is not installed)."""
    _, dumps_, loads_ = _choose(name)
    return dumps_, loads_
