"""What operators watch: health, readiness, metrics, logs, and the supervised loops."""
