"""``python -m logstore``: the ``logstore`` command."""

from logstore.cli import main

if __name__ == "__main__":
    main()
