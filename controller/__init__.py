"""The pure controller: Kafka's control managers over an immutable image.

``Controller.handle(request, now_ms) -> ControllerResult(records, response)``
decides; nothing here does I/O, starts a thread, sleeps or reads a clock
(import-linter forbids it: pyproject.toml). Time comes in as an argument, and
the records it returns are committed by ``quorum/`` around it.
"""
