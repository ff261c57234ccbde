"""wasm_rules: see DESIGN.md (this layer arrives with its own issue)."""
