"""Job ids: time-ordered UUIDs (`new_job_id`), and the CLI's short form of them."""

import time
import uuid

import pytest

from app.store.tables import is_job_id, new_job_id
from app.text.wording import SHORT_ID, distinct_prefix


def milliseconds(job_id: str) -> int:
    """The time an id carries: its first 48 bits."""
    return int(job_id.replace("-", "")[:12], 16)


def test_an_id_is_a_uuid_of_version_7_carrying_when_it_was_made():
    before = time.time_ns() // 1_000_000
    job_id = new_job_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(job_id)
    assert (7, uuid.RFC_4122) == (parsed.version, parsed.variant)
    assert str(parsed) == job_id and is_job_id(job_id)
    assert before <= milliseconds(job_id) <= after


def test_ids_made_later_sort_after(monkeypatch: pytest.MonkeyPatch):
    """Each id sorts after every id made a millisecond or more before it, as text too (the
    primary key's order): made in order over 2**48 ms, they come out sorted."""
    made = []
    for ms in [1, 2, 255, 256, 65_535, 65_536, 1_800_000_000_000, 2**48 - 1]:
        monkeypatch.setattr(time, "time_ns", lambda ms=ms: ms * 1_000_000 + 999_999)
        made += [new_job_id() for _ in range(20)]
        assert {ms} == {milliseconds(job_id) for job_id in made[-20:]}
    runs = [sorted(made[i : i + 20]) for i in range(0, len(made), 20)]
    assert sorted(made) == [job_id for run in runs for job_id in run]


def test_ids_of_one_millisecond_differ_from_their_16th_character(
    monkeypatch: pytest.MonkeyPatch,
):
    """Random below the millisecond, not a counter: ids made together share the time and
    the version (15 characters) and then differ, so the CLI can show them short."""
    monkeypatch.setattr(time, "time_ns", lambda: 1_800_000_000_000_000_000)
    made = [new_job_id() for _ in range(1000)]
    assert 1000 == len(set(made))
    assert {"01a3185c-5000-7"} == {job_id[:15] for job_id in made}
    assert len({job_id[15] for job_id in made}) == 16
    for batch in (made[:50], made[50:100]):
        assert 16 <= distinct_prefix(batch) <= 22
    assert all(uuid.UUID(job_id).variant == uuid.RFC_4122 for job_id in made)


@pytest.mark.parametrize(
    ("ids", "length"),
    [
        ([], SHORT_ID),
        (["01a3185c-5000-7abc-8000-000000000000"], SHORT_ID),
        (["0123abcd-x", "0123abce-x"], SHORT_ID),
        (["0123abcd-1", "0123abcd-2"], 10),
        (["0123abcd-5000-7abc", "0123abcd-5000-7abd", "ffffffff-0"], 18),
        (["0123abcd-5000-7abc", "0123abcd-5000-7abc"], SHORT_ID),  # the same id twice
        (["0123abcd-5000-7abc", "0123abcd-5000-7abc", "0123abcd-5001"], 13),
    ],
)
def test_the_short_form_is_as_long_as_tells_the_ids_apart(ids: list[str], length: int):
    """The CLI shows `distinct_prefix(ids)` characters of each id: never fewer than 8, and
    one past the longest start two different ids share."""
    assert length == distinct_prefix(ids)
    assert distinct_prefix(list(reversed(ids))) == length
