"""A LangChain app: MarkdownHeaderTextSplitter + BM25Retriever, an LCEL retrieval chain with a fake LLM,
and a LangGraph graph over the same retriever."""

from typing import Any

from langchain_community.retrievers import BM25Retriever
from langchain_core.language_models import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from langchain_text_splitters import MarkdownHeaderTextSplitter
from typing_extensions import TypedDict

from .corpus import FILES

_splitter = MarkdownHeaderTextSplitter(headers_to_split_on=[("#", "Header 1"), ("##", "Header 2"), ("###", "Header 3")])
documents = []
for _path in FILES:
    for _document in _splitter.split_text(_path.read_text(encoding="utf-8")):
        _document.metadata["source"] = str(_path)
        documents.append(_document)

retriever = BM25Retriever.from_documents(documents, k=5)
_llm = FakeListLLM(responses=["The answer is in the retrieved passages."])
_prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {input}")
chain = RunnableParallel(context=retriever, input=RunnablePassthrough()).assign(
    answer=_prompt | _llm | StrOutputParser()
)


class State(TypedDict):
    question: str
    context: list[Any]
    answer: str


def _retrieve(state: State) -> dict[str, Any]:
    return {"context": retriever.invoke(state["question"])}


def _generate(state: State) -> dict[str, Any]:
    return {"answer": f"{len(state['context'])} passages were found."}


def _graph() -> Any:  # a compiled StateGraph (its type parameters differ across langgraph releases)
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(State)
    builder.add_node("retrieve", _retrieve)
    builder.add_node("generate", _generate)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "generate")
    builder.add_edge("generate", END)
    return builder.compile()


graph = _graph()
