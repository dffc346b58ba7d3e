"""Rendering the views through the templates, formatting, and writing only what changed."""
