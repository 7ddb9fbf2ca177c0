"""Scheduling models."""
