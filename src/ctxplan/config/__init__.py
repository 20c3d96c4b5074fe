"""Configuration at the edge: pydantic schemas, presets, and loaders.

Everything user-supplied is validated here once and handed inward as frozen dataclasses.
"""
