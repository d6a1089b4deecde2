"""Vector stores: one interface, backends from in-memory to sqlite-vec, pgvector and qdrant."""
