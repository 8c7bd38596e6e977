"""What an add that raised knows of its batch, in the caller's shape.

Filters shared by many processes (bloomline.redis) can fail part-way
through a batch; the error then carries ``new`` (True where a key was
reported new to this call) and ``unknown`` (True where the call has no
answer for it), set on the exception itself so that its class stays what
it is. Stores hand their outcomes up as values; the outermost call attaches
the facts once, here, in the shape of the keys it was given (nulls
skipped read False in both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    Facts = tuple[Optional[npt.NDArray[np.bool_]], Optional[npt.NDArray[np.bool_]]]


def batch_shaped(valid: Optional[npt.NDArray[np.bool_]], answers: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Answers for the keys that are not null (from _core.hash_valid), as an
    array of the batch's shape: False (0) where the key was null. valid
    None: the answers are the batch's already."""
    if valid is None:
        return answers
    if answers.size == valid.size:
        return answers.reshape(valid.shape)
    out = np.zeros(valid.shape, dtype=answers.dtype)
    out[valid] = answers
    return out


def with_facts(e: BaseException, new: Optional[npt.NDArray[np.bool_]], unknown: Optional[npt.NDArray[np.bool_]],
               valid: Optional[npt.NDArray[np.bool_]] = None) -> BaseException:
    """e, carrying the facts of its batch (set on it: any exception class),
    put in the caller's shape by `valid`."""
    e.new = None if new is None else batch_shaped(valid, new)  # type: ignore[attr-defined]
    e.unknown = None if unknown is None else batch_shaped(valid, unknown)  # type: ignore[attr-defined]
    return e


def facts(e: BaseException) -> Facts:
    """(new, unknown) of an error an add raised; (None, None) when it
    carries none (nothing is known: treat every key as unknown)."""
    return getattr(e, "new", None), getattr(e, "unknown", None)
