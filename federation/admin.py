"""Federation admin registrations."""
