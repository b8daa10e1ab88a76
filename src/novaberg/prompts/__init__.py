"""Prompt texts, in English and German."""
