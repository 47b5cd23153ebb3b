"""Wayline."""
