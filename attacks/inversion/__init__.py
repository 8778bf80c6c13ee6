"""Gradient-inversion attacks; they return reconstructions and labels."""
