"""A LangGraph chat graph over the notes in docs/: the graph of the langgraph example, holding the conversation in its
``messages`` state. The planning node turns a follow-up ("What was its budget?") into a standalone search from the
earlier questions of the conversation (followup.py, where a chat app's LLM would rewrite it) and asks for the
``search_notes`` tool; LangGraph's ToolNode runs it (MarkdownHeaderTextSplitter sections, a BM25Retriever), and the
answer node takes the best sentences of the documents the tool returned (answering.py: offline and deterministic)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

from answering import answer, words
from followup import standalone
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_text_splitters import MarkdownHeaderTextSplitter
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

HERE = Path(__file__).parent
DOCS = HERE / "docs"
TOP_K = 5  # sections the tool returns for each query
CONDENSE = True  # False: each follow-up is searched as it stands, the conversation ignored
HEADERS = [("#", "Header 1"), ("##", "Header 2"), ("###", "Header 3")]

splitter = MarkdownHeaderTextSplitter(headers_to_split_on=HEADERS, strip_headers=False)
documents: list[Document] = []
for path in sorted(DOCS.rglob("*.md")):
    for document in splitter.split_text(path.read_text(encoding="utf-8")):
        document.metadata["source"] = path.relative_to(HERE).as_posix()  # docs/..., from this folder
        if "Header 2" in document.metadata:  # a section starts with its note's title, which BM25 then finds too
            document.page_content = f"# {document.metadata['Header 1']}\n{document.page_content}"
        documents.append(document)

retriever = BM25Retriever.from_documents(documents, k=TOP_K, preprocess_func=words)  # words, not punctuation
VOCABULARY = {word for document in documents for word in words(document.page_content)}


@tool(response_format="content_and_artifact")
def search_notes(query: str) -> tuple[str, list[Document]]:
    """Search the governance notes: the text of the best sections, and the sections themselves."""
    found = retriever.invoke(query)
    return "\n\n".join(document.page_content for document in found), found


class State(TypedDict):
    question: str
    messages: Annotated[list[AnyMessage], add_messages]  # the conversation: earlier turns, then this one's steps
    search: str
    context: list[Document]
    answer: str


def plan(state: State) -> dict[str, Any]:
    """Ask for the search tool with the question made to stand alone (an agent's LLM would choose the call)."""
    earlier = [str(m.content) for m in state.get("messages", []) if isinstance(m, HumanMessage)]
    search = standalone(state["question"], earlier) if CONDENSE else state["question"]
    call = {"name": "search_notes", "args": {"query": search}, "id": f"search-{len(earlier) + 1}"}
    return {"search": search, "messages": [HumanMessage(state["question"]), AIMessage(content="", tool_calls=[call])]}


def respond(state: State) -> dict[str, Any]:
    """Answer from the documents the tool returned."""
    result = next(message for message in reversed(state["messages"]) if isinstance(message, ToolMessage))
    found: list[Document] = list(result.artifact or [])
    heading = [" ".join(str(d.metadata[key]) for _, key in HEADERS if key in d.metadata) for d in found]
    reply = answer(state["search"], [(h, d.page_content) for h, d in zip(heading, found)], VOCABULARY)
    return {"context": found, "answer": reply, "messages": [AIMessage(content=reply)]}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("tools", ToolNode([search_notes]))
builder.add_node("respond", respond)
builder.add_edge(START, "plan")
builder.add_edge("plan", "tools")
builder.add_edge("tools", "respond")
builder.add_edge("respond", END)
graph = builder.compile()
