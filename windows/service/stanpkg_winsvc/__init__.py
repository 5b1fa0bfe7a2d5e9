"""The Windows service wrapper of stanpkg: pure logic in ``logic``, pywin32 in
``winservice`` (imported only on Windows)."""
