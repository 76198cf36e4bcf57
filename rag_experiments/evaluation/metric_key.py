"""A metric's identity as a value (after ir_measures' ``Measure``): measure, cutoff, segment.

``MetricKey.parse("recall_at_5.doc_type.config")`` is ``MetricKey("recall", 5, Segment("doc_type",
"config"))``; ``mlflow_name`` prints it back byte for byte (MLflow names cannot hold ``@``),
``title`` is the label ``recall@5 (doc_type=config)``. :func:`headline` is the one column list; the
measures themselves are declared in :mod:`.measures`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .measures import REGISTRY

#: the quality measures a run logs, in table order (:data:`.measures.REGISTRY`)
MEASURES = tuple(REGISTRY)
#: the headline measures: the columns of summaries, compare, promote and the gate
HEADLINE = tuple(name for name, m in REGISTRY.items() if m.headline)
_NAME = re.compile(r"^(?P<metric>[^.]+?)(?:_at_(?P<k>\d+))?(?:\.(?P<segment>.+))?$")


@dataclass(frozen=True)
class Segment:
    """A slice of the cases: ``column`` (``kind`` or ``doc_type``) equals ``value``."""

    column: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Segment:  # exact, doc_type.config or doc_type=config
        is_dtype = text.startswith(("doc_type.", "doc_type="))
        return cls("doc_type", text[len("doc_type."):]) if is_dtype else cls("kind", text)

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
        if (m := _NAME.match(name)) is None:
            raise ValueError(f"not a metric name: {name!r}")
        k, seg = m.group("k"), m.group("segment")
        return cls(m.group("metric"), k and int(k), seg and Segment.parse(seg))

    @property
    def column(self) -> str:  # the overall name, a per-case table column: recall_at_5
        return self.metric if self.k is None else f"{self.metric}_at_{self.k}"

    @property
    def mlflow_name(self) -> str:
        return self.column if self.segment is None else f"{self.column}.{self.segment.suffix}"

    @property
    def title(self) -> str:
        return metric_title(self.column) + ("" if self.segment is None else f" ({self.segment.title})")

    def on(self, segment: Segment | None) -> MetricKey:
        return replace(self, segment=segment)


def metric_title(name: str) -> str:
    """recall_at_5 -> recall@5 (MLflow names cannot contain '@'; tables can)."""
    return name.replace("_at_", "@")


def headline(ks, mrr_k, ndcg_k) -> list[MetricKey]:
    """The headline measures at their cutoffs (recall@k for each k, then mrr and ndcg): the
    columns of summaries, compare, promote, gate."""
    cutoffs = {"ks": tuple(ks), "mrr_k": (mrr_k,), "ndcg_k": (ndcg_k,)}
    return [MetricKey(name, int(k)) for name in HEADLINE for k in cutoffs[REGISTRY[name].cutoff]]


def segment_groups(per_case) -> list:
    """(None, all cases), then (segment, cases) per query kind and per doc type of a per-case table."""
    groups: list = [(None, per_case)]
    for column in ("kind", "doc_type"):
        groups += [(Segment(column, str(v)), g) for v, g in per_case.groupby(column)]
    return groups


def by_segment(per_case, names) -> list:
    """(key, per-case values) of every metric in ``names``, overall then per segment (as logged)."""
    groups = segment_groups(per_case)
    return [(MetricKey.parse(n).on(seg), g[n]) for n in names for seg, g in groups]
