"""Federated algorithms, one module each, behind one small interface."""
