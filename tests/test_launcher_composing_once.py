"""The default sweep launcher composes once per set of group choices and applies each point's
value overrides to a copy: every point's config must equal what Hydra's own
``load_sweep_config`` composes from scratch (hydra node included), and bad values must fail the
same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from hydra_plugins.rag_experiments_launchers.basic_once import compose_point
from rag_experiments.config import register_schema

CONF = Path(__file__).resolve().parent.parent / "conf"

POINTS = [
    ["fusion.rrf_k=5", "fusion.keyword_weight=0.5"],
    ["fusion.rrf_k=95", "fusion.keyword_weight=1.5"],  # same composition as the first, other values
    ["retrieval=keyword", "retrieval.keyword.k1=0.6", "retrieval.keyword.b=0.3"],
    ["objective=ndcg_at_10", "fusion.rrf_k=7"],
    ["db.url=postgresql://u:pw@h/db", "fusion.rrf_k=9"],  # excluded from override_dirname
    ["fusion.rrf_k=11", "retrieval.filter.doc_types=[reference,config]"],
    ["+fusion.extra=1", "fusion.rrf_k=3"],  # an append: composed in full
    ["eval.ks=[5,10]", "chunking=fixed"],
]


@pytest.fixture()
def hydra_loader():
    register_schema()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", overrides=["fusion.rrf_k=1,2"], run_mode=RunMode.MULTIRUN)
        yield loader, master
    GlobalHydra.instance().clear()


def _plain(cfg):
    return OmegaConf.to_container(cfg, resolve=False)


def test_each_point_equals_hydras_own_composition(hydra_loader):
    loader, master = hydra_loader
    composed: dict = {}
    ours = []
    for point in POINTS:
        try:
            theirs = loader.load_sweep_config(master, list(point))
        except Exception as exc:  # noqa: BLE001 - then ours must fail alike
            with pytest.raises(type(exc)):
                compose_point(loader, master, point, composed)
            continue
        mine = compose_point(loader, master, point, composed)
        assert _plain(mine) == _plain(theirs), point
        # the preflight's variant: the same application config, without the hydra node
        app = _plain(compose_point(loader, master, point, composed, app_only=True))
        assert app == {k: v for k, v in _plain(theirs).items() if k != "hydra"}, point
        assert list(mine.hydra.overrides.task) == point
        ours.append((point, _plain(mine)))
    # a shared composition is copied, never changed: composing again gives the same configs
    assert len(composed) >= 2
    for point, first in ours:
        assert _plain(compose_point(loader, master, point, composed)) == first
    assert "pw" not in str(_plain(compose_point(loader, master, POINTS[4], composed))["hydra"]["job"]
                           ["override_dirname"])


@pytest.mark.parametrize("point", [["fusion.rrf_k=abc"], ["fusion.rrfk=3", "fusion.rrf_k=3"],
                                   ["retrieval.keyword.k1=x", "fusion.rrf_k=3"]])
def test_bad_values_fail_as_in_hydra(hydra_loader, point):
    loader, master = hydra_loader
    with pytest.raises(Exception) as theirs:
        loader.load_sweep_config(master, list(point))
    for app_only in (False, True):
        with pytest.raises(type(theirs.value)) as mine:
            compose_point(loader, master, point, {}, app_only=app_only)
        assert str(mine.value).splitlines()[0] == str(theirs.value).splitlines()[0]
