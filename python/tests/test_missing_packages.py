"""A package a command needs and the repository has not installed is named, with the fix."""

import json

import pytest
from open_codex_lib import execute_operation
from open_codex_lib.missing_packages import missing_package, missing_package_hint

# What npm 11 printed for `npx tape` offline (npm_config_offline=true) and with no network.
NPX_OFFLINE = (
    "npm error code ENOTCACHED\n"
    "npm error request to https://registry.npmjs.org/tape failed: cache mode is "
    "'only-if-cached' but no cached response is available.\n"
)
NPX_NO_NETWORK = (
    "npm error code EAI_AGAIN\n"
    "npm error syscall getaddrinfo\n"
    "npm error request to https://registry.npmjs.org/tape failed, reason: getaddrinfo "
    "EAI_AGAIN registry.npmjs.org\n"
)
OLD_NPM_SCOPED = (
    "npm ERR! code ENOTCACHED\n"
    "npm ERR! request to https://registry.npmjs.org/@babel%2fcore failed: cache mode\n"
)
NODE_REQUIRE = (
    "node:internal/modules/cjs/loader:1210\n  throw err;\n  ^\n\n"
    "Error: Cannot find module 'tape/lib/test'\nRequire stack:\n- /v/test/a.js\n"
)
NODE_IMPORT = (
    "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@scope/pkg' imported from /v/a.mjs"
)


@pytest.mark.parametrize(
    ("command", "output", "name"),
    [
        ("npx tape 'test/**/*.js'", NPX_OFFLINE, "tape"),
        ("npx tape", NPX_NO_NETWORK, "tape"),
        ("npm ci", OLD_NPM_SCOPED, "@babel/core"),
        ("node test/a.js", NODE_REQUIRE, "tape"),
        ("node a.mjs", NODE_IMPORT, "@scope/pkg"),
        ("npm test", "> tape test/*.js\n\nsh: 1: tape: not found\n", "tape"),
        ("npm run lint", "sh: eslint: command not found\n", "eslint"),
        # Not a package: a relative module, a missing program outside a package script.
        ("node a.js", "Error: Cannot find module './lib/x'\n", None),
        ("make check", "sh: 1: tape: not found\n", None),
        ("pytest", "1 failed, 2 passed in 0.1s\n", None),
    ],
)
def test_the_missing_package_is_read_from_the_output(command, output, name):
    assert missing_package(command, output) == name


def test_the_hint_names_the_package_and_the_fix():
    assert missing_package_hint("npx tape", NPX_OFFLINE, network_off=True) == (
        "; `tape` is not installed in node_modules: run `npm ci` in the repository, or allow "
        'the network for this step (`"network": true`)'
    )
    assert "allow the network" not in missing_package_hint("npx tape", NPX_OFFLINE, False)


def _run(make_step, operation, command, layers):
    files = make_step(
        operation,
        {"command": command},
        work={"package.json": "{}\n"},
        limits={"timeout_seconds": 20, "max_output_bytes": 1048576},
        extra={"sandbox": {"launcher": ["env"], "layers": layers}},
    )
    result = execute_operation(files.path, {})
    json.dumps(result)
    return result


@pytest.mark.parametrize("operation", ["run_tests", "execute_shell_command"])
def test_a_failed_step_names_the_missing_package_not_the_network(make_step, operation):
    printed = NPX_OFFLINE.replace("'", "'\\''")
    layers = {"namespaces": True, "network": "off", "landlock": "landlock", "memory_mb": 4096}
    result = _run(make_step, operation, f"printf '%s' '{printed}' >&2; exit 1", layers)
    assert result["status"] == "failure", result
    assert result["message"].endswith(
        "; `tape` is not installed in node_modules: run `npm ci` in the repository, or allow "
        'the network for this step (`"network": true`)'
    ), result["message"]
    assert "the network is off for command steps" not in result["message"]
