"""The demo: a local payment provider the demo agent's tools call, and its command line."""
