"""The MySQL data source name, parsed once for the plan's rule and the store's driver.

The Go driver's form, as the reference's configurations have it:
``[user[:password]@][net[(addr)]]/dbname[?param=value&...]``. Errors use the Go driver's
wording, which the reference prints as ``Failed to start: <text>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

__all__ = ["DsnError", "MysqlDsn", "parse_mysql_dsn"]

_NO_SLASH = "invalid DSN: missing the slash separating the database name"
_UNESCAPED = "invalid DSN: did you forget to escape a param value?"
_NO_BRACE = "invalid DSN: network address not terminated (missing closing brace)"
_DEFAULT_ADDRS = {"tcp": "127.0.0.1:3306", "unix": "/tmp/mysql.sock"}
# The networks the driver dials. The Go driver accepts any name here and fails only when
# it connects; refusing others in the plan lets `stanpkg validate` catch them.
NETWORKS = ("tcp", "tcp4", "tcp6", "unix")


class DsnError(ValueError):
    """The source is not a MySQL DSN (the text is the Go driver's)."""


@dataclass(frozen=True)
class MysqlDsn:
    user: str = ""
    password: str = field(default="", repr=False)
    net: str = "tcp"
    addr: str = ""
    dbname: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_mysql_dsn(dsn: str) -> MysqlDsn:
    """Parse the way the Go driver does: the last ``/`` starts the database name, the
    last ``@`` before it ends the credentials, the first ``:`` splits user and password."""
    slash = dsn.rfind("/")
    if slash < 0:
        raise DsnError(_NO_SLASH)
    left = dsn[:slash]
    at = left.rfind("@")
    user = password = ""
    if at >= 0:
        user, _, password = left[:at].partition(":")
    net = left[at + 1 :]
    addr = ""
    paren = net.find("(")
    if paren >= 0:
        if not net.endswith(")"):
            raise DsnError(_UNESCAPED if ")" in net[paren:] else _NO_BRACE)
        addr = net[paren + 1 : -1]
        net = net[:paren]
    net = net or "tcp"
    dbname, _, query = dsn[slash + 1 :].partition("?")
    params: dict[str, str] = {}
    for pair in query.split("&") if query else ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise DsnError(f"invalid DSN: invalid parameter {pair!r}")
        params[key] = unquote(value)
    if not addr:
        if net not in _DEFAULT_ADDRS:
            raise DsnError(f"default addr for network '{net}' unknown")
        addr = _DEFAULT_ADDRS[net]
    if net not in NETWORKS:
        raise DsnError(f"unsupported network '{net}' (one of {', '.join(NETWORKS)})")
    return MysqlDsn(user, password, net, addr, dbname, params)
