"""stanpkg.transport"""
