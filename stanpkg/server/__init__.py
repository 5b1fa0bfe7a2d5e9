"""stanpkg.server"""
