"""Arrays without reference counts, for compiled kernels that read their arguments in hot loops.

Numba counts references to every array it binds: reading an array field of a tuple argument
(``G.in_ptr``) or handing an array to an inlined helper increments and later decrements the
array's count with atomic instructions. A kernel whose loops read dozens of fields of its
argument bundles per event spends much of its time there. :func:`uncounted` answers the same
value with every array (also inside nested tuples) re-described without its memory-info
pointer, so those counts become a test of a null pointer.

Safe only while the caller's arrays outlive the kernel's use of the views: the kernel must not
keep a view after it returns, nor hand one to anything that does (nothing that stores an array,
no returned array). CPU only. O(fields) at the call; nothing is copied.
"""

from __future__ import annotations

from typing import Any

from numba.core import config, types
from numba.core.extending import intrinsic
from numba.np.arrayobj import populate_array


def _strip(context: Any, builder: Any, ty: types.Type, value: Any) -> Any:
    """``value`` of type ``ty`` with every array's memory-info pointer set to null."""
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value)
        out = context.make_array(ty)(context, builder)
        populate_array(out, data=ary.data, shape=ary.shape, strides=ary.strides,
                       itemsize=ary.itemsize, meminfo=None)
        return out._getvalue()
    if isinstance(ty, types.BaseTuple):
        for i, member in enumerate(ty):
            item = builder.extract_value(value, i)
            value = builder.insert_value(value, _strip(context, builder, member, item), i)
    return value


@intrinsic
def _without_counts(typingctx: Any, value: types.Type) -> Any:  # type: ignore[no-untyped-def]
    """``value`` (an array, or a tuple or named tuple of arrays, scalars and such tuples) with
    no reference count on any of its arrays (module docstring)."""
    if not isinstance(value, (types.Array, types.BaseTuple)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _strip(context, builder, sig.args[0], args[0])

    return value(value), codegen


def _itself(value: Any) -> Any:
    return value


uncounted = _itself if config.DISABLE_JIT else _without_counts
"""The intrinsic in compiled code; the value itself where Numba's JIT is disabled (a kernel
then runs as Python, and a Python call cannot reach an intrinsic)."""
