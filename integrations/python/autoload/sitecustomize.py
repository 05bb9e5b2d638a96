"""Enables scout_publisher at interpreter start-up when SCOUT_PUBLISH=1, for
interpreters without a user site (a virtual environment, such as the torch
2.x venv, never imports `usercustomize`). Python imports `sitecustomize`
after its site set-up (unless started with -S or -I). Then it runs the next
`sitecustomize` on the path, if any, so that the system's (e.g. Debian's) is
not lost by this one shadowing it."""
import importlib.util
import os
import sys

if os.environ.get("SCOUT_PUBLISH", "") in ("1", "true", "yes"):
    import scout_publisher

    scout_publisher._autoload()


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        path = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_scout_next_sitecustomize", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as e:  # the next one's failure is its own; never stop the interpreter here
                print(f"scout_publisher: the next sitecustomize ({path}) failed: {e}", file=sys.stderr)
            return


_chain()
