"""The federated-training engine: round loop, trainers (batched and sequential), sampling, evaluation, checkpoints."""
