"""The Ansible tests use the packaging tests' artifacts and containers."""

from tests.packaging.conftest import base_rootfs, deb_file, machine

__all__ = ["base_rootfs", "deb_file", "machine"]
