"""Helpers for integration tests: run the real scout binary, validate its JSON.

Tests run under /usr/bin/python3 (Debian's, with python3-jsonschema); their
trainers under the venv's torch 2.x. ctest sets SCOUT_BIN, SCOUT_BUILD_DIR and SCOUT_SOURCE_DIR.
"""
import json
import os
import subprocess
import unittest

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SCOUT_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..")))
BUILD_DIR = os.environ.get("SCOUT_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
SCOUT_BIN = os.environ.get("SCOUT_BIN", os.path.join(BUILD_DIR, "bin", "scout"))

EXIT = {"healthy": 0, "attributed": 1, "usage": 2, "inconclusive": 3, "bad_input": 4, "unavailable": 5, "internal": 70}

_schemas = {}


def schema(name="verdict.schema.json"):
    if name not in _schemas:
        with open(os.path.join(SOURCE_DIR, "schemas", name)) as f:
            _schemas[name] = json.load(f)
    return _schemas[name]


def validate(doc, name="verdict.schema.json"):
    """Raises jsonschema.ValidationError when doc does not match the schema."""
    jsonschema.validate(doc, schema(name))


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self, schema_name="verdict.schema.json"):
        doc = json.loads(self.stdout)
        validate(doc, schema_name)
        return doc

    def __repr__(self):
        return f"rc={self.rc}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def run(args, stdin=None, timeout=120, env=None, fmt="json"):
    """Runs scout with args (a list); fmt adds --format unless None."""
    cmd = [SCOUT_BIN] + list(args)
    if fmt is not None:
        cmd += ["--format", fmt]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, env=full_env,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    return Result(proc)


class ScoutTestCase(unittest.TestCase):
    def assertExit(self, result, name):
        self.assertEqual(result.rc, EXIT[name], repr(result))

    def assertCleanError(self, result, name, command):
        """A clean error: the documented code, one 'scout CMD: error:' line, no crash."""
        self.assertExit(result, name)
        self.assertIn(f"scout {command}: error:", result.stderr)
        self.assertEqual(result.stdout, "", "no partial output on error")
