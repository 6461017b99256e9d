"""Notifications: the payload (pure) and the senders."""
