"""dist/stanpkg.VERSION.nupkg, the Chocolatey package, built on Linux (no choco/nuget here).

A .nupkg is an OPC zip: the nuspec at the top, [Content_Types].xml, _rels/.rels pointing at
the nuspec and the core-properties part, and the content (tools/). This writes the same
layout ``choco pack`` writes. tools/wheels holds every wheel for CPython 3.11 on win_amd64
(the same versions as the Linux wheelhouse, plus pywin32), so installing needs no index.

Run after packaging/build-python.sh (``make nupkg`` does).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = ROOT / "build" / "packaging"
SERVICE_PKG = ROOT / "windows" / "service" / "stanpkg_winsvc"
# Wheels that do not apply on Windows (environment markers pip cannot evaluate for another
# platform: `pip download --platform` uses this machine's markers).
NOT_ON_WINDOWS = {"uvloop"}
WINDOWS_ONLY = ("pywin32",)
# The `crc` extra (ISA-L's CRC-32 for the FILE store) is bundled like the deb's: pinned from
# the Linux wheelhouse, since the shared wheelhouse leaves it out for the Homebrew formula
# (which would have to build ISA-L from source).
PINNED_FROM_LINUX = ("isal",)
ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: the same input gives the same package

CONTENT_TYPES = """<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
  <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml" />
  <Default Extension="nuspec" ContentType="application/octet" />
  <Default Extension="psmdcp" ContentType="application/vnd.openxmlformats-package.core-properties+xml" />
{defaults}</Types>
"""  # noqa: E501
RELS = """<?xml version="1.0" encoding="utf-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/{nuspec}" Id="R{id1}" />
  <Relationship Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="/{psmdcp}" Id="R{id2}" />
</Relationships>
"""  # noqa: E501
CORE = """<?xml version="1.0" encoding="utf-8"?>
<coreProperties xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.openxmlformats.org/package/2006/metadata/core-properties">
  <dc:creator>{authors}</dc:creator>
  <dc:description>{description}</dc:description>
  <dc:identifier>{id}</dc:identifier>
  <version>{version}</version>
  <keywords>{tags}</keywords>
  <lastModifiedBy>stanpkg build_nupkg.py</lastModifiedBy>
</coreProperties>
"""  # noqa: E501


def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def nuspec_text(version: str) -> str:
    return (HERE / "stanpkg.nuspec").read_text().replace("@VERSION@", version)


def packed_nuspec(text: str) -> str:
    """The nuspec as it sits in a package: metadata only (pack consumes <files>)."""
    return re.sub(r"\s*<files>.*?</files>", "", text, flags=re.S)


def metadata(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S)
    return found.group(1).strip() if found else ""


WINDOWS_ENV = {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"}


def _download(specs: list[str], dest: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--platform=win_amd64",
            "--python-version=3.11",
            "--implementation=cp",
            f"--dest={dest}",
            *specs,
        ],
        check=True,
    )


def _missing_windows_requirements(wheels: Path) -> list[str]:
    """Requirements of the downloaded wheels that apply on Windows only (markers pip
    evaluated for Linux) and have no wheel yet."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env = {**default_environment(), **WINDOWS_ENV, "extra": ""}
    have = {canonicalize_name(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    missing: set[str] = set()
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            text = zf.read(meta).decode()
        for line in text.splitlines():
            if line.startswith("Requires-Dist:"):
                req = Requirement(line.split(":", 1)[1].strip())
                applies = req.marker is None or req.marker.evaluate(env)
                if applies and canonicalize_name(req.name) not in have:
                    missing.add(f"{req.name}{req.specifier}")
    return sorted(missing)


def windows_wheels(version: str) -> Path:
    """tools/wheels: the Linux wheelhouse's pins as win_amd64/cp311 wheels, plus what only
    Windows needs (pywin32, and requirements behind win32 markers), to a fixed point."""
    linux = BUILD / "wheelhouse"
    out = BUILD / "wheelhouse-win"
    pins = []
    for wheel in sorted(linux.glob("*.whl")):
        name, ver = wheel.name.split("-")[:2]
        if name.replace("_", "-").lower() not in NOT_ON_WINDOWS | {"stanpkg"}:
            pins.append(f"{name}=={ver}")
    for name in PINNED_FROM_LINUX:
        found = sorted((BUILD / "wheelhouse-linux").glob(f"{name}-*.whl"))
        if not found:
            raise SystemExit(
                f"no {name} wheel in {BUILD / 'wheelhouse-linux'}: run build-python.sh"
            )
        pins.append(f"{name}=={found[0].name.split('-')[1]}")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    _download([*pins, *WINDOWS_ONLY], out)
    wheel = ROOT / "dist" / f"stanpkg-{version}-py3-none-any.whl"
    (out / wheel.name).write_bytes(wheel.read_bytes())
    for _ in range(5):
        missing = _missing_windows_requirements(out)
        if not missing:
            return out
        _download(missing, out)
    raise SystemExit(f"unresolved Windows requirements: {missing}")


def write_entry(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def build(version: str, wheels: Path, dest: Path) -> Path:
    nuspec = nuspec_text(version)
    pkg_id = metadata(nuspec, "id")
    digest = hashlib.sha256(nuspec.encode()).hexdigest()[:32]
    psmdcp = f"package/services/metadata/core-properties/{digest}.psmdcp"
    files: dict[str, bytes] = {}
    for path in sorted((HERE / "tools").rglob("*")):
        if path.is_file():
            files[f"tools/{path.relative_to(HERE / 'tools').as_posix()}"] = path.read_bytes()
    for path in sorted(SERVICE_PKG.glob("*.py")):
        files[f"tools/stanpkg_winsvc/{path.name}"] = path.read_bytes()
    for path in sorted(wheels.glob("*.whl")):
        files[f"tools/wheels/{path.name}"] = path.read_bytes()
    files["tools/LICENSE.txt"] = Path("/usr/share/common-licenses/Apache-2.0").read_bytes()
    extensions = sorted({Path(n).suffix.lstrip(".") for n in files} - {""})
    defaults = "".join(
        f'  <Default Extension="{ext}" ContentType="application/octet" />\n' for ext in extensions
    )
    out = dest / f"{pkg_id}.{version}.nupkg"
    with zipfile.ZipFile(out, "w") as zf:
        write_entry(
            zf,
            "_rels/.rels",
            RELS.format(
                nuspec=f"{pkg_id}.nuspec", psmdcp=psmdcp, id1=digest[:16], id2=digest[16:]
            ).encode(),
        )
        write_entry(zf, f"{pkg_id}.nuspec", packed_nuspec(nuspec).encode())
        for name, data in files.items():
            write_entry(zf, name, data)
        core = CORE.format(
            authors=metadata(nuspec, "authors"),
            description=escape(metadata(nuspec, "summary")),
            id=pkg_id,
            version=version,
            tags=metadata(nuspec, "tags"),
        )
        write_entry(zf, psmdcp, core.encode())
        write_entry(zf, "[Content_Types].xml", CONTENT_TYPES.format(defaults=defaults).encode())
    return out


def main() -> int:
    version = project_version()
    dist = ROOT / "dist"
    for old in dist.glob("stanpkg.*.nupkg"):
        old.unlink()
    print(build(version, windows_wheels(version), dist))
    return 0


if __name__ == "__main__":
    sys.exit(main())
