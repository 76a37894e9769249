"""``hermes-hooks-worker``: runs one ``isolation: process`` native plugin in a process of
its own, for a Python host (Hermes Agent). The host starts it with the worker flag, the
plugin's library and settings, and a socket on file descriptor 3."""

import sys

from . import _native


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] != _native.WORKER_ARG:
        print(
            "hermes-hooks-worker: this program is started by hermes-hooks for plugins with "
            "`isolation: process`; it is not meant to be run by hand",
            file=sys.stderr,
        )
        return 2
    return _native.worker_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
