"""Tests of deploy/: dashboards, Prometheus and Alertmanager configs, Kubernetes manifests, systemd, containers."""
