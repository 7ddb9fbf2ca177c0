"""Fleet models."""
