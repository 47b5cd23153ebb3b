"""The checks every world applies to what it reads back (pure logic, no store)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wayline._core.events import Event, EventType
from wayline.errors import CorruptLogError
from wayline.world import entries
from wayline.worlds.nats.failures import hopeless
from wayline.worlds.nats.options import ConnectOptions


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=50))
def test_loads_fails_only_with_unreadable(raw: bytes | str) -> None:
    try:
        entries.loads(raw)
    except entries.Unreadable:
        pass


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\xff", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b"9" * 5000, "digits"),
        (b"{", "not JSON"),
    ],
)
def test_loads_names_why(raw: bytes, why: str) -> None:
    with pytest.raises(entries.Unreadable, match=why):
        entries.loads(raw)


def test_event_checks_type_cid_and_data() -> None:
    assert entries.event("r", 1, "run_started", None, None, 0.0).data == {}
    for type_, cid, data in (("nope", None, {}), ("run_started", 3, {}), ("run_started", None, [])):
        with pytest.raises(entries.Unreadable):
            entries.event("r", 1, type_, cid, data, 0.0)


def test_check_log_refuses_what_no_append_could_write() -> None:
    ok = [Event("r", 1, EventType.RUN_CREATED, None, {"workflow": "w"}, 0.0)]
    entries.check_log("r", ok, store="t")
    bad = [*ok, Event("r", 2, EventType.STEP_COMPLETED, "s1", {}, 0.0)]
    with pytest.raises(CorruptLogError) as info:
        entries.check_log("r", bad, store="t")
    assert info.value.seq == 2 and info.value.code == "CORRUPT_LOG"


def test_hopeless_names_the_tls_causes_and_leaves_outages_to_retries() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    assert "certificate verify failed" in str(hopeless([verify]))
    assert "requires TLS" in str(hopeless([verify], asked_tls=False))
    mismatch = ssl.SSLCertVerificationError(1, "x")
    mismatch.verify_message = "Hostname mismatch, certificate is not valid for 'h'."
    assert "hostname mismatch" in str(hopeless([mismatch]))
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = verify
    assert hopeless([wrapped]) is not None
    assert hopeless([ConnectionRefusedError(111, "refused"), TimeoutError()]) is None


@pytest.mark.parametrize("option", ["tls_ca", "tls_cert"])
def test_a_tls_file_that_cannot_be_read_is_named_and_not_retried(
    option: str, tmp_path: Path
) -> None:
    missing = str(tmp_path / "missing.pem")
    opts = ConnectOptions(servers=["tls://127.0.0.1:4222"], **{option: missing})
    with pytest.raises(OSError) as info:
        opts.ssl_context()
    assert hopeless([info.value]) == f"cannot read {missing} (No such file or directory)"


@pytest.mark.parametrize("option", ["tls_ca", "tls_cert"])
def test_a_tls_file_that_holds_no_certificate_is_named(option: str, tmp_path: Path) -> None:
    """It read as "TLS handshake failed (NO_CERTIFICATE_OR_CRL_FOUND)": no file named, and no
    handshake had taken place."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    opts = ConnectOptions(servers=["tls://127.0.0.1:4222"], **{option: str(garbage)})
    with pytest.raises(OSError) as info:
        opts.ssl_context()
    cause = hopeless([info.value])
    assert cause is not None and cause.startswith(f"cannot read {garbage} (no certificate"), cause
    assert "handshake" not in cause
