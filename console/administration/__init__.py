"""The console's Administration section (admins only): users and roles, API tokens, member
clusters' registration and their agent and webhook tokens. Pages only: every change goes
through the same service as the REST API's (``core.users``, ``core.tokens``,
``fleet.services``, ``fleet.tokens``), so rules and audit entries are the same."""
