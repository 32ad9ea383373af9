"""Stateful model test of FUNCTION libraries through the engine (LOAD [REPLACE], DELETE,
FLUSH, DUMP/RESTORE with each policy, FCALL), against a plain model: library name -> the
function names it registers. Libraries are drawn from a few names and function sets that
overlap, so collisions (another library's function, an existing library) are common; after
every step the registry's ``check_invariants()`` runs and FUNCTION LIST matches the model."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.unit.conftest import Harness

LIBRARIES = st.sampled_from(["a", "b", "c"])
FUNCTIONS = st.lists(st.sampled_from(["f", "g", "h", "k"]), min_size=0, max_size=3, unique=True)


def code(library: str, functions: list[str]) -> str:
    lines = [f"#!lua name={library}"]
    lines += [
        f"redis.register_function('{f}', function() return '{library}.{f}' end)" for f in functions
    ]
    return "\n".join(lines) + "\n"


class FunctionLibraries(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.c = self.h.client()
        self.model: dict[str, list[str]] = {}
        self.dumps: list[tuple[bytes, dict[str, list[str]]]] = []

    def call(self, *args: Any) -> Any:
        return self.h.call(self.c, *args)

    def owner(self, function: str) -> str | None:
        return next((lib for lib, fs in self.model.items() if function in fs), None)

    def can_add(self, library: str, functions: list[str], replace: bool) -> bool:
        if library in self.model and not replace:
            return False
        return all(self.owner(f) in (None, library) for f in functions)

    @rule(library=LIBRARIES, functions=FUNCTIONS, replace=st.booleans())
    def load(self, library: str, functions: list[str], replace: bool) -> None:
        args = ["FUNCTION", "LOAD", *(["REPLACE"] if replace else []), code(library, functions)]
        reply = self.call(*args)
        if library in self.model and not replace:
            assert str(reply) == f"ERR Library '{library}' already exists"
        elif not functions:
            assert str(reply) == "ERR No functions registered"
        elif not self.can_add(library, functions, replace):
            assert str(reply).startswith("ERR Function ") and "already exists" in str(reply)
        else:
            assert reply == library.encode()
            self.model[library] = functions

    @rule(library=LIBRARIES)
    def delete(self, library: str) -> None:
        reply = self.call("FUNCTION", "DELETE", library)
        if library in self.model:
            assert reply == b"OK"
            del self.model[library]
        else:
            assert str(reply) == "ERR Library not found"

    @rule()
    def flush(self) -> None:
        assert self.call("FUNCTION", "FLUSH") == b"OK"
        self.model.clear()

    @rule()
    def dump(self) -> None:
        self.dumps.append(
            (self.call("FUNCTION", "DUMP"), {k: list(v) for k, v in self.model.items()})
        )

    @rule(data=st.data(), policy=st.sampled_from(["APPEND", "REPLACE", "FLUSH"]))
    def restore(self, data: st.DataObject, policy: str) -> None:
        if not self.dumps:
            return
        payload, saved = data.draw(st.sampled_from(self.dumps))
        reply = self.call("FUNCTION", "RESTORE", payload, policy)
        after = {} if policy == "FLUSH" else dict(self.model)
        ok = True
        for library, functions in saved.items():
            if library in after and policy != "REPLACE":
                ok = False
            for f in functions:
                owner = next((lib for lib, fs in after.items() if f in fs), None)
                if owner not in (None, library):
                    ok = False
        if ok:
            assert reply == b"OK", reply
            after.update(saved)
            self.model = after
        else:
            assert isinstance(reply, Exception)

    @rule(function=st.sampled_from(["f", "g", "h", "k"]))
    def fcall(self, function: str) -> None:
        owner = self.owner(function)
        reply = self.call("FCALL", function, "0")
        if owner is None:
            assert str(reply) == "ERR Function not found"
        else:
            assert reply == f"{owner}.{function}".encode()

    @invariant()
    def registry_matches_the_model(self) -> None:
        registry = self.h.engine.scripting.registry
        registry.check_invariants()
        listed = {
            entry[1].decode(): sorted(f[1].decode() for f in entry[5])
            for entry in self.call("FUNCTION", "LIST")
        }
        assert listed == {lib: sorted(fs) for lib, fs in self.model.items()}


FunctionLibraries.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestFunctionLibraries = FunctionLibraries.TestCase
