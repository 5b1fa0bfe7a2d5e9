"""stanpkg.monitor"""
