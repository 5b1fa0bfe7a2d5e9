"""stanpkg.pipeline"""
