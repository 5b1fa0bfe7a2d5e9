"""The Chocolatey package: nuspec valid against Chocolatey's nuspec schema, PowerShell
scripts that parse (tree-sitter's PowerShell grammar; no pwsh here), and a .nupkg with the
OPC layout choco pack writes and every wheel a Windows install needs, offline."""

from __future__ import annotations

import re
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT, VERSION

CHOCO = ROOT / "windows" / "chocolatey"
XSD = Path(__file__).parent / "data" / "chocolatey-nuspec.xsd"
NS = "http://schemas.microsoft.com/packaging/2015/06/nuspec.xsd"
SCRIPTS = sorted((CHOCO / "tools").glob("*.ps1"))


def _schema() -> object:
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(XSD.read_text().replace("{0}", NS))


def _validate(text: str) -> None:
    schema = _schema()
    schema.validate(text)  # type: ignore[attr-defined]


def test_source_nuspec_matches_the_schema() -> None:
    _validate((CHOCO / "stanpkg.nuspec").read_text().replace("@VERSION@", VERSION))


def test_schema_rejects_a_broken_nuspec() -> None:
    broken = (CHOCO / "stanpkg.nuspec").read_text().replace("<authors>", "<author>")
    broken = broken.replace("</authors>", "</author>").replace("@VERSION@", VERSION)
    with pytest.raises(Exception, match="author"):
        _validate(broken)


