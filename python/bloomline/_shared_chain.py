"""A scalable chain's add when many processes share its stages (a
``SharedStageStore``, such as Redis): the one place that grows a shared chain
while other processes add to it, and raises what it knows when a step fails."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._facts import batch_shaped, with_facts
from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._stores import SharedStageStore, StageAdd
    from .scalable import ScalableBloomFilter


def add_shared(chain: ScalableBloomFilter, store: SharedStageStore, hashed: npt.NDArray[Any],
               valid: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """A chain's add when many processes share it: the store's server
    decides in each add what the last stage takes (up to its capacity) and
    refuses a stage that is no longer the last; the rest of the batch goes
    to the next stage. A key is looked up in every stage older than the one
    it is added to, read after that stage stopped taking keys, so an add by
    another process that raced the growth is seen. Whatever fails (a stage add, a lookup
    in the older stages, growing, reading the chain again), the error is
    raised once, here, with what is known in the caller's shape (a
    shared store's promise): the keys found new, and those with no
    answer yet. A key a re-sent stage add did not take (StageAdd's
    `doubted`) and found in an older stage afterwards has no answer
    either: the lost send may have been what put it there."""
    out = np.zeros(len(hashed), dtype=bool)
    seen = np.zeros(len(hashed), dtype=bool)
    doubted = np.zeros(len(hashed), dtype=bool)
    doubt: Optional[BaseException] = None
    pending = np.arange(len(hashed))

    def unknown() -> npt.NDArray[np.bool_]:
        u = np.zeros(len(hashed), dtype=bool)
        u[pending] = ~seen[pending]
        return u | (doubted & seen)

    failed: Optional[StageAdd] = None  # the stage add that failed, and its keys
    fresh = pending
    try:
        checked = 0  # stages below this were looked up for the pending keys
        while pending.size:
            last = len(chain._stages) - 1
            if checked < last:  # (a shared store's stages share a node: one round trip for all)
                seen[pending] |= store.contains_any(checked, last, hashed[pending])
            checked = last
            fresh = pending[~seen[pending]]
            if not fresh.size:
                break
            done = store.add_to_last(last, chain._stages[last], hashed[fresh])
            if done.doubted is not None and done.doubted.any():
                doubted[fresh[done.doubted]] = True
                doubt = done.doubt
            if done.stale is not None:  # another process grew the chain: add there
                chain._reload()
                continue
            if done.error is not None:
                failed = done
                break
            assert done.taken is not None and done.count is not None
            out[fresh[done.taken]] = done.new[done.taken]
            chain._counts[last] = done.count
            pending = fresh[~done.taken]
            if pending.size:  # the stage is full, or the chain grew meanwhile
                if len(chain._stages) == chain._rule.max_stages:
                    raise chain._full_error(int(pending.size))
                chain._new_stage()
    except Exception as e:  # (nothing of the step that raised was added)
        with_facts(e, out, unknown(), valid)
        raise
    if failed is not None:
        assert failed.error is not None
        out[fresh] |= failed.new
        facts = unknown()
        facts[fresh] = failed.unknown if failed.unknown is not None else ~failed.new
        raise with_facts(failed.error, out, facts, valid)
    if doubt is not None and (doubted & seen).any():
        raise with_facts(doubt, out, unknown(), valid)
    return batch_shaped(valid, out)
