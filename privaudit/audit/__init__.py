"""Statistics that turn attack scores into ε lower bounds; claims and verdicts."""
