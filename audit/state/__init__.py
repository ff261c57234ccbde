"""Decision state as a function of the sealed records: velocity windows replayed from the ledger,
and the snapshot that spares a replay from the first record."""
