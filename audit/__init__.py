"""audit: see DESIGN.md (this layer arrives with its own issue)."""
