"""Placeholder: models of this app arrive with their issue."""
