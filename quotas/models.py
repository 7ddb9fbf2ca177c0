"""Quotas models."""
