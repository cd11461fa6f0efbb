"""The approvals API: agents Signoff does not run ask for sign-off over HTTP."""
