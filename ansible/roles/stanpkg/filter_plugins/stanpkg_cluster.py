"""The stanpkg cluster's layout, derived from the inventory group that forms it.

``groups[stanpkg_cluster_group] | stanpkg_cluster_nodes(hostvars, stanpkg_nats_cluster_port)``
gives one entry per host, in inventory order: its node ID (``stanpkg_cluster_node_id`` or
its inventory name), the address the other hosts route to (``stanpkg_cluster_address``,
``ansible_host`` or its inventory name) and its NATS route port. The role's assertions,
its templates and the rolling restart all read this one derivation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _first_set(values: Mapping[str, Any], names: Iterable[str], fallback: Any) -> Any:
    for name in names:
        value = values.get(name)
        if value not in (None, ""):
            return value
    return fallback


def stanpkg_cluster_nodes(
    members: Iterable[str], hostvars: Mapping[str, Mapping[str, Any]], default_port: int
) -> list[dict[str, Any]]:
    nodes = []
    for host in members:
        values = hostvars[host]
        nodes.append(
            {
                "host": host,
                "node_id": str(_first_set(values, ["stanpkg_cluster_node_id"], host)),
                "address": str(
                    _first_set(values, ["stanpkg_cluster_address", "ansible_host"], host)
                ),
                "port": int(_first_set(values, ["stanpkg_nats_cluster_port"], default_port)),
            }
        )
    return nodes


def stanpkg_duplicate_node_ids(nodes: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Node IDs given to more than one host -> those hosts."""
    hosts: dict[str, list[str]] = {}
    for node in nodes:
        hosts.setdefault(node["node_id"], []).append(node["host"])
    return {node_id: names for node_id, names in hosts.items() if len(names) > 1}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "stanpkg_cluster_nodes": stanpkg_cluster_nodes,
            "stanpkg_duplicate_node_ids": stanpkg_duplicate_node_ids,
        }
