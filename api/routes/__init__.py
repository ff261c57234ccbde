"""HTTP routes under /v1, one module per resource; each handler is a thin call into audit/ or ledger/."""
