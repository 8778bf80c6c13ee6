"""Membership-inference attacks and canaries; they return score arrays."""
