"""Scheduling admin registrations."""
