"""Node config admin registrations."""
