"""python3 -m scout_publisher SCRIPT [ARGS...]: enables the publisher from the
environment (see the package docstring), then runs SCRIPT as __main__."""
import runpy
import sys

import scout_publisher


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    scout_publisher.enable()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
