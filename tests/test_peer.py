"""The strong winnowing peer the scale benchmark compares copytrack against finds a copied
text and leaves an unrelated one alone, with its boilerplate cut."""

from __future__ import annotations

import numpy as np

from benchmarks.winnowing_peer import MAX_OWNERS, StrongWinnowingIndex, WinnowingIndex, winnowed

WORK = (
    "春天来了，河边的柳树发出了嫩绿的新芽，孩子们在田野里放风筝，老人们坐在村口的大树下"
    "聊着今年的收成。镇上的集市比往年热闹，卖菜的农民天不亮就挑着担子赶来，街角的小吃摊"
    "飘出阵阵香气。学校新修了操场，放学后总有一群少年在那里踢球，直到天黑才肯回家。"
)
OTHER = (
    "北京时间昨晚，国家统计局发布了上季度的经济数据，工业增加值同比增长，消费市场持续回暖，"
    "专家认为下半年出口形势仍存在不确定性，需要进一步扩大内需，稳定就业，加快推进科技创新"
    "和产业升级，同时加强对中小企业的金融支持，防范化解重点领域风险。"
)
UNRELATED = (
    "深海探测器在太平洋西部的海沟底部发现了一种从未记录过的发光生物，科研人员将样本带回"
    "实验室，准备用基因测序的方法研究它在高压黑暗环境中生存的机制，相关论文预计明年发表。"
)


def _index(cls: type[WinnowingIndex], texts: list[str]) -> WinnowingIndex:
    index = cls()
    for text in texts:
        index.add(text)
    index.freeze()
    return index


def test_finds_the_copied_work_and_not_an_unrelated_text() -> None:
    index = _index(StrongWinnowingIndex, [OTHER, WORK])
    copied = "转载：" + WORK[10:120] + "（完）"
    assert index.match(copied) == [1]
    assert index.match(UNRELATED) == []
    works, score = index.scores(WORK)
    assert works.tolist() == [1] and score[0] == 1.0


def test_agrees_with_the_weak_peers_lookup_on_what_both_keep() -> None:
    index = _index(StrongWinnowingIndex, [OTHER, WORK, WORK + OTHER])
    weak = _index(WinnowingIndex, [OTHER, WORK, WORK + OTHER])
    text = WORK[:90] + OTHER[20:100]
    works, score = index.scores(text)
    hashes = winnowed(text)
    shared = {
        w: len(np.intersect1d(hashes, winnowed(t)))
        for w, t in enumerate([OTHER, WORK, WORK + OTHER])
    }
    assert works.tolist() == sorted(w for w, n in shared.items() if n >= 2)
    for w, s in zip(works.tolist(), score.tolist(), strict=True):
        assert s == shared[w] / min(len(hashes), index.sizes[w])
    # The weak peer's shared counts are the same lookups, gathered hash by hash.
    assert set(weak.match(text)) <= set(works.tolist())


def test_drops_hashes_more_than_max_owners_works_hold() -> None:
    # A footer every work carries says nothing of which work a page copies.
    footer = OTHER
    few = _index(StrongWinnowingIndex, [footer + WORK[:n] for n in range(MAX_OWNERS)])
    assert len(few.match(footer)) == MAX_OWNERS
    many = _index(StrongWinnowingIndex, [footer + WORK[:n] for n in range(MAX_OWNERS + 1)])
    assert many.match(footer) == []
