"""Tests of privaudit.interop: federations trained outside privaudit, recorded as checkpoints."""
