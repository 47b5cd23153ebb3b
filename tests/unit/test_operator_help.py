"""``python -m wayline_operator --help`` names both ways to call it (run, and write the CRDs);
a port out of range is a usage error before anything starts."""

from __future__ import annotations

import pytest

from wayline_operator.__main__ import liveness_url, main


def test_the_help_names_the_crds_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--peering" in out and "python -m wayline_operator crds [DIR]" in out


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--metrics-port", "70000"], ["argument --metrics-port", "0 to 65535", "70000"]),
        (["--metrics-port", "-1"], ["argument --metrics-port", "0 to 65535", "-1"]),
        (["--metrics-port", "x"], ["argument --metrics-port", "not a whole number: 'x'"]),
        (
            ["--liveness", "http://0.0.0.0:99999/healthz"],
            ["argument --liveness", "out of range 0-65535", "99999"],
        ),
        (["--liveness", "http://0.0.0.0:port/healthz"], ["argument --liveness", "'port'"]),
        (["--liveness", "https://0.0.0.0:8080/healthz"], ["argument --liveness", "http://"]),
        (["--peering-lifetime", "0"], ["argument --peering-lifetime", "5 to 2147483647", "0"]),
        (["--peering-lifetime", "4"], ["argument --peering-lifetime", "5 to", "4"]),
        (["--peering-lifetime", "1.5"], ["argument --peering-lifetime", "'1.5'"]),
        (["--priority", str(2**40)], ["argument --priority", "2147483647", str(2**40)]),
        (["--priority", "high"], ["argument --priority", "'high'"]),
        (["--instance", "ns/release"], ["argument --instance", "not a label value"]),
    ],
    ids=[
        "metrics-70000",
        "metrics-negative",
        "metrics-word",
        "liveness-99999",
        "liveness-word",
        "liveness-https",
        "lifetime-0",
        "lifetime-4",
        "lifetime-fraction",
        "priority-huge",
        "priority-word",
        "instance-slash",
    ],
)
def test_a_bad_port_is_one_usage_error_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]
) -> None:
    """As the worker's ``--metrics-port``: exit 2 with one ``error:`` line naming the option,
    before kopf or the metrics server start (70000 was an OverflowError from bind)."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err


def test_a_good_liveness_url_is_kept_as_given() -> None:
    for url in ("http://0.0.0.0:8080/healthz", "http://[::1]:0/h", "http://host/healthz"):
        assert liveness_url(url) == url


def test_an_ipv6_pod_ip_without_brackets_is_given_them() -> None:
    """The chart passes ``--liveness=http://$(POD_IP):PORT/healthz``: on an IPv6 cluster the
    pod IP comes without brackets, which was refused (the operator pod crash-looped; kopf
    could not read such a URL either). Its last group is read as the port."""
    assert liveness_url("http://fd00:10:244::5:8080/healthz") == (
        "http://[fd00:10:244::5]:8080/healthz"
    )
    assert liveness_url("http://fe80::1/healthz") == "http://[fe80::1]/healthz"
    with pytest.raises(SystemExit) as done:  # still a usage error past 65535
        main(["--liveness", "http://fd00::5:99999/healthz"])
    assert done.value.code == 2


def test_peering_numbers_are_checked_in_the_environment_too() -> None:
    """``WAYLINE_OPERATOR_PEERING_LIFETIME=0.5`` was taken as 0 (every replica presumed dead
    at once, so all of them worked); ``inf`` was an OverflowError."""
    from wayline.errors import ConfigurationError
    from wayline.settings import Settings

    for name, raw in (
        ("WAYLINE_OPERATOR_PEERING_LIFETIME", "0.5"),
        ("WAYLINE_OPERATOR_PEERING_LIFETIME", "0"),
        ("WAYLINE_OPERATOR_PEERING_LIFETIME", "inf"),
        ("WAYLINE_OPERATOR_PRIORITY", "1e30"),
        ("WAYLINE_OPERATOR_PRIORITY", "x"),
        ("WAYLINE_OPERATOR_PRIORITY", "nan"),
        ("WAYLINE_OPERATOR_PEERING_LIFETIME", "4"),
    ):
        with pytest.raises(ConfigurationError) as err:
            Settings.from_env({name: raw})
        assert name in str(err.value) and raw in str(err.value)
    good = Settings.from_env(
        {"WAYLINE_OPERATOR_PEERING_LIFETIME": "15", "WAYLINE_OPERATOR_PRIORITY": "-3"}
    )
    assert (good.operator_peering_lifetime, good.operator_priority) == (15, -3)
    # a whole number written as a float was read before, and still is
    floats = Settings.from_env(
        {"WAYLINE_OPERATOR_PEERING_LIFETIME": "60.0", "WAYLINE_OPERATOR_PRIORITY": "100.0"}
    )
    assert (floats.operator_peering_lifetime, floats.operator_priority) == (60, 100)
    assert Settings.from_env({}).operator_priority is None


def test_the_command_line_takes_what_the_environment_takes() -> None:
    """``--peering-lifetime 60.0`` was refused while ``WAYLINE_OPERATOR_PEERING_LIFETIME=60.0``
    was read as 60; ``WAYLINE_OPERATOR_PRIORITY=0`` meant "draw one" while ``--priority 0``
    was 0. Now both edges read a number the same way."""
    import argparse

    from wayline.cli.loading import range_arg
    from wayline.settings import PEERING_LIFETIME_RANGE, PRIORITY_RANGE, Settings

    lifetime, priority = range_arg(*PEERING_LIFETIME_RANGE), range_arg(*PRIORITY_RANGE)
    assert lifetime("60.0") == 60 and lifetime("60") == 60 and priority("-3.0") == -3
    for bad in ("1.5", "inf", "nan", "4.0", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            lifetime(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        priority(str(float(2**40)))
    for raw, expected in (("0", 0), ("0.0", 0), ("7", 7), ("", None), (" ", None)):
        settings = Settings.from_env({"WAYLINE_OPERATOR_PRIORITY": raw})
        assert settings.operator_priority == expected, raw


def test_crds_writes_into_a_folder_it_makes(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """``crds DIR`` with a DIR that does not exist yet makes it (it was a FileNotFoundError
    traceback); a DIR that is a file is one ``error:`` line, exit 2."""
    from pathlib import Path

    folder = Path(str(tmp_path)) / "out" / "crds"
    assert main(["crds", str(folder)]) == 0
    written = sorted(p.name for p in folder.iterdir())
    assert "workflowruns.wayline.dev.json" in written, written
    assert sorted(capsys.readouterr().out.splitlines()) == [str(folder / n) for n in written]
    taken = Path(str(tmp_path)) / "a-file"
    taken.write_text("x")
    assert main(["crds", str(taken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "a-file" in err[0], err


def test_no_cluster_credentials_is_one_error_line_before_kopf_starts(
    tmp_path: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run where there is no cluster (a laptop without a kubeconfig): one ``error:`` line and
    exit 2, not kopf's page of LoginError tracebacks."""
    import kopf

    def not_started(*args: object, **kwargs: object) -> None:
        raise AssertionError("kopf started")

    monkeypatch.setattr(kopf, "operator", not_started)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/no-such-kubeconfig")
    assert main(["--namespace", "default"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no Kubernetes API server"), err
    assert "kubeconfig" in err[0], err
