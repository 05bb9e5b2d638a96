"""python3 -m scout_publisher SCRIPT [ARGS...]: enables the publisher from the
environment (see the package docstring), then runs SCRIPT as __main__.

Before SCRIPT starts, problems end in one line on stderr,
`scout_publisher: error: what; what to do`, and exit code 2 (a missing or bad
job id, rank, world size or mesh, a missing SCRIPT) or 1 (the record cannot
be created, e.g. the library is missing). Errors in SCRIPT itself are its own."""
import os
import runpy
import sys

import scout_publisher

EXIT_USAGE = 2
EXIT_PUBLISHER = 1


def fail(what, todo, code):
    print(f"scout_publisher: error: {what}; {todo}", file=sys.stderr)
    return code


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return EXIT_USAGE
    script = sys.argv[1]
    if not os.path.isfile(script):
        return fail(f"{script}: no such file", "give the training script's path as the first argument", EXIT_USAGE)
    try:
        scout_publisher.enable()
    except scout_publisher.ConfigError as e:
        return fail(e.what, e.fix_env, EXIT_USAGE)
    except scout_publisher.PublisherError as e:
        return fail(str(e), "set SCOUT_PUBLISHER_LIB to libscout_publisher.so and check /dev/shm", EXIT_PUBLISHER)
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
