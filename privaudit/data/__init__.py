"""Offline datasets, local-file loaders and partitioners for federations."""
