"""Importers: other benchmarks' recorded runs as emobench run directories."""
