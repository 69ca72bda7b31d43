import string

import pytest

from tests.tampering import tampered, tampered_link

BASE64 = string.ascii_letters + string.digits + "-_"


@pytest.mark.parametrize("last_two", ["AA", "AB", "BA", "zA", "A_"])
def test_tampering_changes_the_token_whatever_its_last_characters(last_two):
    token = "eyJzIjoxfQ:1tXyZq:" + "k" * 41 + last_two
    assert tampered(token) != token and len(tampered(token)) == len(token)


def test_every_base64_character_is_swapped_for_another():
    for char in BASE64:
        assert tampered("ab" + char + "c") != "ab" + char + "c"


def test_a_link_keeps_its_slash_and_loses_its_signature():
    link = "/join/abc/eyJzIjoxfQ:1tXyZq:sigAA/"
    forged = tampered_link(link)
    assert forged.endswith("/") and forged != link and forged.startswith("/join/abc/")
