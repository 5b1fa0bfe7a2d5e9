"""stanpkg on more than one core: K partitioned stanpkg processes on one nats-server
against the Go reference, under C concurrent stan-bench instances (issue 16)."""
