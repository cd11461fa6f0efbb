"""The MCP approval gateway: Signoff in front of agents it does not run."""
