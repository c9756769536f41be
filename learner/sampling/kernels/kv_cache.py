"""A KV cache for decoding that writes each new token in place instead of copying the cache.

transformers' ``DynamicCache`` grows every layer's keys and values with ``torch.cat``, so each
decoding step copies the whole cache of every layer once more. On CPU, where a step is bound
by memory traffic, that copy measured 7-10% of a decoding step of the embedded model (32 rows,
about 80 cached positions). ``decode_cache()`` returns a ``DynamicCache`` whose layers keep
their keys and values in buffers with room to spare: a step writes its one position and hands
attention a view of the filled part. The values seen by attention are the same tensors' values
as with ``torch.cat``; only where they live differs.

For generation only (no gradients): an in-place write into a buffer that autograd saved would
break the backward pass, so the loss passes keep ``DynamicCache``. Older transformers without
cache layers get a plain ``DynamicCache``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from transformers import DynamicCache

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.56: no per-layer cache classes
    DynamicLayer = None  # type: ignore[assignment,misc]  # the optional import's fallback

# Positions of room added whenever a buffer is full: a step's new tokens rarely need more.
HEADROOM = 64


def decode_cache() -> DynamicCache:
    """An empty cache for a decoding loop (see the module docstring)."""
    cache = DynamicCache()
    if DynamicLayer is not None and getattr(cache, "layer_class_to_replicate", None) \
            is DynamicLayer:
        cache.layer_class_to_replicate = ReservedLayer
    return cache


if DynamicLayer is not None:
    class ReservedLayer(DynamicLayer):
        """``DynamicLayer`` with keys and values in buffers that have room for more positions;
        ``keys`` and ``values`` are views of the filled part."""

        def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs
                   ) -> tuple[Tensor, Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self._kbuf, self._vbuf, self._length = key_states[..., :0, :], \
                    value_states[..., :0, :], 0
            n, new = self._length, key_states.shape[-2]
            if n + new > self._kbuf.shape[-2]:
                self._kbuf, self._vbuf = _grown(self._kbuf, n, new), _grown(self._vbuf, n, new)
            self._kbuf[..., n:n + new, :] = key_states
            self._vbuf[..., n:n + new, :] = value_states
            self._length = n + new
            self._views()
            assert self.keys is not None and self.values is not None  # _views set them
            return self.keys, self.values

        def _views(self) -> None:
            self.keys = self._kbuf[..., :self._length, :]
            self.values = self._vbuf[..., :self._length, :]

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized:
                self._kbuf = self._kbuf.repeat_interleave(repeats, dim=0)
                self._vbuf = self._vbuf.repeat_interleave(repeats, dim=0)
                self._views()

        def batch_select_indices(self, indices: Tensor) -> None:
            if self.is_initialized:
                self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
                self._views()

        def crop(self, max_length: int) -> None:
            # As DynamicLayer: a negative count drops that many of the last positions.
            if self.is_initialized and max_length < 0:
                self._length = max(self._length + max_length, 0)
                self._views()
            elif max_length > 0:
                super().crop(max_length)  # raises, as DynamicLayer does

        def reset(self) -> None:
            # Unset until the next update initialises the layer again.
            self._kbuf = self._vbuf = None  # type: ignore[assignment]
            self._length = 0
            super().reset()

    def _grown(buf: Tensor, filled: int, new: int) -> Tensor:
        """A buffer with room for ``new`` more positions plus ``HEADROOM``, filled part kept."""
        out = buf.new_empty(*buf.shape[:-2], filled + new + HEADROOM, buf.shape[-1])
        out[..., :filled, :] = buf[..., :filled, :]
        return out
else:
    ReservedLayer = None  # type: ignore[assignment,misc]  # the optional class's fallback


def can_refill(cache: Any) -> bool:
    """Whether ``trim_left`` and ``merge_rows`` work on this cache (per-layer caches)."""
    return DynamicLayer is not None and hasattr(cache, "layers")


def repeat_prefix(cache: Any, prefix: Any, rows: int) -> None:
    """Fill an empty ``cache`` with ``rows`` copies of ``prefix``'s one row (a prompt prefix
    every row shares), through the cache's own ``update`` (so its layers' buffers)."""
    for i, layer in enumerate(prefix.layers):
        cache.update(layer.keys.expand(rows, *layer.keys.shape[1:]),
                     layer.values.expand(rows, *layer.values.shape[1:]), i)


def trim_left(cache: Any, columns: int) -> None:
    """Drop the first ``columns`` positions of every layer (padding no row attends to)."""
    if columns <= 0:
        return
    for layer in cache.layers:
        if not layer.is_initialized:
            continue
        if isinstance(layer, ReservedLayer):
            layer._kbuf, layer._vbuf = layer._kbuf[..., columns:, :], layer._vbuf[..., columns:, :]
            layer._length -= columns
            layer._views()
        else:
            layer.keys, layer.values = layer.keys[..., columns:, :], layer.values[..., columns:, :]


def merge_rows(cache: Any, *others: Any) -> None:
    """Append ``others``' rows to ``cache``'s, in order, each side padded on the left with
    zeros to the widest one's positions (the caller pads its attention mask alike)."""
    for layers in zip(cache.layers, *(o.layers for o in others), strict=True):
        layer = layers[0]
        width = max(x.keys.shape[-2] for x in layers)
        room = HEADROOM if isinstance(layer, ReservedLayer) else 0
        keys = _left_padded_cat([x.keys for x in layers], width, room)
        values = _left_padded_cat([x.values for x in layers], width, room)
        if isinstance(layer, ReservedLayer):
            layer._kbuf, layer._vbuf, layer._length = keys, values, width
            layer._views()
        else:
            layer.keys, layer.values = keys, values


def _left_padded_cat(parts: list[Tensor], width: int, room: int) -> Tensor:
    """The parts' rows in order, each right-aligned at ``width`` positions, zeros before
    them, with ``room`` positions to spare after."""
    first = parts[0]
    out = first.new_zeros(sum(p.shape[0] for p in parts), *first.shape[1:-2], width + room,
                          first.shape[-1])
    row = 0
    for p in parts:
        out[row:row + p.shape[0], ..., width - p.shape[-2]:width, :] = p
        row += p.shape[0]
    return out
