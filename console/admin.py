"""Console admin registrations."""
