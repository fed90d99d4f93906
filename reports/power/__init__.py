"""`mirrorchaos power`: the detection matrix of the campaign against every planted bug."""
