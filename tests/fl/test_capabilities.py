"""Capabilities are declared, found through any stack of wrappers, and a member defined without its declaration is refused."""

from __future__ import annotations

import pytest

from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.capabilities import Capability, ClientSelection, PersonalModels, RunPlanning
from privaudit.fl.privacy.perturbation import NoPrivacy
from privaudit.papers.upcycled.algorithm import Upcycled


class Greeting(Capability):
    """A capability no wrapper in privaudit knows about (declared after every wrapper was written)."""

    def greeting(self) -> str:
        return "default"


class GreetingFedAvg(FedAvg, Greeting):
    def greeting(self) -> str:
        return "inner"


class GreetingWrapper(AlgorithmWrapper, Greeting):
    def greeting(self) -> str:
        return "wrapper"


def test_a_new_capability_of_the_inner_algorithm_is_seen_through_two_wrappers():
    inner = GreetingFedAvg()
    wrapped = Upcycled(NoPrivacy(inner))
    assert wrapped.capability(Greeting) is inner
    assert Greeting.of(wrapped).greeting() == "inner"


def test_a_wrapper_that_declares_a_capability_answers_for_it():
    wrapped = Upcycled(GreetingWrapper(GreetingFedAvg()))
    assert Greeting.of(wrapped).greeting() == "wrapper"


def test_an_undeclared_capability_gives_its_defaults():
    plain = Upcycled(NoPrivacy(FedAvg()))
    assert plain.capability(Greeting) is None and Greeting.of(plain).greeting() == "default"
    assert ClientSelection.of(plain).select_clients(1, None) is None and PersonalModels.of(plain).personal_states() == {}


def test_defining_a_capabilitys_member_without_declaring_it_is_refused():
    with pytest.raises(TypeError, match="select_clients of capability ClientSelection"):
        class _Undeclared(FedAvg):  # would be silently ignored by the round loop
            def select_clients(self, training_round, rng):
                return [0]

    with pytest.raises(TypeError, match="greeting of capability Greeting"):
        class _UndeclaredWrapper(AlgorithmWrapper):
            def greeting(self) -> str:
                return "lost"

    class _Declared(FedAvg, RunPlanning):
        def start_federation(self, config, ledger) -> None:
            pass

    assert _Declared().capability(RunPlanning) is not None
