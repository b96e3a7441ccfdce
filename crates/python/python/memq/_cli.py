"""The ``memq`` command the wheel installs: the same command line as the Rust binary, run in
this process by the native module (no Rust toolchain, no second binary)."""

import sys

from . import _memq


def main() -> None:
    sys.exit(_memq.run_cli(["memq", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
