"""Attacks on trained federations: membership inference and gradient inversion (never imports privaudit.audit)."""
