"""Fleet admin registrations."""
