"""docs/configuration.md states stanpkg's behaviour where the reference's help text does not."""

from __future__ import annotations

import re

from stanpkg.plan.docs import SQL_SOURCES, configuration_markdown
from stanpkg.plan.encryption import default_cipher_name
from stanpkg.plan.options import BY_PATH
from stanpkg.plan.sql_source import parse_mysql_dsn
from stanpkg.plan.usage import usage_text


def _row(name: str) -> list[str]:
    line = next(x for x in configuration_markdown().splitlines() if x.startswith(f"| `{name}` |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_cipher_default_is_the_rule_of_plan_encryption() -> None:
    opt = BY_PATH["encryption_cipher"]
    row = _row("encryption_cipher")
    assert row[4] == opt.default_doc
    assert "Defaults to AES" not in row[5]
    # The words name what default_cipher_name does.
    assert default_cipher_name("x86_64") == default_cipher_name("i686") == "AES"
    assert "AES on x86 (amd64, 386)" in opt.default_doc
    assert default_cipher_name("aarch64") == default_cipher_name("ppc64le") == "CHACHA"
    assert "CHACHA elsewhere" in opt.default_doc


def test_usage_keeps_the_reference_help_text() -> None:
    assert BY_PATH["encryption_cipher"].help in usage_text()


def test_encrypt_names_every_store_type() -> None:
    assert "(MEMORY, FILE, SQL)" in _row("encrypt")[5]


def test_the_documented_mysql_dsns_parse_as_described() -> None:
    example = re.search(r"`(nss:secret@tcp\([^`]*)`", SQL_SOURCES)
    assert example is not None
    dsn = parse_mysql_dsn(example.group(1))
    assert (dsn.user, dsn.password, dsn.net, dsn.addr, dsn.dbname) == (
        "nss",
        "secret",
        "tcp",
        "db:3306",
        "nss_db",
    )
    assert dsn.params == {"timeout": "5s"}
    assert parse_mysql_dsn("/nss").addr == "127.0.0.1:3306"
    assert parse_mysql_dsn("u@unix/nss").addr == "/tmp/mysql.sock"
    odd = parse_mysql_dsn("u:p@:/x@tcp(db)/nss?loc=Europe%2FParis")
    assert (odd.password, odd.addr, odd.params) == ("p@:/x", "db", {"loc": "Europe/Paris"})
