"""A local Slack: an in-memory workspace served over the Slack Web API on loopback.

``devkit.sandbox.slack_api`` is the entry point: it re-exports the workspace model (users,
channels, messages, modals, the log of API calls; ``records``, ``workspace``) and the HTTP
server that the real ``slack_sdk.WebClient`` talks to (``web_api``, ``server``). The test suite
uses it in place of slack.com; the browser sandbox renders the same workspace as a Slack channel.
"""
