"""metadata_records.uuids: Kafka's 22-character base64url UUIDs."""

from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records import uuids
from metadata_records.uuids import (
    METADATA_TOPIC_ID,
    ZERO_UUID,
    InvalidUuid,
    parse_uuid,
    random_uuid,
    to_standard,
    uuid_from_bytes,
)

# A Kafka topic id as kafka-topics prints it, and its standard form.
KAFKA_ID = "fPZv1VBsRFmnlRvmGcOW9w"
KAFKA_ID_STANDARD = "7cf66fd5-506c-4459-a795-1be619c396f7"


def test_reserved_ids_are_kafkas():
    assert ZERO_UUID == uuid_from_bytes(bytes(16))
    assert METADATA_TOPIC_ID == uuid_from_bytes(bytes(15) + b"\x01")
    assert to_standard(ZERO_UUID) == "00000000-0000-0000-0000-000000000000"
    assert to_standard(METADATA_TOPIC_ID) == "00000000-0000-0000-0000-000000000001"


def test_known_base64url_and_standard_forms():
    assert to_standard(KAFKA_ID) == KAFKA_ID_STANDARD
    assert parse_uuid(KAFKA_ID_STANDARD) == KAFKA_ID
    assert parse_uuid(KAFKA_ID_STANDARD.upper()) == KAFKA_ID
    assert parse_uuid(KAFKA_ID) == KAFKA_ID
    assert uuid_from_bytes(uuid.UUID(KAFKA_ID_STANDARD).bytes) == KAFKA_ID


def test_uuid_from_bytes_is_unpadded_urlsafe():
    raw = bytes([0xFB, 0xFF] + [0xFF] * 14)  # bytes that need '-' and '_' in base64url
    text = uuid_from_bytes(raw)
    assert len(text) == 22
    assert "=" not in text and "+" not in text and "/" not in text
    assert text.startswith("-_")
    assert parse_uuid(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "AAAAAAAAAAAAAAAAAAAAAB",  # last char carries non-zero padding bits
        "AAAAAAAAAAAAAAAAAAAAAR",
        "AAAAAAAAAAAAAAAAAAAAA_",
        KAFKA_ID[:-1] + "x",
    ],
)
def test_non_canonical_trailing_bits_rejected(text):
    # Each of these decodes to 16 bytes, but is not how those bytes are spelled.
    assert len(base64.urlsafe_b64decode(text + "==")) == 16
    with pytest.raises(InvalidUuid, match="canonical"):
        parse_uuid(text)


@pytest.mark.parametrize(
    "text",
    [
        "+" + KAFKA_ID[1:],  # standard-alphabet '+' instead of '-'
        "/" + KAFKA_ID[1:],  # standard-alphabet '/' instead of '_'
        KAFKA_ID[:20] + "==",  # padding inside the 22 characters
        KAFKA_ID[:21] + "é",  # non-ASCII
        KAFKA_ID[:10] + " " + KAFKA_ID[11:],  # whitespace b64decode would skip
        KAFKA_ID[:10] + "\n" + KAFKA_ID[11:],
        "!" * 22,
        "\x00" * 22,
    ],
)
def test_non_alphabet_22_char_text_rejected(text):
    assert len(text) == 22
    with pytest.raises(InvalidUuid):
        parse_uuid(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "A",
        KAFKA_ID[:21],
        KAFKA_ID + "A",
        KAFKA_ID + "==",
        KAFKA_ID_STANDARD[:35],
        KAFKA_ID_STANDARD + "0",
        KAFKA_ID_STANDARD.replace("-", ""),  # 32 hex digits
        "{" + KAFKA_ID_STANDARD + "}",
        "urn:uuid:" + KAFKA_ID_STANDARD,
        "x" * 1000,
    ],
)
def test_wrong_lengths_rejected(text):
    with pytest.raises(InvalidUuid) as info:
        parse_uuid(text)
    assert len(str(info.value)) < 200  # long input is cut, not echoed whole


@pytest.mark.parametrize(
    "text",
    [
        "7cf66fd5-506c-4459-a795-1be619c396fg",  # 'g' is not hex
        "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
        " " * 36,
    ],
)
def test_bad_36_char_text_rejected(text):
    assert len(text) == 36
    with pytest.raises(InvalidUuid):
        parse_uuid(text)


# Regression: parse_uuid once handed any 36-char text to uuid.UUID(), which strips
# every '-' and int()-parses the rest ('_' separators, Unicode digits).
@pytest.mark.parametrize(
    "text",
    [
        "7cf66fd5506c4459a7951be619c396f7----",  # hyphens at the end
        "----7cf66fd5506c4459a7951be619c396f7",
        "7cf66fd5-506c-4459-a795-1be619c39_f7",  # '_' as a digit separator
        "7cf66fd5-506c-4459-a795-1be619c3\u0669\u0666f7",  # Arabic-Indic digits
    ],
)
def test_non_standard_36_char_text_rejected(text):
    assert len(text) == 36
    with pytest.raises(InvalidUuid):
        parse_uuid(text)


