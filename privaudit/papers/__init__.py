"""One folder per audited paper: its algorithm variants, claims and recipes, experiments and evidence.

Each folder's ``__init__`` exports one :class:`privaudit.plugins.Paper` value, ``PAPER``, named by one entry point in
``pyproject.toml``; the rest of privaudit finds everything a paper contributes through it and names no paper.
"""
