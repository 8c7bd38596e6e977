"""Batches whose container changes while its keys are read.

Reading a key can run Python code (an ``__index__``, a property, a subclass
method), and that code can empty or grow the list being hashed, or replace
an object array's elements. Each case runs in a child process, so that a
crash fails the test instead of ending the run: the call must raise a clear
error or finish, and the interpreter must live.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.core

PRELUDE = """
import gc, sys
import numpy as np
import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, _core

class Clears:
    # An int-like key that empties the list holding it when it is read.
    def __init__(self, target): self.target = target
    def __index__(self):
        self.target.clear(); gc.collect(); return 7

class Grows:
    # An int-like key that makes the list reallocate its item array.
    def __init__(self, target): self.target = target
    def __index__(self):
        self.target.extend(str(i) * 50 for i in range(10000)); gc.collect(); return 7

class Replaces:
    # An int-like key that drops the object array's other elements.
    def __init__(self, target): self.target = target
    def __index__(self):
        for i in range(len(self.target)): self.target[i] = 0
        gc.collect(); return 7

def try_call(fn):
    try:
        fn()
        print("finished")
    except (RuntimeError, TypeError, ValueError) as e:
        print(type(e).__name__ + ": " + str(e))
"""

CALLS = {
    "bloom.add_many": "BloomFilter(1000, 0.01).add_many({keys})",
    "bloom.contains_many": "BloomFilter(1000, 0.01).contains_many({keys})",
    "counting.add_many": "CountingBloomFilter(1000, 0.01).add_many({keys})",
    "scalable.add_many": "ScalableBloomFilter(1000, 0.01).add_many({keys})",
    "hash_many": "bloomline.hash_many({keys})",
    "redis_items": "_core.redis_items({keys})",
    "update": "BloomFilter(1000, 0.01).update({keys})",
}


def run_child(body: str) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("change, at, now", [("Clears", 100, 0), ("Grows", 3, 10200)])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_list_emptied_or_grown_while_read(call: str, change: str, at: int, now: int) -> None:
    expr = CALLS[call].format(keys="keys")
    r = run_child(f"""
        keys = [str(i) * 40 for i in range(200)]
        keys[{at}] = {change}(keys)
        try_call(lambda: {expr})
    """)
    assert r.returncode == 0, f"the interpreter died ({r.returncode}): {r.stderr[-2000:]}"
    # A list whose length changed under the call is named, never read past its end.
    assert f"RuntimeError: keys changed size during the call (from 200 to {now} keys)" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("call", sorted(CALLS))
def test_object_array_elements_replaced_while_read(call: str) -> None:
    expr = CALLS[call].format(keys="arr")
    r = run_child(f"""
        arr = np.empty(300, dtype=object)
        for i in range(300):
            arr[i] = str(i) * 40 + "x"  # fresh objects, owned by the array alone
        arr[10] = Replaces(arr)
        # Every element is read (held while it is read), so the call finishes.
        try_call(lambda: {expr})
    """)
    assert r.returncode == 0, f"the interpreter died ({r.returncode}): {r.stderr[-2000:]}"
    assert "finished" in r.stdout, r.stdout + r.stderr


def test_list_mutated_by_another_thread_never_crashes() -> None:
    # Another thread appends and pops while keys whose __index__ yields the
    # GIL are hashed: every call raises the size error or finishes.
    r = run_child("""
        import threading, time
        class Yields:
            def __index__(self):
                time.sleep(0); return 5
        keys = [Yields() if i % 7 == 0 else str(i) for i in range(3000)]
        stop = time.monotonic() + 3
        def churn():
            while time.monotonic() < stop:
                keys.append("x" * 30); keys.pop()
        t = threading.Thread(target=churn); t.start()
        bf = BloomFilter(100000, 0.01)
        outcomes = set()
        calls = 0
        while time.monotonic() < stop and calls < 5000:
            calls += 1
            try:
                bf.add_many(keys); outcomes.add("finished")
            except RuntimeError as e:
                assert "changed size during the call" in str(e), e
                outcomes.add("raised")
        t.join()
        print(sorted(outcomes), calls)
    """)
    assert r.returncode == 0, f"the interpreter died ({r.returncode}): {r.stderr[-2000:]}"
    assert "[" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("shape", [(2, 3), (2, 2, 2), ()])
def test_object_arrays_of_any_shape_hash_every_element(shape: tuple[int, ...]) -> None:
    # The answers have the array's shape, and each element is its own key.
    import numpy as np

    from bloomline import BloomFilter, hash_many

    n = int(np.prod(shape)) if shape else 1
    flat = np.array([f"key-{i}" for i in range(n)], dtype=object)
    arr = flat.reshape(shape)
    f = BloomFilter(1000, 0.01)
    assert f.add_many(arr).shape == shape
    assert f.contains_many(flat).all()
    assert f.contains_many(arr).all() and f.contains_many(arr).shape == shape
    assert (hash_many(arr).reshape(-1) == hash_many(flat)).all()
    assert not BloomFilter(1000, 0.01).contains_many(arr).any()
