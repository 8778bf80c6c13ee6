"""Federated training: the round loop, algorithms, privatizers and checkpoints."""
