"""The user tag: the versioned JSON a malleable job carries in its Slurm comment."""

from __future__ import annotations

import json

import pytest

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


def test_the_owner_may_name_himself() -> None:
    assert tags.parse('{"malleable_job":1,"min":1,"max":4,"user":"bob"}', "bob").max_size == 4


def test_internal_tags_and_plain_comments_are_not_user_tags() -> None:
    assert not tags.looks_like_tag('{"malleable":1,"run":"3f2a","job":"wm-7"}')
    assert not tags.looks_like_tag("my comment")
    assert tags.looks_like_tag('{"malleable_job":1}')
