"""Reading the trail: the trace index kept beside the ledger, trace queries and overview statistics."""
