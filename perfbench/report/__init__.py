"""Presentation of results: console tables now; Markdown and charts later."""
