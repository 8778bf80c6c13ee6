"""Privatizers as wrappers around any algorithm, one registry (``--privacy NAME``), each recording its privacy events."""