@pytest.mark.parametrize(
    "value", [None, 0, 12345, 1.5, True, KAFKA_ID.encode(), bytearray(16), [KAFKA_ID], {}]
)
def test_non_strings_rejected(value):
    with pytest.raises(InvalidUuid, match=type(value).__name__):
        parse_uuid(value)


def test_invalid_uuid_is_a_value_error():
    assert issubclass(InvalidUuid, ValueError)


def test_random_uuid_is_canonical_and_never_reserved_nor_dash():
    seen = set()
    for _ in range(3000):
        text = random_uuid()
        assert len(text) == 22
        assert parse_uuid(text) == text
        assert text not in (ZERO_UUID, METADATA_TOPIC_ID)
        assert not text.startswith("-")
        seen.add(text)
    assert len(seen) == 3000


def test_random_uuid_retries_past_reserved_and_leading_dash(monkeypatch):
    good = bytes(range(1, 17))
    dash = b"\xf8" + bytes(15)  # first six bits 111110 -> '-'
    assert uuid_from_bytes(dash).startswith("-")
    draws = iter([bytes(16), bytes(15) + b"\x01", dash, good])
    calls = []

    def fake_urandom(n):
        calls.append(n)
        return next(draws)

    monkeypatch.setattr(uuids.os, "urandom", fake_urandom)
    assert random_uuid() == uuid_from_bytes(good)
    assert calls == [16, 16, 16, 16]


@settings(max_examples=200)
@given(st.binary(min_size=16, max_size=16))
def test_round_trip_over_random_bytes(raw):
    text = uuid_from_bytes(raw)
    assert len(text) == 22
    assert parse_uuid(text) == text
    assert base64.urlsafe_b64decode(text + "==") == raw
    standard = to_standard(text)
    assert standard == str(uuid.UUID(bytes=raw))
    assert len(standard) == 36
    assert parse_uuid(standard) == text
    assert parse_uuid(standard.upper()) == text


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_parse_uuid_raises_only_invalid_uuid(text):
    try:
        canonical = parse_uuid(text)
    except InvalidUuid:
        return
    # Anything accepted has one canonical spelling that parses to itself.
    assert len(canonical) == 22
    assert parse_uuid(canonical) == canonical


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@settings(max_examples=300)
@given(st.text(alphabet=B64URL + "+/= \n.", min_size=22, max_size=22))
def test_22_char_text_is_accepted_only_as_its_own_spelling(text):
    try:
        canonical = parse_uuid(text)
    except InvalidUuid:
        # Rejected text is either outside the alphabet or has non-zero padding bits.
        assert any(c not in B64URL for c in text) or text[-1] not in B64URL[::16]
        return
    assert canonical == text
    assert uuid_from_bytes(base64.urlsafe_b64decode(text + "==")) == text


def test_the_k8s_cluster_id_generator_never_starts_with_a_dash(monkeypatch):
    """k8s/make-secrets.py (standard library only) draws its own ids: one that
    begins with '-' could not be passed as ``--cluster-id <id>``."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "k8s" / "make-secrets.py"
    spec = importlib.util.spec_from_file_location("make_secrets", path)
    make_secrets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_secrets)
    dash, good = b"\xf8" + bytes(15), bytes(range(1, 17))
    draws = iter([dash, dash, good])
    monkeypatch.setattr(make_secrets.secrets, "token_bytes", lambda n: next(draws))
    assert make_secrets.kafka_uuid() == uuid_from_bytes(good)
    monkeypatch.undo()
    for _ in range(2000):
        text = make_secrets.kafka_uuid()
        assert parse_uuid(text) == text and not text.startswith("-")


@settings(max_examples=500)
@given(
    st.text(alphabet=B64URL + "+/= \n.\t", min_size=22, max_size=22)
    | st.text(min_size=22, max_size=22)
    | st.binary(min_size=16, max_size=16).map(uuid_from_bytes)
)
def test_the_one_match_agrees_with_decoding_and_re_encoding(text):
    """The speed seam: parse_uuid's match against the plain check it replaces."""
    try:
        parse_uuid(text)
        accepted = True
    except InvalidUuid:
        accepted = False
    assert accepted == uuids.canonical_by_round_trip(text)


@settings(max_examples=300)
@given(st.uuids(), st.booleans())
def test_the_standard_form_converts_as_uuid_does(value, upper):
    text = str(value).upper() if upper else str(value)
    assert parse_uuid(text) == uuid_from_bytes(value.bytes)
