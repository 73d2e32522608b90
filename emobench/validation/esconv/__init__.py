"""ESConv (Liu et al. 2021): the reader, the judge check against the seekers' own ratings, and the
replay of real seekers by the simulator (docs/validity.md)."""
