"""``experiment elastic``: malleability on a real log (issue 39)."""
