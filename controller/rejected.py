"""The one way a check inside a handler refuses (as h11 raises one
``LocalProtocolError(msg, error_status_hint)`` wherever a check fails).

A check raises ``Rejected(code, message, rule)``; the handler catches it
where it builds the answer, for the whole request or for the entry being
decided (a topic, a resource, a partition), and puts the code, the message
and the rule (the check's stable id, ``controller/rules.py``) in that answer. What a check refuses never reaches the log: a handler decides its
records only after the checks that can refuse them.

Replay never raises it: a record the log holds is applied or ignored with
its reason (``ImageDelta.replay``), so ``metadata_records``' checks that
replay shares with the controller (``acl_problem``, ``topic_name_problem``,
...) keep returning their reason or None."""

from __future__ import annotations

from metadata_records.errors import Errors


class Rejected(Exception):
    """A refusal: ``code``, ``message`` and ``rule`` as the answer will carry them."""

    def __init__(self, code: Errors, message: str, rule: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.rule = rule  # an id of controller/rules.py's RULES
