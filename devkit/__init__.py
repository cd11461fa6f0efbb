"""Tools for developing with Signoff, never imported by the product: the local Slack sandbox,
the demo payment provider and agent, and ``signoff dev``."""
