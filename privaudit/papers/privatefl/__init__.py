"""PrivateFL (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023): algorithm, experiments, evidence, claims."""
