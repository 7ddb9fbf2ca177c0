"""Federation models."""
