"""engine/sized_cache.py: a least-recently-used cache bounded by what its entries weigh."""

from perfmodel.engine.sized_cache import sized_cache


def test_it_drops_the_least_recently_used_past_its_budget_and_keeps_none_too_heavy():
    calls: list[int] = []

    @sized_cache(10, lambda n: n)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    assert [square(n) for n in (3, 4, 3)] == [9, 16, 9]  # 3 and 4 kept: 7 of 10
    assert calls == [3, 4] and square.cache_info()[:2] == (1, 2)
    square(5)  # 12 of 10: the least recently used, 4, goes
    assert square.cache_info().size == 8 and square.cache_info().entries == 2
    square(3)
    square(4)
    assert calls == [3, 4, 5, 4]
    square(11)  # heavier than the budget alone: computed, not kept
    square(11)
    assert calls[-2:] == [11, 11] and square.cache_info().size <= 10
    square.cache_clear()
    assert square.cache_info() == (0, 0, 0, 0)
