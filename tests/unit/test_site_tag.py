"""The user tag: the versioned JSON a malleable job carries in its Slurm comment, and its
compact form in an OAR job name."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malleable.site import tag as tags


def test_encoded_tag_parses_back_and_has_no_space() -> None:
    tag = tags.UserTag(2, 8, 4, "jacobi", True, "9f3e21c4")
    text = tags.encode(tag, "alice")
    assert " " not in text
    assert json.loads(text)["malleable_job"] == 1
    assert tags.parse(text, "alice") == tag


def test_minimal_tag_from_plain_sbatch() -> None:
    assert tags.parse('{"malleable_job":1,"min":1,"max":4}', "bob") == tags.UserTag(1, 4)


BAD = {
    "huge": '{"malleable_job":1,"min":1,"max":4,"app":"' + "x" * 2000 + '"}',
    "not json": '{"malleable_job":1,"min":1,',
    "array": '[{"malleable_job":1}]',
    "string": '"malleable_job"',
    "deep": "{" + '"malleable_job":' + "[" * 5000 + "]" * 5000 + "}",
    "version 2": '{"malleable_job":2,"min":1,"max":4}',
    "version true": '{"malleable_job":true,"min":1,"max":4}',
    "version float": '{"malleable_job":1.0,"min":1,"max":4}',
    "version 1e0": '{"malleable_job":1e0,"min":1,"max":4}',
    "version string": '{"malleable_job":"1","min":1,"max":4}',
    "negative min": '{"malleable_job":1,"min":-3,"max":4}',
    "zero max": '{"malleable_job":1,"min":0,"max":0}',
    "min above max": '{"malleable_job":1,"min":6,"max":4}',
    "huge max": '{"malleable_job":1,"min":1,"max":10000000000}',
    "float min": '{"malleable_job":1,"min":1.5,"max":4}',
    "nan min": '{"malleable_job":1,"min":NaN,"max":4}',
    "bool max": '{"malleable_job":1,"min":1,"max":true}',
    "missing max": '{"malleable_job":1,"min":1}',
    "preferred outside": '{"malleable_job":1,"min":1,"max":4,"preferred":9}',
    "unknown key": '{"malleable_job":1,"min":1,"max":4,"run":"3f2a"}',
    "another user's job id": '{"malleable_job":1,"min":1,"max":4,"job":"alice:1"}',
    "claims another user": '{"malleable_job":1,"min":1,"max":4,"user":"alice"}',
    "bad sub": '{"malleable_job":1,"min":1,"max":4,"sub":"../../etc"}',
    "bad app": '{"malleable_job":1,"min":1,"max":4,"app":"a b;rm"}',
    "mpi not bool": '{"malleable_job":1,"min":1,"max":4,"mpi":"yes"}',
}


@pytest.mark.parametrize("comment", BAD.values(), ids=BAD.keys())
def test_bad_tags_are_refused_with_a_short_reason(comment: str) -> None:
    with pytest.raises(tags.BadTag) as caught:
        tags.parse(comment, "bob")
    assert 0 < len(str(caught.value)) < 200
    assert "\n" not in str(caught.value)


def test_the_number_of_copies_is_announced_with_the_submission_id() -> None:
    tag = tags.UserTag(1, 4, sub="9f3e21c4", copies=2)
    text = tags.encode(tag, "alice")
    assert text == ('{"malleable_job":1,"min":1,"max":4,"sub":"9f3e21c4","copies":2,'
                    '"user":"alice"}')
    assert tags.parse(text, "alice") == tag
    # a tag without it (every tag written before the key existed) still parses
    old = tags.parse('{"malleable_job":1,"min":1,"max":4,"sub":"9f3e21c4"}', "alice")
    assert old.copies is None and old.sub == "9f3e21c4"
    top = tags.UserTag(1, 4, sub="s", copies=tags.MAX_COPIES)
    assert tags.parse(tags.encode(top), "bob") == top


BAD_COPIES = {
    '{"malleable_job":1,"min":1,"max":4,"copies":2}':
        "copies needs sub (the submission id its copies share)",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":1}':
        "copies must be in [2, 32], not 1",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":0}':
        "copies must be in [2, 32], not 0",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":-2}':
        "copies must be in [2, 32], not -2",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":33}':
        "copies must be in [2, 32], not 33",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":"2"}':
        "copies must be an integer, not str",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":2.0}':
        "copies must be an integer, not float",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":true}':
        "copies must be an integer, not bool",
    '{"malleable_job":1,"min":1,"max":4,"sub":"s","copies":null}': "copies is missing",
}


@pytest.mark.parametrize(("comment", "reason"), BAD_COPIES.items())
def test_bad_numbers_of_copies_are_refused_saying_why(comment: str, reason: str) -> None:
    with pytest.raises(tags.BadTag) as caught:
        tags.parse(comment, "bob")
    assert str(caught.value) == reason


def test_the_owner_may_name_himself() -> None:
    assert tags.parse('{"malleable_job":1,"min":1,"max":4,"user":"bob"}', "bob").max_size == 4


def test_internal_tags_and_plain_comments_are_not_user_tags() -> None:
    assert not tags.looks_like_tag('{"malleable":1,"run":"3f2a","job":"wm-7"}')
    assert not tags.looks_like_tag("my comment")
    assert tags.looks_like_tag('{"malleable_job":1}')
    # a claim that is not a JSON object is parsed (and refused, logged once), not skipped
    assert tags.looks_like_tag('[{"malleable_job":1,"min":1,"max":4}]')
    assert tags.looks_like_tag(' ["x", {"malleable_job":1}]')
    assert tags.looks_like_tag('"malleable_job"')
    assert not tags.looks_like_tag("see malleable_job in the docs")


# ---------------------------------------------------------------- OAR's compact form

def test_compact_tag_is_the_documented_form_and_parses_back() -> None:
    tag = tags.UserTag(2, 8, 4, "jacobi", True, "9f3e21c4")
    name = tags.encode_oar(tag)
    assert name == "m1;min=2;max=8;pref=4;app=jacobi;mpi;sub=9f3e21c4"
    assert tags.parse_oar(name) == tag
    assert tags.looks_like_oar_tag(name)


def test_minimal_compact_tag_from_plain_oarsub_in_any_order() -> None:
    assert tags.encode_oar(tags.UserTag(1, 4)) == "m1;min=1;max=4"
    assert tags.parse_oar("m1;max=4;sub=ab;min=1;mpi") == tags.UserTag(1, 4, mpi=True, sub="ab")


def test_compact_tag_announces_its_copies_as_n() -> None:
    tag = tags.UserTag(1, 4, sub="9f3e21c4", copies=3)
    name = tags.encode_oar(tag)
    assert name == "m1;min=1;max=4;sub=9f3e21c4;n=3"
    assert tags.parse_oar(name) == tag
    assert tags.parse_oar("m1;n=2;max=4;sub=ab;min=1") == tags.UserTag(1, 4, sub="ab", copies=2)


BAD_OAR_COPIES = {
    "m1;min=1;max=4;n=2": "copies needs sub (the submission id its copies share)",
    "m1;min=1;max=4;sub=s;n=1": "copies must be in [2, 32], not 1",
    "m1;min=1;max=4;sub=s;n=0": "copies must be in [2, 32], not 0",
    "m1;min=1;max=4;sub=s;n=33": "copies must be in [2, 32], not 33",
    "m1;min=1;max=4;sub=s;n=-2": "n must be a decimal integer, not '-2'",
    "m1;min=1;max=4;sub=s;n=02": "n must be a decimal integer, not '02'",
    "m1;min=1;max=4;sub=s;n=": "n must be a decimal integer, not ''",
    "m1;min=1;max=4;sub=s;n": "n needs a value",
    "m1;min=1;max=4;sub=s;n=2;n=3": "n is given twice",
    "m1;min=1;max=4;sub=s;copies=2": "unknown key 'copies'; valid: min, max, pref, app, mpi, "
                                     "sub, n",
}


@pytest.mark.parametrize(("name", "reason"), BAD_OAR_COPIES.items())
def test_bad_compact_numbers_of_copies_are_refused_saying_why(name: str, reason: str) -> None:
    with pytest.raises(tags.BadTag) as caught:
        tags.parse_oar(name)
    assert str(caught.value) == reason


BAD_OAR = {
    "too long": "m1;min=1;max=4;app=" + "x" * 90,
    "no parts": "m1",
    "empty part": "m1;min=1;;max=4",
    "trailing separator": "m1;min=1;max=4;",
    "version 2": "m2;min=1;max=4",
    "version not first": "min=1;m1;max=4",
    "json tag": '{"malleable_job":1,"min":1,"max":4}',
    "negative min": "m1;min=-3;max=4",
    "plus sign": "m1;min=+1;max=4",
    "leading zero": "m1;min=01;max=4",
    "spaces": "m1;min= 1;max=4",
    "underscore digits": "m1;min=1;max=1_0",
    "unicode digits": "m1;min=\uff11;max=4",
    "float": "m1;min=1.5;max=4",
    "zero max": "m1;min=0;max=0",
    "min above max": "m1;min=6;max=4",
    "huge max": "m1;min=1;max=10000000000",
    "digits without end": "m1;min=1;max=" + "9" * 40,
    "missing max": "m1;min=1",
    "empty value": "m1;min=;max=4",
    "pref outside": "m1;min=1;max=4;pref=9",
    "long key name": "m1;min=1;max=4;preferred=2",
    "unknown key": "m1;min=1;max=4;run=3f2a",
    "user key": "m1;min=1;max=4;user=alice",
    "repeated key": "m1;min=1;max=4;max=8",
    "repeated flag": "m1;min=1;max=4;mpi;mpi",
    "mpi with value": "m1;min=1;max=4;mpi=true",
    "key without value": "m1;min=1;max",
    "bad sub": "m1;min=1;max=4;sub=../../etc",
    "bad app": "m1;min=1;max=4;app=a b",
    "app with separator": "m1;min=1;max=4;app=a=b",
}


@pytest.mark.parametrize("name", BAD_OAR.values(), ids=BAD_OAR.keys())
def test_bad_compact_tags_are_refused_with_a_short_reason(name: str) -> None:
    with pytest.raises(tags.BadTag) as caught:
        tags.parse_oar(name)
    assert 0 < len(str(caught.value)) < 200
    assert "\n" not in str(caught.value)


def test_only_names_that_claim_a_version_look_like_compact_tags() -> None:
    assert tags.looks_like_oar_tag("m2;min=1")
    assert tags.looks_like_oar_tag("m1;garbage")
    for name in ("m.rs1a2b.a", "m.rs1a2b.a+", "m1", "bg", "", "local", "M1;min=1",
                 "xm1;min=1", "m;min=1"):
        assert not tags.looks_like_oar_tag(name), name


def test_a_tag_too_long_for_oar_names_the_parts_to_shorten() -> None:
    tag = tags.UserTag(2, 8, 4, "a" * 64, True, "s" * 32)
    with pytest.raises(tags.TagTooLong) as caught:
        tags.encode_oar(tag)
    error = caught.value
    assert error.length == len("m1;min=2;max=8;pref=4;app=;mpi;sub=") + 96 > 100
    assert error.over == error.length - 100
    assert error.parts == {"app": 64, "sub": 32}
    assert str(error) == (f"the OAR job name would be {error.length} characters, over OAR's "
                          f"100: shorten app (64 characters) or sub (32 characters) by "
                          f"{error.over}")
    # the JSON form of the same tag is fine (Slurm's comment is long enough)
    assert tags.parse(tags.encode(tag, "alice"), "alice") == tag


def test_the_longest_fixed_parts_leave_room_for_the_free_ones() -> None:
    big = tags.MAX_NODES
    longest = tags.encode_oar(tags.UserTag(big, big, big, mpi=True))
    assert len(longest) == 40
    name = tags.encode_oar(tags.UserTag(big, big, big, "a" * 49, True, "s"))
    assert len(name) == 100 and tags.parse_oar(name).app == "a" * 49
    with pytest.raises(tags.TagTooLong) as caught:
        tags.encode_oar(tags.UserTag(big, big, big, "a" * 49, True, "ss"))
    assert caught.value.over == 1
    assert str(caught.value).endswith("shorten app (49 characters) or sub (2 characters) by 1")
    # the number of copies takes at most 5 more (";n=32"), with a sub of 8 (malleable submit)
    most = tags.encode_oar(tags.UserTag(big, big, big, mpi=True, sub="s" * 8,
                                        copies=tags.MAX_COPIES))
    assert len(most) == 40 + len(";sub=ssssssss") + 5 == 58


def test_an_invalid_tag_is_refused_before_its_length() -> None:
    with pytest.raises(tags.BadTag) as caught:
        tags.encode_oar(tags.UserTag(3, 2, app="a" * 64, sub="s" * 32))
    assert not isinstance(caught.value, tags.TagTooLong)
    assert "min 3 is above max 2" in str(caught.value)


_NAMES = st.from_regex(r"[A-Za-z0-9._-]{1,64}", fullmatch=True)
_SUBS = st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True)


@st.composite
def valid_tags(draw: st.DrawFn) -> tags.UserTag:
    low = draw(st.integers(1, tags.MAX_NODES))
    high = draw(st.integers(low, tags.MAX_NODES))
    preferred = draw(st.none() | st.integers(low, high))
    sub = draw(st.none() | _SUBS)
    copies = draw(st.none() | st.integers(2, tags.MAX_COPIES)) if sub is not None else None
    return tags.UserTag(low, high, preferred, draw(_NAMES), draw(st.booleans()), sub, copies)


@given(valid_tags())
@settings(max_examples=400, deadline=None)
def test_every_valid_tag_round_trips_or_is_too_long_for_oar(tag: tags.UserTag) -> None:
    assert tags.parse(tags.encode(tag, "alice"), "alice") == tag
    try:
        name = tags.encode_oar(tag)
    except tags.TagTooLong as exc:
        assert exc.length > tags.OAR_MAX_LENGTH and exc.parts
        return
    assert len(name) <= tags.OAR_MAX_LENGTH and " " not in name
    assert tags.looks_like_oar_tag(name)
    assert tags.parse_oar(name) == tag


@given(st.text(max_size=120))
@settings(max_examples=400, deadline=None)
def test_any_name_parses_or_is_refused_with_bad_tag(name: str) -> None:
    try:
        tag = tags.parse_oar(name)
    except tags.BadTag:
        return
    assert tags.encode_oar(tag) is not None


@given(st.lists(st.sampled_from(["min=1", "max=9", "pref=3", "app=x", "mpi", "sub=q",
                                 "min=2", "bogus", "", "max=", "mpi=1"]), max_size=8))
@settings(max_examples=400, deadline=None)
def test_shuffled_parts_parse_exactly_when_each_key_is_once_and_valid(parts: list[str]) -> None:
    name = ";".join(["m1", *parts])
    keys = [p.partition("=")[0] for p in parts]
    valid = (len(set(keys)) == len(keys) and {"min", "max"} <= set(keys)
             and not {"bogus", "", "max=", "mpi=1"} & set(parts))
    if valid:
        tag = tags.parse_oar(name)
        assert tags.parse_oar(tags.encode_oar(tag)) == tag
    else:
        with pytest.raises(tags.BadTag):
            tags.parse_oar(name)
