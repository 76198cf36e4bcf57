"""A metric's identity as a value: measure, cutoff and segment (after ir_measures' ``Measure``).

``MetricKey.parse("recall_at_5.doc_type.config")`` is ``MetricKey("recall", 5, Segment("doc_type",
"config"))``; its ``mlflow_name`` gives the string back byte for byte (MLflow names cannot hold
``@``), ``title`` is the human label (``recall@5 (doc_type=config)``). Keys are frozen and
hashable. :func:`headline` is the one list of table columns; every place that names a metric
builds or parses it here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

#: the quality measures a run logs, in table order; the first three are the headline columns
MEASURES = ("recall", "mrr", "ndcg", "hit", "judged")
HEADLINE = MEASURES[:3]
_NAME = re.compile(r"^(?P<metric>[^.]+?)(?:_at_(?P<k>\d+))?(?:\.(?P<segment>.+))?$")


@dataclass(frozen=True)
class Segment:
    """A slice of the cases: ``column`` (``kind`` or ``doc_type``) equals ``value``."""

    column: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Segment:
        """``exact`` (a query kind) or ``doc_type.config`` (also ``doc_type=config``)."""
        if text.startswith(("doc_type.", "doc_type=")):
            return cls("doc_type", text[len("doc_type."):])
        return cls("kind", text)

    @property
    def suffix(self) -> str:
        return self.value if self.column == "kind" else f"doc_type.{self.value}"

    @property
    def title(self) -> str:
        return self.value if self.column == "kind" else f"doc_type={self.value}"


@dataclass(frozen=True)
class MetricKey:
    metric: str  # recall, mrr, ndcg, hit, judged (or any logged name without a cutoff)
    k: int | None = None
    segment: Segment | None = None

    @classmethod
    def parse(cls, name: str) -> MetricKey:
        m = _NAME.match(name)
        if m is None:
            raise ValueError(f"not a metric name: {name!r}")
        k, seg = m.group("k"), m.group("segment")
        return cls(m.group("metric"), None if k is None else int(k), None if seg is None else Segment.parse(seg))

    @property
    def column(self) -> str:
        """The per-case table column (the overall name): ``recall_at_5``."""
        return self.metric if self.k is None else f"{self.metric}_at_{self.k}"

    @property
    def mlflow_name(self) -> str:
        return self.column if self.segment is None else f"{self.column}.{self.segment.suffix}"

    @property
    def overall(self) -> MetricKey:
        return replace(self, segment=None)

    def on(self, segment: Segment | None) -> MetricKey:
        return replace(self, segment=segment)

    @property
    def is_quality(self) -> bool:
        return self.metric in MEASURES and self.k is not None

    @property
    def title(self) -> str:
        base = self.metric if self.k is None else f"{self.metric}@{self.k}"
        return base if self.segment is None else f"{base} ({self.segment.title})"

    def __str__(self) -> str:
        return self.mlflow_name


def is_quality(name) -> bool:
    """A quality measure's overall name (``recall_at_5``, ``judged_at_10``): a per-case column."""
    key = MetricKey.parse(str(name))
    return key.is_quality and key.segment is None


def metric_title(name: str) -> str:
    """recall_at_5 -> recall@5 (MLflow names cannot contain '@'; tables can)."""
    return name.replace("_at_", "@")


def headline(ks, mrr_k, ndcg_k) -> list[MetricKey]:
    """recall@k for each k, then mrr and ndcg at their cutoffs: the columns of summaries, compare,
    promote and gate."""
    return [MetricKey("recall", int(k)) for k in ks] + [MetricKey("mrr", int(mrr_k)), MetricKey("ndcg", int(ndcg_k))]


def headline_order(names) -> list[str]:
    """The headline names among ``names`` (logged names, recall/mrr/ndcg with a cutoff, no
    segment), in table order: recall, mrr, ndcg; by k."""
    keys = [MetricKey.parse(n) for n in names if "." not in n]
    keys = [k for k in keys if k.metric in HEADLINE and k.k is not None]
    return [k.mlflow_name for k in sorted(keys, key=lambda k: (HEADLINE.index(k.metric), k.k))]


def segment_groups(per_case) -> list:
    """(None, all cases), then (segment, cases) per query kind and per doc type of a per-case table."""
    groups: list = [(None, per_case)]
    for column in ("kind", "doc_type"):
        groups += [(Segment(column, str(v)), g) for v, g in per_case.groupby(column)]
    return groups
