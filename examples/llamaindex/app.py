"""A LlamaIndex query engine over the notes in docs/: SimpleDirectoryReader loads them, MarkdownNodeParser cuts them
at their headings, a BM25 retriever finds the passages, and a custom query engine answers with their best sentences
(answering.py: offline and deterministic, where an app would call an LLM)."""

from __future__ import annotations

from pathlib import Path

from answering import answer, words
from llama_index.core import Response, SimpleDirectoryReader
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.retrievers.bm25 import BM25Retriever

HERE = Path(__file__).parent
DOCS = HERE / "docs"
TOP_K = 5  # passages retrieved for each question


def _file_metadata(path: str) -> dict[str, str]:
    """The metadata each document keeps: its path from this folder (``docs/...``) and its name, not the file dates,
    which change with every checkout."""
    return {"file_path": Path(path).relative_to(HERE).as_posix(), "file_name": Path(path).name}


documents = SimpleDirectoryReader(DOCS, recursive=True, required_exts=[".md"], file_metadata=_file_metadata).load_data()
for document in documents:
    document.id_ = document.metadata["file_path"]  # stable ids: the same from run to run
nodes = MarkdownNodeParser(id_func=lambda i, document: f"{document.doc_id}#{i}").get_nodes_from_documents(documents)
retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=TOP_K)
VOCABULARY = {word for node in nodes for word in words(node.get_content())}


class ExtractiveQueryEngine(CustomQueryEngine):
    """Retrieve, then answer from the retrieved passages; the passages are the response's source nodes."""

    retriever: BaseRetriever

    def custom_query(self, query_str: str) -> Response:
        found = self.retriever.retrieve(query_str)
        passages = [
            (f"{n.node.metadata.get('header_path', '')} {n.node.get_content().splitlines()[0]}", n.node.get_content())
            for n in found
        ]
        return Response(response=answer(query_str, passages, VOCABULARY), source_nodes=found)


query_engine = ExtractiveQueryEngine(retriever=retriever)
