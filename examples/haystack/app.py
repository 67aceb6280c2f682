"""A Haystack 2 pipeline over the notes in docs/: an indexing pipeline (TextFileToDocument, MarkdownHeaderSplitter,
DocumentWriter into an InMemoryDocumentStore), then the query pipeline the target names: InMemoryBM25Retriever, an
extractive answerer where an app would have its generator (answering.py: offline and deterministic), and
AnswerBuilder, which pairs the reply with the documents it came from."""

from __future__ import annotations

from pathlib import Path

from answering import answer, words
from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder
from haystack.components.converters import TextFileToDocument
from haystack.components.preprocessors import MarkdownHeaderSplitter
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

HERE = Path(__file__).parent
DOCS = HERE / "docs"
TOP_K = 5  # documents retrieved for each question

store = InMemoryDocumentStore()
indexing = Pipeline()
indexing.add_component("converter", TextFileToDocument(store_full_path=True))
indexing.add_component("splitter", MarkdownHeaderSplitter())
indexing.add_component("writer", DocumentWriter(document_store=store))
indexing.connect("converter", "splitter")
indexing.connect("splitter", "writer")
files = sorted(DOCS.rglob("*.md"))
# each document keeps its path from this folder (docs/...), not the absolute one of this checkout
indexing.run(
    {"converter": {"sources": files, "meta": [{"file_path": path.relative_to(HERE).as_posix()} for path in files]}}
)
VOCABULARY = {word for document in store.filter_documents() for word in words(document.content or "")}


@component
class ExtractiveAnswerer:
    """The generator's place: replies with the best sentences of the retrieved documents, or a refusal."""

    @component.output_types(replies=list[str])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[str]]:
        passages = [
            (" ".join([*d.meta.get("parent_headers", []), d.meta.get("header") or ""]), d.content or "")
            for d in documents
        ]
        return {"replies": [answer(query, passages, VOCABULARY)]}


pipeline = Pipeline()
pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=TOP_K))
pipeline.add_component("answerer", ExtractiveAnswerer())
pipeline.add_component("answer_builder", AnswerBuilder())
pipeline.connect("retriever.documents", "answerer.documents")
pipeline.connect("answerer.replies", "answer_builder.replies")
pipeline.connect("retriever.documents", "answer_builder.documents")
