"""stanpkg: a Python distribution of the NATS Streaming (STAN) server."""

__version__ = "0.1.0"
