"""The A2A tests need the a2a extra (the official a2a-sdk with its HTTP server): without it every
test module here is collected as a skip naming it (tests/conftest.py, FOLDER_EXTRAS)."""
