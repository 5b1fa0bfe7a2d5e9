"""The role's variables are derived from the one options table, and every variable is
documented in defaults/main.yml and the README."""

from __future__ import annotations

import re

import yaml

from stanpkg.plan.options import OPTIONS
from tests.packaging.fixtures import ROOT, load_script

ROLE = ROOT / "ansible" / "roles" / "stanpkg"
gen = load_script("ansible/gen_role_vars.py")


def test_generated_files_are_current() -> None:
    for path, text in gen.generated_files().items():
        assert path.read_text() == text, f"{path} is stale: run python ansible/gen_role_vars.py"


def test_every_option_has_a_documented_variable() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    readme = (ROLE / "README.md").read_text()
    table = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["stanpkg_option_table"]
    assert [e["var"] for e in table] == [gen.var_name(o) for o in OPTIONS]
    for opt, entry in zip(OPTIONS, table, strict=True):
        var = entry["var"]
        assert var in defaults, var
        assert f"`{var}`" in readme, var
        assert entry["kind"] == opt.kind.value
        if entry["mode"] in ("nats", "streaming"):
            assert entry["key"] in opt.keys  # a key the config compiler accepts
        if entry["mode"] == "flag":
            assert entry["key"] in opt.flags


def test_every_role_variable_is_documented() -> None:
    text = (ROLE / "defaults" / "main.yml").read_text()
    readme = (ROLE / "README.md").read_text()
    variables = re.findall(r"(?m)^(stanpkg_\w+):", text)
    assert len(variables) == len(set(variables))
    lines = text.splitlines()
    for var in variables:
        assert f"`{var}`" in readme or f"`{var}` /" in readme or var in readme, var
        index = next(i for i, line in enumerate(lines) if line.startswith(f"{var}:"))
        # A comment right above (or a shared comment block above a group).
        assert any(lines[j].startswith("#") for j in range(max(0, index - 4), index)), var


def test_channel_limit_names_are_the_per_channel_options() -> None:
    names = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["stanpkg_channel_limit_names"]
    assert names == [o.name for o in OPTIONS if o.per_channel]


def test_role_unit_is_the_packaged_unit() -> None:
    packaged = (ROOT / "packaging" / "files" / "stanpkg.service").read_text()
    template = (ROLE / "templates" / "stanpkg.service.j2").read_text()
    assert template.split("\n", 2)[2] == packaged
