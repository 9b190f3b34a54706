"""Run NVIDIA's tools and read what they write into DuckDB tables."""
