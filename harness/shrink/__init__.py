"""Shrinking a failing run: its fault schedule cut down, by full seeded replays, to the
smallest one that still fails with the same violation kind (`mirrorchaos shrink`)."""
