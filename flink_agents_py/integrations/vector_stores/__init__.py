"""Vector stores: Chroma, embedded (a local path) or as a server.

| store | needs | modes |
|---|---|---|
| ``ChromaVectorStore`` | ``knowledge`` (``chromadb``) | local path, HTTP server, in memory |
"""

from ._chroma import ChromaVectorStore, chroma_where

__all__ = ["ChromaVectorStore", "chroma_where"]
