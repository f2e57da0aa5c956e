"""Placeholder, filled in by the change that adds its ops."""
__all__ = []
