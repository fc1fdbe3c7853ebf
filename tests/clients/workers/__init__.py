"""The conformance worker programs written in Python (the other languages ship theirs)."""
