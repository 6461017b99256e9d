"""Deployment artefacts: Grafana dashboards, Prometheus and Alertmanager configs, Kubernetes, systemd, containers."""
