"""A LangChain retrieval chain (LCEL) over the notes in docs/: each note is cut at its headings by
MarkdownHeaderTextSplitter, a BM25Retriever finds the passages, and the chain's answer step takes their best
sentences (answering.py: offline and deterministic, where an app would call an LLM). Each section keeps its note's
title as its first line, so that a question naming the note finds its sections. The chain returns
``{"question", "context", "answer"}``: the passages it used and the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from answering import answer, words
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_text_splitters import MarkdownHeaderTextSplitter

HERE = Path(__file__).parent
DOCS = HERE / "docs"
TOP_K = 5  # passages retrieved for each question
HEADERS = [("#", "Header 1"), ("##", "Header 2"), ("###", "Header 3")]

splitter = MarkdownHeaderTextSplitter(headers_to_split_on=HEADERS, strip_headers=False)
documents: list[Document] = []
for path in sorted(DOCS.rglob("*.md")):
    for document in splitter.split_text(path.read_text(encoding="utf-8")):
        document.metadata["source"] = path.relative_to(HERE).as_posix()  # docs/..., from this folder
        if "Header 2" in document.metadata:  # a section starts with its note's title, which BM25 then finds too
            document.page_content = f"# {document.metadata['Header 1']}\n{document.page_content}"
        documents.append(document)

retriever = BM25Retriever.from_documents(documents, k=TOP_K)
VOCABULARY = {word for document in documents for word in words(document.page_content)}


def _heading(document: Document) -> str:
    return " ".join(str(document.metadata[key]) for _, key in HEADERS if key in document.metadata)


def _answer(inputs: dict[str, Any]) -> str:
    passages = [(_heading(document), document.page_content) for document in inputs["context"]]
    return answer(inputs["question"], passages, VOCABULARY)


rag_chain = RunnableParallel(context=retriever, question=RunnablePassthrough()).assign(answer=RunnableLambda(_answer))
