"""stanpkg.stores"""
