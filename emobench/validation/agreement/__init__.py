"""Judge–human agreement: human-rated conversations (`emobench validate --human`) and the
agreement statistics every judge check reports (docs/validity.md)."""
