"""stanpkg.proto"""
