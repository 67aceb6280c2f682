"""A Haystack app: MarkdownHeaderSplitter + InMemoryBM25Retriever, a prompt builder and an answer builder
fed by a fixed reply (no LLM)."""

from typing import Any

from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder, PromptBuilder
from haystack.components.preprocessors import MarkdownHeaderSplitter
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from .corpus import FILES


@component
class FixedReply:
    """A generator stand-in: replies with the same text to every prompt."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, Any]:
        return {"replies": ["The answer is in the retrieved passages."]}


_documents = [Document(content=path.read_text(encoding="utf-8"), meta={"file_path": str(path)}) for path in FILES]
store = InMemoryDocumentStore()
store.write_documents(MarkdownHeaderSplitter().run(documents=_documents)["documents"])

pipeline = Pipeline()
pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
pipeline.add_component(
    "prompt_builder",
    PromptBuilder(
        template="{% for d in documents %}{{ d.content }}{% endfor %}\nQ: {{ question }}",
        required_variables=["question", "documents"],
    ),
)
pipeline.add_component("llm", FixedReply())
pipeline.add_component("answer_builder", AnswerBuilder())
pipeline.connect("retriever.documents", "prompt_builder.documents")
pipeline.connect("prompt_builder.prompt", "llm.prompt")
pipeline.connect("llm.replies", "answer_builder.replies")
pipeline.connect("retriever.documents", "answer_builder.documents")
