"""Monitoring: the reference's ``/streaming/*`` endpoints, ``/metrics`` for Prometheus,
and the embedded nats-server's own endpoints, on the ``-m``/``-ms`` port.

* ``config`` — whether and where to listen, from the plan (``monitor_config``);
* ``service`` — the HTTP(S) listener (``MonitorServer``), started by ``stanpkg.node``
  and imported only then (it loads aiohttp);
* ``routes`` — request handlers; ``proxy`` — NATS endpoints forwarded to nats-server;
* ``documents`` — the JSON documents; ``gojson`` — Go's JSON/time/Atoi details;
* ``metrics`` — the Prometheus exposition (prometheus-nats-exporter names and labels);
* ``pacing`` — what keeps big answers from stalling the server's event loop.

Everything is read through ``stanpkg.server.monitoring_views.ServerView`` at request
time; nothing is counted per message for monitoring's sake.
"""

from stanpkg.monitor.config import MonitorConfig, monitor_config

__all__ = ["MonitorConfig", "monitor_config"]
