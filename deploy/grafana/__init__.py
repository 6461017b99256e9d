"""Grafana dashboards built with grafana-foundation-sdk (generate.py) and their queries (queries.py)."""
