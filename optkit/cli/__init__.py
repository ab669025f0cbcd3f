"""Command-line interface: parse, call one library function, render. Nothing else."""
