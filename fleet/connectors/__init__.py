"""Cluster connectors: one interface (base.Connector), a Kubernetes and a simulated implementation."""
