"""Which principal a verified client certificate is (docs/security.md).

A rule is one line, ``FIELD=PATTERN role [brokerId]``:

* ``FIELD`` is ``CN`` (the subject's common name), ``URI`` or ``DNS`` (a
  subject alternative name of that type);
* ``PATTERN`` matches the whole name: ``*`` is any run of characters, and
  ``{id}`` (at most once) a broker id: decimal digits without a leading zero,
  at most 2**31-1;
* ``role`` is ``admin``, ``broker`` or ``read``, as for tokens; a ``broker``
  rule may bind the broker id, ``{id}`` (from the pattern) or a number, and a
  certificate so bound may act only for that broker, exactly as a bound token.

**A certificate is one principal.** Each of its names (its CN, each URI and
DNS name) is mapped by the first rule that matches it; names no rule matches
are ignored. A subject with more than one CN is refused, and so is a
certificate whose names map to different principals (another role, or
another broker binding): ``AmbiguousCertificate``, 403 naming each name and
what it mapped to (not the rule's line). Trying every name against the rules in order and taking
the first hit made ``CN=read-x, CN=admin-y`` an admin (the admin rule came
first): a certificate authority that lets a client choose one name must not
let it choose its role by adding another. Names that agree are that one
principal (named by the first rule's match).

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

from .auth import INT32_MAX, AmbiguousCertificate, Principal, Role, read_rule_file, rule_lines
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
        """The one principal the certificate's names map to, None if none
        does; AmbiguousCertificate for two CNs or names that disagree."""
        names = certificate_names(peer)
        if len(names["CN"]) > 1:
            shown = ", ".join(f"CN={cn}" for cn in names["CN"])
            raise AmbiguousCertificate(
                f"the client certificate has {len(names['CN'])} CNs ({shown}): a certificate "
                "is one principal, so its subject may hold one CN; issue it with one"
            )
        mapped = [
            principal
            for field in FIELDS
            for name in names[field]
            if (principal := self._map(field, name)) is not None
        ]
        if not mapped:
            return None
        if len({(p.role, p.broker_id) for p in mapped}) > 1:
            shown = ", ".join(
                f"{p.certificate} is {p.role.value}"
                + ("" if p.broker_id is None else f" {p.broker_id}")
                for p in mapped
            )  # never the rules' lines: the file's layout is the operator's (api/auth.py)
            raise AmbiguousCertificate(
                f"the client certificate maps to more than one principal: {shown}; a "
                "certificate is one principal: issue it with names that map to one, or "
                "change the rules (--tls-principals-file)"
            )
        return min(mapped, key=lambda p: p.line)

    def _map(self, field: str, name: str) -> Principal | None:
        """What the first rule that matches ``name`` makes of it."""
        for rule in self.rules:
            if rule.field != field:
                continue
            m = rule.regex.fullmatch(name)
            if m is None:
                continue
            broker_id = rule.broker_id
            if broker_id == _ID:
                broker_id = int(m.group("id"))
                if broker_id > INT32_MAX:
                    continue  # not a broker id: the next rule may still match
            assert broker_id is None or isinstance(broker_id, int)
            return Principal(rule.role, broker_id, rule.line, f"{field}={name}")
        return None

    def describe(self) -> str:
        return f"{self.source}: " + "; ".join(r.describe() for r in self.rules)
