"""Access for an organisation: tokens kept in PostgreSQL, the audit trail, rate limits, single
sign-on. What the API, the console and the CLI share about who is calling and what they did;
the HTTP parts (guards, middleware, routes) are ``pipeline.api``'s."""
