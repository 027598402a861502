"""Deployment tooling: one topology rendered for supervisord (`make up`) and docker compose."""
