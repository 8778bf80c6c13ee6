"""One folder per audited paper: its algorithm variants, claims and recipes, experiments and evidence."""
