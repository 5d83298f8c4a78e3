"""Integrations: chat model providers and other resources. They depend on ``api`` only."""
