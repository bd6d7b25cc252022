"""Security checks' shared material: what a leaked credential looks like, and names that must never reach SQL."""

from __future__ import annotations

import re

# What a leaked AWS credential or private key looks like (AWS's documented formats).
CREDENTIAL_PATTERNS = {
    "access key id": re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    "secret access key": re.compile(
        r"(?i)(?:aws_secret_access_key|secretaccesskey|secret_key)[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+]{40}\b"
    ),
    "session token": re.compile(r"(?i)aws_session_token[\"'\s]*[:=]\s*[\"']?[A-Za-z0-9/+=]{100,}"),
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----"),
}
# Names that try to break out of an identifier: each must be refused before any SQL is built.
INJECTIONS = [
    "events; DROP TABLE lake.x",
    "events --",
    "a.b",
    "x` OR `1`=`1",
    "' OR '1'='1",
    "t/*c*/",
    "",
    "1events",
    "events\n",
    "évents",
    "a" * 129,
    "${jndi:ldap://127.0.0.1/x}",
]


def leaks(text: str) -> list[str]:
    """The kinds of credential (keys of ``CREDENTIAL_PATTERNS``) that ``text`` holds."""
    return [name for name, pattern in CREDENTIAL_PATTERNS.items() if pattern.search(text)]
