"""EPITOME (Sharma et al. 2020): the reader and the judge check against its expert-annotated
empathy levels (docs/judges.md)."""
