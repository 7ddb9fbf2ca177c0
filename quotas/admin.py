"""Quotas admin registrations."""
