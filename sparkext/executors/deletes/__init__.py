"""deletes."""
