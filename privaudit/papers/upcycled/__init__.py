"""Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu; ICLR 2024 draft and TMLR 2024): experiments, claims and recipes."""
