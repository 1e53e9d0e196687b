"""A JavaScript package a command needed and the repository has not installed, from its output.

Command steps see the repository's own ``node_modules`` read-only, and the host
runs npm offline when the step has no network (``npm_config_offline``), so
``npx tape`` fails at once with ``ENOTCACHED`` instead of retrying the registry
for a minute. This module turns that error, node's ``Cannot find module`` and a
package script's missing program into one plain sentence that names the
package and the fix.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

# npm (7+: "npm error", older: "npm ERR!") fetching a package it could not get: offline
# ("ENOTCACHED ... request to URL failed: cache mode is 'only-if-cached'") or with no network
# ("request to URL failed, reason: getaddrinfo EAI_AGAIN ...").
_NPM_FETCH = re.compile(
    r"^npm (?:error|ERR!) request to https?://[^/\s]+/(?P<name>[^/\s]+(?:/[^/\s]+)?) failed",
    re.MULTILINE,
)
# node requiring a package (not a relative or absolute path) that is not installed.
_NODE_REQUIRE = re.compile(
    r"Cannot find (?:module|package) '(?P<name>(?:@[^/'\s]+/)?[^./'\s][^/'\s]*)"
)
# A package script (`npm test` running "tape test/*.js") whose program is not installed:
# `sh: 1: tape: not found` (dash) or `sh: tape: command not found` (bash).
_SCRIPT_PROGRAM = re.compile(
    r"^(?:sh|bash): (?:\d+: )?(?P<name>[A-Za-z0-9@._/-]+): (?:command )?not found$",
    re.MULTILINE,
)


def missing_package(command: str, output: str) -> str | None:
    """The JavaScript package ``command`` needed and did not find, from its ``output``."""
    found = _NPM_FETCH.search(output)
    if found:
        # Scoped packages are fetched as `@scope%2fname`; a tarball's URL has more after it.
        return unquote(found.group("name")).split("/-/")[0]
    found = _NODE_REQUIRE.search(output)
    if found:
        return found.group("name")
    runs_script = re.search(r"\b(?:npm|pnpm|yarn)\b", command) is not None
    found = _SCRIPT_PROGRAM.search(output)
    if found and runs_script:
        return found.group("name")
    return None


def missing_package_hint(command: str, output: str, network_off: bool) -> str:
    """``; `tape` is not installed in node_modules: …`` for a step's message, or ``""``."""
    name = missing_package(command, output)
    if name is None:
        return ""
    hint = f"; `{name}` is not installed in node_modules: run `npm ci` in the repository"
    if network_off:
        hint += ', or allow the network for this step (`"network": true`)'
    return hint
