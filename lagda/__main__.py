"""`python -m lagda` runs the `lagda` command."""

from lagda.cli import main

raise SystemExit(main())