def _parse_errors(source: bytes) -> list[tuple[int, int]]:
    tree_sitter = pytest.importorskip("tree_sitter")
    grammar = pytest.importorskip("tree_sitter_powershell")
    parser = tree_sitter.Parser(tree_sitter.Language(grammar.language()))
    errors: list[tuple[int, int]] = []
    stack = [parser.parse(source).root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            errors.append((node.start_point[0] + 1, node.start_point[1] + 1))
        stack.extend(node.children)
    return errors


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_powershell_scripts_parse(script: Path) -> None:
    assert _parse_errors(script.read_bytes()) == []


def test_powershell_check_catches_syntax_errors() -> None:
    assert _parse_errors(b"if ($x {\n  Write-Host 'a'\n$y = @(1, 2\n")


def test_install_script_registers_the_service() -> None:
    text = (CHOCO / "tools" / "chocolateyinstall.ps1").read_text()
    assert "stanpkg_winsvc', 'install'" in text
    assert "'validate', $config" in text  # config checked before the service starts
    assert "--syslog-name" in text and "Start-Service" in text
    assert "--no-index" in text  # offline install from the package's wheels
    uninstall = (CHOCO / "tools" / "chocolateyuninstall.ps1").read_text()
    assert "stanpkg_winsvc remove" in uninstall


def test_install_and_uninstall_find_the_service_by_its_remembered_name() -> None:
    install = (CHOCO / "tools" / "chocolateyinstall.ps1").read_text()
    uninstall = (CHOCO / "tools" / "chocolateyuninstall.ps1").read_text()
    for text in (install, uninstall):
        assert "$stateFile = Join-Path $dataRoot 'service.json'" in text
    # The names come from the tested logic (plan-install), the parameters passed as
    # --name=VALUE so an empty one is not dropped by Windows PowerShell.
    assert "'plan-install', '--state', $stateFile" in install
    for param in ("service-name=$($pp['ServiceName'])", "syslog-name=$($pp['SyslogName'])"):
        assert f'"--{param}"' in install and f'"--{param}"' in uninstall
    assert "$serviceName = $plan.service_name" in install
    assert "$plan.replaces" in install  # a renamed service's old registration goes
    # The uninstall removes what plan-uninstall lists, then forgets the names.
    assert "stanpkg_winsvc plan-uninstall --state $stateFile" in uninstall
    assert "Remove-Item -Force $stateFile" in uninstall
    # No name rule of its own left in the scripts (it lives in stanpkg_winsvc.logic).
    assert "$names +=" not in uninstall and "service_name(" not in install


def test_the_service_is_not_localsystem_and_its_folder_is_locked() -> None:
    """The registration (sc.exe ... obj=) and the icacls calls are in stanpkg_winsvc
    (tested in test_winsvc); the install script runs them through its install command."""
    winservice = (ROOT / "windows/service/stanpkg_winsvc/winservice.py").read_text()
    install_fn = winservice[winservice.index("def install(") : winservice.index("def remove(")]
    assert "logic.sc_create(spec)" in install_fn
    assert "logic.icacls_lockdown(spec)" in install_fn
    assert "logic.state_path(spec.install_root)" in install_fn
    assert install_fn.index("sc_create") < install_fn.index("icacls_lockdown")
    assert "LocalSystem" not in winservice


@pytest.mark.slow
def test_nupkg_layout(nupkg_file: Path) -> None:
    with zipfile.ZipFile(nupkg_file) as zf:
        names = set(zf.namelist())
        nuspec = zf.read("stanpkg.nuspec").decode()
        rels = zf.read("_rels/.rels").decode()
        types = zf.read("[Content_Types].xml").decode()
    _validate(nuspec)
    assert f"<version>{VERSION}</version>" in nuspec
    assert "<files>" not in nuspec  # pack consumes the file list
    for required in (
        "tools/chocolateyinstall.ps1",
        "tools/chocolateyuninstall.ps1",
        "tools/stan.conf",
        "tools/LICENSE.txt",
        "tools/VERIFICATION.txt",
        "tools/stanpkg_winsvc/logic.py",
        "tools/stanpkg_winsvc/winservice.py",
        f"tools/wheels/stanpkg-{VERSION}-py3-none-any.whl",
    ):
        assert required in names, required
    psmdcp = [n for n in names if n.endswith(".psmdcp")]
    assert len(psmdcp) == 1 and f'Target="/{psmdcp[0]}"' in rels
    assert 'Target="/stanpkg.nuspec"' in rels
    parts = names - {"[Content_Types].xml"}  # the part that declares the types
    for ext in {Path(n).suffix.lstrip(".") for n in parts} - {""}:
        assert f'Extension="{ext}"' in types, ext


def _requirements(wheel: zipfile.ZipFile) -> list[str]:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(wheel.read(meta).decode()).get_all("Requires-Dist") or []


@pytest.mark.slow
def test_nupkg_wheels_cover_windows_dependencies(nupkg_file: Path, tmp_path: Path) -> None:
    """Every requirement that applies on Windows/CPython 3.11 has a win_amd64-compatible
    wheel in tools/wheels (pip download --platform cannot check markers for us)."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env = default_environment()
    env.update(sys_platform="win32", platform_system="Windows", os_name="nt", extra="")
    # The extras the install script names: their requirements must be in the package too.
    install = (CHOCO / "tools" / "chocolateyinstall.ps1").read_text()
    (extras,) = re.findall(r"'stanpkg\[([a-z,]+)\]'", install)
    assert "crc" in extras.split(",")  # ISA-L's CRC-32, bundled as in the deb and rpm
    wheels: dict[str, Path] = {}
    with zipfile.ZipFile(nupkg_file) as zf:
        for name in zf.namelist():
            if name.startswith("tools/wheels/") and name.endswith(".whl"):
                tag = name.rsplit("-", 1)[-1]
                assert tag in ("any.whl", "win_amd64.whl"), name
                path = tmp_path / Path(name).name
                path.write_bytes(zf.read(name))
                wheels[canonicalize_name(Path(name).name.split("-")[0])] = path
    assert "pywin32" in wheels and "uvloop" not in wheels
    for path in wheels.values():
        with zipfile.ZipFile(path) as wheel:
            for line in _requirements(wheel):
                req = Requirement(line)
                chosen = ["", *extras.split(",")] if path.name.startswith("stanpkg-") else [""]
                if req.marker is None or any(
                    req.marker.evaluate({**env, "extra": extra}) for extra in chosen
                ):
                    assert canonicalize_name(req.name) in wheels, f"{path.name} needs {req}"
    assert wheels["isal"].name.endswith("-cp311-cp311-win_amd64.whl")


def test_nuspec_version_placeholder_only_in_version() -> None:
    text = (CHOCO / "stanpkg.nuspec").read_text()
    assert re.findall(r"@VERSION@", text) == ["@VERSION@", "@VERSION@"]  # comment + element
