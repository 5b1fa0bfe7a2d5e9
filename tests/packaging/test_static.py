"""Static checks of the packaging sources: shell scripts shellcheck-clean and strict, the
unit's required settings, maintainer scripts, logrotate and the default configs valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT, need_tools

SHELL_SCRIPTS = [
    ROOT / "packaging" / "lib.sh",
    ROOT / "packaging" / "install-tools.sh",
    ROOT / "packaging" / "build-python.sh",
    ROOT / "packaging" / "deb" / "build.sh",
    ROOT / "packaging" / "rpm" / "build.sh",
    ROOT / "packaging" / "oci" / "build.sh",
    ROOT / "packaging" / "debian-mirror.sh",
    ROOT / "packaging" / "build-in-debian.sh",
]
# POSIX sh, installed by the deb and rpm (/usr/lib/stanpkg): make-venv runs in postinst.
INSTALLED_SCRIPTS = [
    ROOT / "packaging" / "make-venv.sh",
    ROOT / "packaging" / "files" / "archive-slice",
]
DEBIAN = ROOT / "packaging" / "deb" / "debian"
MAINTAINER_SCRIPTS = sorted([*DEBIAN.glob("stanpkg.p*"), DEBIAN / "stanpkg.config"])
UNIT = (ROOT / "packaging" / "files" / "stanpkg.service").read_text()


@pytest.mark.parametrize(
    "script", SHELL_SCRIPTS + INSTALLED_SCRIPTS + MAINTAINER_SCRIPTS, ids=lambda p: p.name
)
def test_shellcheck(script: Path) -> None:
    need_tools("shellcheck")
    proc = subprocess.run(
        ["shellcheck", "-x", "-P", str(ROOT), str(script)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("script", SHELL_SCRIPTS[1:], ids=lambda p: p.name)
def test_bash_scripts_are_strict(script: Path) -> None:
    assert "set -euo pipefail" in script.read_text()


@pytest.mark.parametrize(
    "setting",
    [
        "ExecStartPre=/usr/bin/stanpkg validate -sc /etc/stanpkg/stan.conf $STANPKG_OPTS",
        "ExecStart=/usr/bin/stanpkg run -sc /etc/stanpkg/stan.conf $STANPKG_OPTS",
        "ExecReload=/bin/kill -USR1 $MAINPID",
        "KillSignal=SIGTERM",
        "Restart=on-failure",
        "User=stanpkg",
        "StateDirectory=stanpkg",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "CapabilityBoundingSet=",
        "SystemCallFilter=@system-service",
        "EnvironmentFile=-/etc/stanpkg/stanpkg.env",
    ],
)
def test_unit_settings(setting: str) -> None:
    assert setting in UNIT.splitlines()


def test_unit_verifies() -> None:
    need_tools("systemd-analyze")
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(ROOT / "packaging/files/stanpkg.service")],
        capture_output=True,
        text=True,
    )
    # Only complaints about the command not being installed on this machine are expected.
    problems = [
        line
        for line in proc.stderr.splitlines()
        if line.strip() and "/usr/bin/stanpkg" not in line and "Command" not in line
    ]
    assert not problems, proc.stderr


@pytest.mark.parametrize(
    "conf",
    ["packaging/files/stan.conf", "windows/chocolatey/tools/stan.conf"],
)
def test_shipped_configs_validate(conf: str) -> None:
    stanpkg = Path(sys.executable).parent / "stanpkg"
    proc = subprocess.run(
        [str(stanpkg), "validate", "--strict", str(ROOT / conf)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_logrotate_config_parses(tmp_path: Path) -> None:
    need_tools("logrotate")
    # This machine has no stanpkg account (the deb test rotates for real in a container).
    text = (ROOT / "packaging/files/stanpkg.logrotate").read_text()
    conf = tmp_path / "stanpkg"
    conf.write_text(text.replace("stanpkg stanpkg", "root root"))
    proc = subprocess.run(
        ["logrotate", "--debug", "--state", str(tmp_path / "state"), str(conf)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "error:" not in proc.stderr, proc.stderr


def _homebrew_conf(tmp_path: Path) -> Path:
    """The config the formula writes (a heredoc in Ruby), with Homebrew's paths filled in."""
    formula = (ROOT / "packaging/homebrew/stanpkg.rb").read_text()
    body = formula.split('(buildpath/"stan.conf").write <<~EOS\n', 1)[1].split("EOS\n", 1)[0]
    text = body.replace("#{etc}", str(tmp_path)).replace("#{var}", str(tmp_path))
    conf = tmp_path / "stan.conf"
    conf.write_text("\n".join(line.strip() for line in text.splitlines()) + "\n")
    return conf


