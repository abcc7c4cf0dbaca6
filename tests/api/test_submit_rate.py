"""The token bucket of submits per API key (app/api/middleware/submit_rate.py), on a fixed clock."""

import pytest

from app.api.middleware.submit_rate import Bucket, SubmitRate, SubmitRateExceeded, take


def test_a_full_bucket_lets_a_submit_pass_and_takes_one_token_a_job():
    assert (Bucket(4.0, 10.0), 0.0) == take(Bucket(5.0, 10.0), 1, 10.0, 1.0, 5.0)
    assert (Bucket(2.0, 10.0), 0.0) == take(Bucket(5.0, 10.0), 3, 10.0, 1.0, 5.0)


def test_an_empty_bucket_refuses_and_says_how_long_until_a_token():
    bucket, wait = take(Bucket(0.25, 0.0), 1, 0.0, 0.5, 5.0)
    assert (Bucket(0.25, 0.0), 1.5) == (bucket, wait)


def test_a_refused_submit_costs_nothing():
    bucket, _ = take(Bucket(0.0, 0.0), 100, 1.0, 0.5, 5.0)
    assert Bucket(0.5, 1.0) == bucket


def test_the_bucket_refills_at_the_rate_up_to_the_burst():
    assert Bucket(2.0, 3.0) == take(Bucket(0.0, 0.0), 1, 3.0, 1.0, 5.0)[0]
    assert Bucket(4.0, 100.0) == take(Bucket(0.0, 0.0), 1, 100.0, 1.0, 5.0)[0]


def test_a_batch_larger_than_the_burst_passes_on_one_token_and_is_paid_back():
    bucket, wait = take(Bucket(1.0, 0.0), 1000, 0.0, 10.0, 5.0)
    assert (Bucket(-999.0, 0.0), 0.0) == (bucket, wait)
    assert 100.0 == take(bucket, 1, 0.0, 10.0, 5.0)[1]
    assert 0.0 == take(bucket, 1, 100.0, 10.0, 5.0)[1]


def test_a_clock_that_steps_back_refills_nothing():
    assert Bucket(0.5, 5.0) == take(Bucket(0.5, 10.0), 1, 5.0, 1.0, 5.0)[0]


class FakeSeconds:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_key_has_its_own_bucket_starting_full():
    clock = FakeSeconds()
    rate = SubmitRate(per_second=1.0, burst=2, clock=clock)
    rate.admit("a", 1)
    rate.admit("a", 1)
    with pytest.raises(SubmitRateExceeded) as refused:
        rate.admit("a", 1)
    rate.admit("b", 1)
    rate.admit(None, 2)
    assert 1 == refused.value.retry_after
    assert (
        "this API key is over its rate of submits (INGEST_KEY_SUBMITS_PER_SECOND: 1 per "
        "second); try again in 1 s"
    ) == str(refused.value)
    clock.now = 1.0
    rate.admit("a", 1)


def test_the_burst_defaults_to_one_seconds_worth_and_at_least_one_job():
    assert 20.0 == SubmitRate(per_second=20.0, burst=0).burst
    assert 1.0 == SubmitRate(per_second=0.1, burst=0).burst
    assert 7.0 == SubmitRate(per_second=20.0, burst=7).burst


def test_no_rate_set_counts_nothing():
    rate = SubmitRate(per_second=0.0, burst=0)
    for _ in range(1000):
        rate.admit("a", 1000)


def test_retry_after_is_whole_seconds_never_under_the_wait():
    assert 1 == SubmitRateExceeded(1.0, 0.01).retry_after
    assert 3 == SubmitRateExceeded(1.0, 2.2).retry_after
