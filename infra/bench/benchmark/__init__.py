"""The performance benchmark: `uv run python -m infra.benchmark` prints a table of figures
measured side by side in one run, so that ratios hold on a noisy machine. `--quick` is the smoke
version CI runs. It is not a timed test: nothing here fails because a machine is slow."""