@pytest.mark.parametrize("conf", ["deb-rpm", "chocolatey", "homebrew"])
def test_packaged_monitoring_listens_on_loopback_only(conf: str, tmp_path: Path) -> None:
    """Monitoring answers without authentication: a package must not open it to the
    network (the Go server has it off unless asked)."""
    from stanpkg.monitor.service import monitor_config
    from stanpkg.plan.compile import compile_args

    path = {
        "deb-rpm": ROOT / "packaging/files/stan.conf",
        "chocolatey": ROOT / "windows/chocolatey/tools/stan.conf",
    }.get(conf) or _homebrew_conf(tmp_path)
    plan = compile_args(["-c", str(path)], env={}).plan
    assert plan is not None
    monitoring = monitor_config(plan)
    assert monitoring is not None and monitoring.host == "127.0.0.1", monitoring
    assert "loopback" in path.read_text()  # the comment says why


def test_deb_purge_asks_before_deleting_data() -> None:
    templates = (DEBIAN / "stanpkg.templates").read_text()
    assert "Template: stanpkg/purge_data\nType: boolean\nDefault: false\n" in templates
    postrm = (DEBIAN / "stanpkg.postrm").read_text()
    # The store is deleted only on the debconf answer, never unconditionally.
    deletion = postrm.index("rm -rf /var/lib/stanpkg")
    assert postrm.rfind('if [ "$RET" = true ]; then', 0, deletion) != -1
    assert postrm.count("rm -rf /var/lib/stanpkg") == 1


def test_rpm_never_deletes_data() -> None:
    spec = (ROOT / "packaging/rpm/stanpkg.spec").read_text()
    scriptlets = spec.split("%files", 1)[0]
    assert "rm -rf /var/lib/stanpkg" not in scriptlets and "rm -fr" not in scriptlets


PROJECT_URL = "https://github.com/stanpkg/stanpkg"


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("packaging/deb/debian/control", f"Homepage: {PROJECT_URL}"),
        ("packaging/rpm/stanpkg.spec", f"URL:            {PROJECT_URL}"),
        ("packaging/homebrew/stanpkg.rb", f'  homepage "{PROJECT_URL}"'),
        ("windows/chocolatey/stanpkg.nuspec", f"    <projectUrl>{PROJECT_URL}</projectUrl>"),
        (
            "windows/chocolatey/stanpkg.nuspec",
            f"    <packageSourceUrl>{PROJECT_URL}/tree/main/windows/chocolatey</packageSourceUrl>",
        ),
        ("pyproject.toml", f'Homepage = "{PROJECT_URL}"'),
    ],
)
def test_metadata_names_the_project(path: str, line: str) -> None:
    text = (ROOT / path).read_text()
    assert line in text.splitlines()
    # No placeholder site left (the maintainers' mail address is not a URL).
    assert "https://example.org" not in text and "http://example.org" not in text


def test_debian_source_format_matches_the_version() -> None:
    """A Debian revision (-1) means a non-native package: "3.0 (native)" refuses it."""
    version = (DEBIAN / "changelog.in").read_text().split("(", 1)[1].split(")", 1)[0]
    source_format = (DEBIAN / "source" / "format").read_text().strip()
    assert source_format == ("3.0 (quilt)" if "-" in version else "3.0 (native)"), version


def test_debian_depends_on_shlibs_and_any_supported_python() -> None:
    control = (DEBIAN / "control").read_text()
    depends = control.split("\nDepends:", 1)[1].split("\nRecommends:", 1)[0]
    assert "${shlibs:Depends}" in depends and "${misc:Depends}" in depends
    versions = (ROOT / "packaging/build-python.sh").read_text().split('LINUX_PYTHONS="')[1]
    for version in versions.split('"')[0].split():
        assert f"python{version}" in depends, version  # a wheel set for each, and only those


def test_rpm_account_comes_from_sysusers() -> None:
    spec = (ROOT / "packaging/rpm/stanpkg.spec").read_text()
    sysusers = (ROOT / "packaging/files/stanpkg.sysusers").read_text()
    assert 'u stanpkg - "NATS Streaming server" /var/lib/stanpkg /sbin/nologin' in sysusers
    assert "%sysusers_create_compat %{SOURCE11}" in spec
    assert "Source11:       stanpkg.sysusers" in spec
    assert "%{_sysusersdir}/stanpkg.conf" in spec.split("%files", 1)[1]


def test_service_runs_as_its_own_account_owning_its_data() -> None:
    """Both packages: the unit's user and group, and the data and log directories that
    account owns, closed to others (the deb's postinst, the rpm's %files)."""
    assert {"User=stanpkg", "Group=stanpkg"} <= set(UNIT.splitlines())
    postinst = (ROOT / "packaging/deb/debian/stanpkg.postinst").read_text()
    assert "adduser --system --group" in postinst
    assert "for dir in /var/lib/stanpkg /var/log/stanpkg; do" in postinst
    assert 'chown stanpkg:stanpkg "$dir"' in postinst and 'chmod 0750 "$dir"' in postinst
    spec = (ROOT / "packaging/rpm/stanpkg.spec").read_text().split("%files", 1)[1]
    for directory in ("/var/lib/stanpkg", "/var/log/stanpkg"):
        assert f"%dir %attr(0750,stanpkg,stanpkg) {directory}" in spec
