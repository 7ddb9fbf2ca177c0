"""Node config models."""
