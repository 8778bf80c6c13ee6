"""FedReg (Xu, Hong, Huang & Jiang, ICLR 2022): algorithm, local step, evidence, claims."""
