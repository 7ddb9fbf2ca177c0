"""Console models (the emergency downgrade arrives with the nodeconfig issue)."""
