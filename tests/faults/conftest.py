"""Fault tests run real processes: stanpkg servers, nats-server, PostgreSQL. The async
test runner and the session's nats-server come from the server tests' fixtures."""

from tests.server.conftest import nats_url, pytest_pyfunc_call

__all__ = ["nats_url", "pytest_pyfunc_call"]
