"""The Slack side of Signoff: Block Kit rendering, the Bolt app, the outbox dispatcher."""
