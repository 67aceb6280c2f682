"""A LlamaIndex app: MarkdownNodeParser + BM25Retriever over the demo corpus, MockLLM for synthesis.

The documents carry ``file_path`` and ``file_name`` as LlamaIndex's SimpleDirectoryReader writes them (built here
without it: its markdown reader is a separate package in older releases)."""

from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.retrievers.bm25 import BM25Retriever

from .corpus import FILES

documents = [
    Document(
        text=path.read_text(encoding="utf-8"), id_=str(path), metadata={"file_path": str(path), "file_name": path.name}
    )
    for path in FILES
]
nodes = MarkdownNodeParser().get_nodes_from_documents(documents)
retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=5)
query_engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=24))


class LoggedBM25Retriever(BM25Retriever):  # type: ignore[misc]  # BM25Retriever is untyped (Any)
    """The BM25 retriever, writing the k of each call to the file named by env RAGEVAL_TEST_K_LOG."""

    def _retrieve(self, query_bundle):  # type: ignore[no-untyped-def]
        import os

        with open(os.environ["RAGEVAL_TEST_K_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{self.similarity_top_k}\n")
        return super()._retrieve(query_bundle)


logged_query_engine = RetrieverQueryEngine.from_args(
    LoggedBM25Retriever.from_defaults(nodes=nodes, similarity_top_k=3), llm=MockLLM(max_tokens=24)
)
