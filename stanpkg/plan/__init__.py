"""stanpkg.plan"""
