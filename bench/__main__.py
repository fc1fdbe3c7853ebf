"""``python -m bench``: see bench/README.md."""

from bench.cli import cli

if __name__ == "__main__":
    cli()
