#!/usr/bin/env bash
# Regenerates stanpkg/proto/*_pb2.py(i) from the .proto sources (needs grpcio-tools 1.84.0,
# whose protoc writes code for protobuf 7.35, the oldest runtime pyproject.toml allows).
# Run from the repository root so imports resolve as the package path stanpkg.proto.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. \
    stanpkg/proto/protocol.proto stanpkg/proto/spb.proto
