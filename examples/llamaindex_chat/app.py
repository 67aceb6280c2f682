"""A LlamaIndex chat engine over the notes in docs/: the query engine of the llamaindex example (SimpleDirectoryReader,
MarkdownNodeParser, a BM25 retriever, answers from the best sentences) inside LlamaIndex's CondenseQuestionChatEngine,
which turns each follow-up into a standalone question from the conversation before it asks. The condensing "LLM" is
followup.py (offline and deterministic, where an app would call its LLM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from answering import answer, words
from followup import standalone
from llama_index.core import PromptTemplate, Response, SimpleDirectoryReader
from llama_index.core.chat_engine import CondenseQuestionChatEngine
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.retrievers.bm25 import BM25Retriever

HERE = Path(__file__).parent
DOCS = HERE / "docs"
TOP_K = 5  # passages retrieved for each question
CONDENSE = True  # False: each follow-up is asked as it stands, the conversation ignored

documents = SimpleDirectoryReader(
    DOCS,
    recursive=True,
    required_exts=[".md"],
    file_metadata=lambda path: {"file_path": Path(path).relative_to(HERE).as_posix(), "file_name": Path(path).name},
).load_data()
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


#: What the chat engine asks its LLM: the conversation's lines ("user: ...", "assistant: ...") and the follow-up.
CONDENSE_PROMPT = PromptTemplate("{chat_history}\nFollow-up: {question}")


class Condenser(CustomLLM):
    """The LLM that condenses a conversation into a standalone question (followup.py, where an app calls a model)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="followup")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        conversation, _, question = prompt.rpartition("\nFollow-up: ")
        earlier = [line.removeprefix("user: ") for line in conversation.splitlines() if line.startswith("user: ")]
        return CompletionResponse(text=standalone(question, earlier) if CONDENSE else question)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted, **kwargs)


query_engine = ExtractiveQueryEngine(retriever=retriever)
chat_engine = CondenseQuestionChatEngine.from_defaults(
    query_engine=query_engine, condense_question_prompt=CONDENSE_PROMPT, llm=Condenser()
)
