"""``python -m api.cli``: the same command line as the ``sealtrail`` script."""

from api.cli import main

main()
