"""What an operator reads when the index in Redis is not the library's
(tracker.masters.generation)."""

from __future__ import annotations

from tracker.masters.generation import IndexState


def _state(lib: str | None, put: int, index: str | None, have: int) -> IndexState:
    return IndexState(lib, put, index, have, has_works=True)


def test_a_lost_index_names_what_the_library_put_in_it_and_the_remedy():
    problem = _state("b1", 1, None, 0).problem
    assert problem is not None
    assert "the index is empty but the library put 1 posting in it" in problem
    assert "copytrack reindex" in problem
    problem = _state("b1", 2_500, "b1", 1).problem
    assert problem is not None
    assert "the index holds 1 posting but the library put 2,500 in it" in problem


def test_an_index_being_rebuilt_or_of_another_build_says_so():
    rebuilding = _state("b1", 10, None, 10).problem
    assert rebuilding is not None and "10 postings) has no generation" in rebuilding
    other = _state("b1", 10, "b2", 10).problem
    assert other is not None and "another copy of the index" in other
    assert _state("b1", 10, "b1", 10).problem is None
