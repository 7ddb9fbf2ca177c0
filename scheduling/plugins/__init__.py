"""Scheduling plugins: upstream kube-scheduler in-tree plugins and Meridian's own (pure, no Django)."""
