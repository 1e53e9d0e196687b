"""The library's own redaction (used when it runs without ocflow): the same patterns and the
same answers as the host's (``crates/ocflow-core/src/llm/redact.rs`` tests the same text)."""

from open_codex_lib.redact import KEY_MARKER, redact, redact_messages

SAMPLE = (
    "openai sk-proj-abcdefghijklmnop1234 github ghp_abcdefghijklmnopqrstuvwx12 "
    "aws AKIAABCDEFGHIJKLMNOP slack xoxb-1234567890-abcdef\n"
    'export API_TOKEN="abcdefgh12345678" and password: hunter2hunter2\n'
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\n"
    "kept: TOKEN=${GITHUB_TOKEN} max_tokens=4096 sk-short the key=value"
)


def test_strings_that_look_like_keys_are_replaced_as_the_host_replaces_them():
    text, count = redact(SAMPLE)
    assert text == (
        f"openai {KEY_MARKER} github {KEY_MARKER} aws {KEY_MARKER} slack {KEY_MARKER}\n"
        f'export API_TOKEN="{KEY_MARKER}" and password: {KEY_MARKER}\n{KEY_MARKER}\n'
        "kept: TOKEN=${GITHUB_TOKEN} max_tokens=4096 sk-short the key=value"
    )
    assert count == 7


def test_a_request_says_what_went_and_an_untouched_one_is_as_it_was():
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "the log: OPENAI_API_KEY=sk-live-0123456789abcdefghij"},
    ]
    redacted = redact_messages(messages)
    assert redacted[0] == messages[0]
    assert "sk-live" not in redacted[1]["content"]
    assert f"OPENAI_API_KEY={KEY_MARKER}" in redacted[1]["content"]
    assert "Note from ocflow" in redacted[1]["content"]
    assert messages[1]["content"].endswith("ghij"), "the caller's messages are not changed"
    plain = [{"role": "user", "content": "nothing secret here"}]
    assert redact_messages(plain) == plain
