"""Which principal a verified client certificate is (docs/security.md).

A rule is one line, ``FIELD=PATTERN role [brokerId]``, first match wins:

* ``FIELD`` is ``CN`` (the subject's common name), ``URI`` or ``DNS`` (a
  subject alternative name of that type); every name of the field is tried;
* ``PATTERN`` matches the whole name: ``*`` is any run of characters, and
  ``{id}`` (at most once) a broker id: decimal digits without a leading zero,
  at most 2**31-1;
* ``role`` is ``admin``, ``broker`` or ``read``, as for tokens; a ``broker``
  rule may bind the broker id, ``{id}`` (from the pattern) or a number, and a
  certificate so bound may act only for that broker, exactly as a bound token.

Without a rules file (``serve --tls-principals-file``) the rules are
``DEFAULT_RULES``: ``CN=broker-3`` is broker 3's, ``CN=admin-alice`` an admin,
``CN=read-grafana`` a reader. A certificate no rule maps is no one: it gets
401 unless its request carries a token. Only certificates the client CA
verified reach this module (the TLS layer refuses the others).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .auth import INT32_MAX, Principal, Role, read_rule_file, rule_lines
from .tls import FIELDS, certificate_names

DEFAULT_RULES = """\
CN=broker-{id}  broker {id}
CN=admin-*      admin
CN=read-*       read
"""
_ID = "{id}"


class PrincipalsFileError(ValueError):
    """A rules file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class CertRule:
    field: str
    pattern: str
    regex: re.Pattern[str]
    role: Role
    broker_id: int | str | None  # a number, "{id}", or None (not bound)
    line: int

    def describe(self) -> str:
        bound = f" {self.broker_id}" if self.broker_id is not None else ""
        return f"{self.field}={self.pattern} {self.role.value}{bound}"


def _compile(pattern: str) -> re.Pattern[str]:
    parts = []
    for i, piece in enumerate(pattern.split(_ID)):
        if i:
            parts.append(r"(?P<id>0|[1-9][0-9]{0,9})")
        parts.append(".*".join(re.escape(p) for p in piece.split("*")))
    return re.compile("".join(parts))


def parse_rules(text: str, source: str = "<principals>") -> tuple[CertRule, ...]:
    rules: list[CertRule] = []
    for number, where, parts in rule_lines(text, source):
        if len(parts) not in (2, 3):
            raise PrincipalsFileError(
                f"{where}: expected 'FIELD=PATTERN role [brokerId]', got {len(parts)} fields"
            )
        field, eq, pattern = parts[0].partition("=")
        if not eq or field not in FIELDS:
            raise PrincipalsFileError(
                f"{where}: {parts[0]!r} must start with CN=, URI= or DNS= (the certificate "
                "name to match)"
            )
        if not pattern:
            raise PrincipalsFileError(f"{where}: the pattern after {field}= is empty")
        if pattern.count(_ID) > 1:
            raise PrincipalsFileError(f"{where}: {{id}} may appear once in a pattern")
        try:
            role = Role(parts[1])
        except ValueError:
            raise PrincipalsFileError(
                f"{where}: unknown role {parts[1]!r} (expected broker, admin or read)"
            ) from None
        broker_id: int | str | None = None
        if len(parts) == 3:
            text_id = parts[2]
            if role is not Role.BROKER:
                raise PrincipalsFileError(f"{where}: only a broker rule can bind a brokerId")
            if text_id == _ID:
                if _ID not in pattern:
                    raise PrincipalsFileError(
                        f"{where}: brokerId {{id}} needs {{id}} in the pattern"
                    )
                broker_id = _ID
            elif text_id.isascii() and text_id.isdigit() and int(text_id) <= INT32_MAX:
                broker_id = int(text_id)
            else:
                raise PrincipalsFileError(
                    f"{where}: brokerId {text_id!r} is neither {{id}} nor an integer in "
                    f"[0, {INT32_MAX}]"
                )
        rules.append(CertRule(field, pattern, _compile(pattern), role, broker_id, number))
    if not rules:
        raise PrincipalsFileError(f"{source}: no rules (every certificate would be no one)")
    return tuple(rules)


def load_rules(path: str | os.PathLike) -> tuple[CertRule, ...]:
    return parse_rules(read_rule_file(path, "principals", PrincipalsFileError), str(path))


class CertPrincipals:
    """Maps verified client certificates to principals by ``rules``."""

    def __init__(self, rules: tuple[CertRule, ...], source: str = "the default rules") -> None:
        self.rules = rules
        self.source = source

    @classmethod
    def default(cls) -> CertPrincipals:
        return cls(parse_rules(DEFAULT_RULES, "<default rules>"))

    def principal(self, peer: dict) -> Principal | None:
        names = certificate_names(peer)
        for rule in self.rules:
            for name in names[rule.field]:
                m = rule.regex.fullmatch(name)
                if m is None:
                    continue
                broker_id = rule.broker_id
                if broker_id == _ID:
                    broker_id = int(m.group("id"))
                    if broker_id > INT32_MAX:
                        continue  # not a broker id: the next rule may still match
                assert broker_id is None or isinstance(broker_id, int)
                return Principal(rule.role, broker_id, rule.line, f"{rule.field}={name}")
        return None

    def describe(self) -> str:
        return f"{self.source}: " + "; ".join(r.describe() for r in self.rules)
