"""Kubernetes manifests and the generator of prometheusrule.yaml."""
