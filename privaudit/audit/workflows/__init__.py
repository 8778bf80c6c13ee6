"""Train-and-attack audit workflows on trained federations: the one-run checkpoint audit and gradient canaries."""
