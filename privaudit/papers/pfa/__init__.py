"""PFA / PFA+ (Liu, Lou, Xiong, ... heterogeneous-DP FL with projected aggregation): algorithms, budgets, experiments, claims."""
