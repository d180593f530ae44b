"""The network tests' world: hosts in namespaces, forwarders that cut or slow links, a fleet of
doclane processes across them, and PostgreSQL replicas to fail over (tests/network)."""
