"""`python -m clustersim` is the `clustersim` command."""

from clustersim.cli import main

main()
