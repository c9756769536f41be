"""Built-in task packs and the pack format (see ``tasks.pack``)."""

from tasks.pack import Manifest, Pack, PackError, ProceduralPack, Task, load_folder
from tasks.registry import load_pack, pack_names, pack_sources

__all__ = [
    "Manifest",
    "Pack",
    "PackError",
    "ProceduralPack",
    "Task",
    "load_folder",
    "load_pack",
    "pack_names",
    "pack_sources",
]
