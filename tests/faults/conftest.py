"""Fault tests run real processes: stanpkg servers, nats-server, PostgreSQL. The async
test runner and the session's nats-server come from the server tests' fixtures;
``start_nats`` (a nats-server on a chosen port, restartable) from the transport tests'."""

from tests.server.conftest import nats_url, pytest_pyfunc_call
from tests.transport.conftest import start_nats

__all__ = ["nats_url", "pytest_pyfunc_call", "start_nats"]
