"""Payment messages in, one canonical ``Transaction`` out (SWIFT FIN MT103/MT202/MT202COV,
ISO 20022 pacs.008, JSON)."""
