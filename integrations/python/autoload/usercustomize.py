"""Enables scout_publisher at interpreter start-up when SCOUT_PUBLISH=1.

Put this directory and integrations/python on PYTHONPATH. Python imports
`usercustomize` after its site set-up (unless started with -s, -I or -S)."""
import os

if os.environ.get("SCOUT_PUBLISH", "") in ("1", "true", "yes"):
    import scout_publisher

    scout_publisher._autoload()
