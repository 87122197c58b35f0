"""The bundled model descriptions (``models/*.toml`` in the repository, installed as ``placer.models``)."""
