"""The background calls' time limit follows what the endpoint has shown (issue 31)."""

from __future__ import annotations

from memora.pacing import AdaptiveTimeout


def test_a_slow_local_model_gets_the_time_it_shows_within_the_cap() -> None:
    limit = AdaptiveTimeout(floor=30, cap=300)
    assert limit.current == 30  # a fast hosted model keeps the configured limit
    limit.timed_out(30)
    assert limit.current == 60 and limit.last_timeout == 30
    limit.timed_out(60)
    assert limit.current == 120
    limit.took(100)  # SmolLM2 on two cores: ~100 s for the extraction call
    assert limit.current == 300 and limit.last_timeout is None
    limit.timed_out(300)
    assert limit.current == 300  # never past the cap


def test_the_limit_comes_back_down_when_the_endpoint_is_fast_again() -> None:
    limit = AdaptiveTimeout(floor=30, cap=300, window=3)
    limit.took(40)
    assert limit.current == 120
    for _ in range(3):
        limit.took(2)
    assert limit.current == 30
