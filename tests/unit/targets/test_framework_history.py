"""A conversation turn's history reaches each kind of framework object in its own form, asked in-process through the
framework client as a run asks it (``aask`` with ``params={"history": [...]}``).

Each app is real: a LlamaIndex CondenseQuestionChatEngine (MockLLM) over a BM25 query engine, a LangChain chain with
a ChatPromptTemplate's MessagesPlaceholder, LangGraph graphs with ``messages`` state, Haystack pipelines with a
ChatPromptBuilder or a ``chat_history`` input, each over the demo notes. Each records what it was given; and in a
two-turn exchange ("What is the Gaming Catalyst Program?", then "What was its budget?") the second turn finds the
program's budget first only when its history arrives (asked alone, another proposal's budget comes first). An
object that has no place for history errs on such a turn, naming the form it takes."""

import asyncio  # no postponed annotations here: LangGraph and Haystack read the types of the apps' own classes
import importlib
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
from needs import need_module

import pytest_rageval.demo
from pytest_rageval.targets.frameworks import recognise
from pytest_rageval.targets.frameworks.client import FrameworkClient
from pytest_rageval.targets.protocol import RagCallError, RagReply

CORPUS = Path(pytest_rageval.demo.__file__).parent / "corpus"
FILES = sorted(CORPUS.rglob("*.md"))
FIRST = "What is the Gaming Catalyst Program?"
FOLLOW_UP = "What was its budget?"
GOLD = ("proposals/gaming-catalyst.md", "Budget")  # asked alone, the follow-up finds another proposal's budget first


def _client(obj: Any) -> FrameworkClient:
    adapter = recognise(obj)
    assert adapter is not None, type(obj)
    return FrameworkClient(adapter, name="app:target", docs_root=CORPUS, timeout=60)


def _ask(obj: Any, question: str, history: list[dict[str, str]] | None = None) -> RagReply:
    params = {} if history is None else {"history": history}
    return asyncio.run(_client(obj).aask(question, k=5, params=params))


def _anchor(chunk: Any) -> tuple[str | None, str | None]:
    """A chunk's note and its own (last) heading."""
    return chunk.rel_path, chunk.heading_path[-1] if chunk.heading_path else None


def _first(reply: RagReply) -> tuple[str | None, str | None]:
    return _anchor(reply.response.retrieved_chunks[0])


def _exchange(obj: Any) -> tuple[RagReply, RagReply, RagReply]:
    """Turn 1, turn 2 with the live history (turn 1's question and answer), and turn 2 asked alone."""
    first = _ask(obj, FIRST)
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first.response.answer}]
    return first, _ask(obj, FOLLOW_UP, history), _ask(obj, FOLLOW_UP)


def _assert_exchange(obj: Any, section: bool = True) -> None:
    """Turn 2 finds the program's note first, and its budget among the passages (unless ``section`` is False: a
    splitter that keeps the heading out of the passage's text leaves the budget no word of the question)."""
    _, with_history, alone = _exchange(obj)
    assert _first(with_history)[0] == GOLD[0]
    found = [_anchor(chunk) for chunk in with_history.response.retrieved_chunks]
    assert GOLD in found or not section, found
    assert _first(alone)[0] != GOLD[0]  # another proposal's note first


def _call_error(obj: Any, question: str, history: list[dict[str, str]]) -> str:
    with pytest.raises(RagCallError) as raised:
        _ask(obj, question, history)
    assert raised.value.kind == "target"
    return raised.value.message


HISTORY = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "A grants program for games."}]


# --------------------------------------------------------------------------- LlamaIndex


@pytest.fixture(scope="module")
def llamaindex() -> dict[str, Any]:
    need_module("llama_index.core")
    need_module("llama_index.retrievers.bm25")
    from llama_index.core import Document, PromptTemplate
    from llama_index.core.chat_engine import CondenseQuestionChatEngine
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import MarkdownNodeParser
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.retrievers.bm25 import BM25Retriever

    documents = [
        Document(text=p.read_text(encoding="utf-8"), id_=str(p), metadata={"file_path": str(p)}) for p in FILES
    ]
    retriever = BM25Retriever.from_defaults(nodes=MarkdownNodeParser().get_nodes_from_documents(documents))
    query_engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))

    class Recording(CondenseQuestionChatEngine):
        """The chat engine, keeping each call's message and chat_history."""

        seen: ClassVar[list[tuple[str, list[tuple[str, str]]]]] = []

        def chat(self, message: str, chat_history: Any = None) -> Any:
            self.seen.append((message, [(m.role.value, m.content) for m in chat_history or []]))
            return super().chat(message, chat_history)

    # MockLLM echoes its prompt: the "condensed" question is the history's text and the follow-up, as a model
    # rewriting "its" into the program's name would make it
    engine = Recording.from_defaults(
        query_engine=query_engine, condense_question_prompt=PromptTemplate("{chat_history}\n{question}"), llm=MockLLM()
    )
    return {"engine": engine, "query_engine": query_engine, "retriever": retriever}


def test_a_llamaindex_chat_engine_gets_the_history_as_chat_messages(llamaindex: dict[str, Any]) -> None:
    engine = llamaindex["engine"]
    engine.seen.clear()
    _ask(engine, FOLLOW_UP, HISTORY)
    assert engine.seen == [(FOLLOW_UP, [("user", FIRST), ("assistant", "A grants program for games.")])]
    _assert_exchange(engine)


def test_a_llamaindex_chat_engine_keeps_no_turn_of_one_call_for_the_next(llamaindex: dict[str, Any]) -> None:
    """The engine's own memory is not where the history comes from: each call has a memory of its own, so a
    question asked after a conversation (here with -n 0 or concurrently) is asked alone."""
    engine = llamaindex["engine"]
    _ask(engine, FOLLOW_UP, HISTORY)
    assert _first(_ask(engine, FOLLOW_UP)) != GOLD
    assert engine.chat_history == []  # the user's engine itself holds nothing of the run


def test_a_llamaindex_context_chat_engine_asked_concurrently_sees_only_each_calls_own_history(
    llamaindex: dict[str, Any],
) -> None:
    """A ContextChatEngine (its default memory, an SQL-backed ``Memory``, in recent releases) asked eight turns at
    once, half with a history: MockLLM echoes the prompt it was given, so each answer shows what the engine saw."""
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.llms import MockLLM

    engine = ContextChatEngine.from_defaults(retriever=llamaindex["retriever"], llm=MockLLM())
    client = _client(engine)

    async def turns() -> list[RagReply]:
        asks = [client.aask(FOLLOW_UP, k=5, params={"history": HISTORY} if n % 2 else {}) for n in range(8)]
        return list(await asyncio.gather(*asks))

    replies = asyncio.run(turns())
    assert [FIRST in reply.response.answer for reply in replies] == [False, True] * 4
    assert all(reply.response.answer.count(FOLLOW_UP) == 1 for reply in replies)  # no other call's question
    assert engine.chat_history == []


def test_a_llamaindex_workflow_gets_the_history_as_chat_messages_beside_the_question(
    llamaindex: dict[str, Any],
) -> None:
    from llama_index.core.workflow import StartEvent, StopEvent, Workflow, step

    seen: list[Any] = []

    class Chat(Workflow):
        @step
        async def answer(self, ev: StartEvent) -> StopEvent:
            history = ev.get("chat_history")
            seen.append(None if history is None else [(m.role.value, m.content) for m in history])
            return StopEvent(result={"answer": f"{len(history or [])} earlier messages"})

    assert _ask(Chat(), FOLLOW_UP, HISTORY).response.answer == "2 earlier messages"
    assert _ask(Chat(), FOLLOW_UP).response.answer == "0 earlier messages"
    assert seen == [[("user", FIRST), ("assistant", "A grants program for games.")], None]  # none sent alone


@pytest.mark.parametrize(("name", "takes"), [("query_engine", "a single question"), ("retriever", "a query string")])
def test_a_llamaindex_object_without_chat_refuses_a_turn_with_history(
    llamaindex: dict[str, Any], name: str, takes: str
) -> None:
    message = _call_error(llamaindex[name], FOLLOW_UP, HISTORY)
    assert message.startswith(f"LlamaIndex {name.replace('_', ' ')} cannot take a conversation's history: it takes")
    assert takes in message and "chat engine" in message
    assert _ask(llamaindex[name], FOLLOW_UP).response.retrieved_chunks  # without history it answers as before


# --------------------------------------------------------------------------- LangChain and LangGraph


def _langchain_documents() -> list[Any]:
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    splitter = MarkdownHeaderTextSplitter([("#", "Header 1"), ("##", "Header 2")])
    documents = []
    for path in FILES:
        for document in splitter.split_text(path.read_text(encoding="utf-8")):
            document.metadata["source"] = str(path)
            if "Header 2" in document.metadata:  # a section starts with its note's title
                document.page_content = f"{document.metadata['Header 1']}\n{document.page_content}"
            documents.append(document)
    return documents


def _human_text(messages: list[Any]) -> str:
    """What a model rewriting the follow-up would search for: the user's questions so far (a fake model)."""
    return " ".join(str(m.content) for m in messages if getattr(m, "type", None) == "human")


def _chains() -> Any:
    """LangChain's retrieval-chain builders: in ``langchain`` up to 0.3, in ``langchain_classic`` since."""
    try:
        import langchain.chains as chains  # type: ignore[import-not-found,unused-ignore]

        chains.create_history_aware_retriever  # noqa: B018 - langchain 1.x has the module without them
    except (ImportError, AttributeError):
        chains = need_module("langchain_classic.chains")
    return chains


@pytest.fixture(scope="module")
def langchain() -> dict[str, Any]:
    for name in ("langchain_core", "langchain_community.retrievers", "langchain_text_splitters", "langgraph"):
        need_module(name)
    from typing import Annotated

    from langchain_community.retrievers import BM25Retriever
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    chains = _chains()
    retriever = BM25Retriever.from_documents(_langchain_documents(), k=5, preprocess_func=_words)
    seen: list[Any] = []

    def model(prompt: Any) -> str:
        """A chat model's stand-in that rewrites the follow-up (the user's questions so far), keeping what it saw."""
        messages = prompt.to_messages()
        seen.append([(m.type, m.content) for m in messages])
        return _human_text(messages)

    # the chain LangChain documents for conversational RAG: a history-aware retriever in a retrieval chain, whose
    # own input schema names only "input"
    rewrite = ChatPromptTemplate.from_messages([MessagesPlaceholder("chat_history"), ("human", "{input}")])
    history_aware = chains.create_history_aware_retriever(RunnableLambda(model), retriever, rewrite)
    answer_prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{input}")])
    first_line = RunnableLambda(lambda prompt: prompt.to_messages()[0].content.split("\n\n")[0].splitlines()[-1])
    chain = chains.create_retrieval_chain(
        history_aware,
        importlib.import_module(f"{chains.__name__}.combine_documents").create_stuff_documents_chain(
            first_line, answer_prompt
        ),
    )

    state = {"messages": Annotated[list[BaseMessage], add_messages], "context": list[Any], "answer": str}
    messages_state = TypedDict("MessagesState", state)  # type: ignore[misc]  # built here: the imports are optional
    question_state = TypedDict("QuestionState", {**state, "question": str})  # type: ignore[misc]

    def retrieve(state: dict[str, Any]) -> dict[str, Any]:
        seen.append([(m.type, m.content) for m in state["messages"]])
        asked = " ".join([_human_text(state["messages"]), state.get("question", "")])
        found = retriever.invoke(asked)
        return {"context": found, "answer": found[0].page_content, "messages": [AIMessage(found[0].page_content)]}

    def graph(schema: type) -> Any:
        builder: Any = StateGraph(schema)  # its type parameters differ across releases
        builder.add_node("retrieve", retrieve)
        builder.add_edge(START, "retrieve")
        builder.add_edge("retrieve", END)
        return builder.compile()

    def answer(question: str) -> dict[str, Any]:
        return {"answer": "a", "context": retriever.invoke(question)}

    return {
        "seen": seen,
        "chain": chain,
        "messages_graph": graph(messages_state),
        "question_graph": graph(question_state),
        "retriever": retriever,
        "text_chain": RunnableLambda(answer),
        "input_chain": PromptTemplate.from_template("{input}") | RunnableLambda(lambda p: answer(p.to_string())),
    }


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


HISTORY_SEEN = [("human", FIRST), ("ai", "A grants program for games.")]


@pytest.mark.parametrize(
    ("name", "seen"),
    [
        ("chain", [*HISTORY_SEEN, ("human", FOLLOW_UP)]),  # chat_history, then the prompt's own question
        ("messages_graph", [*HISTORY_SEEN, ("human", FOLLOW_UP)]),  # the question's message after the history
        ("question_graph", HISTORY_SEEN),  # the question under its own key, the history as the messages
    ],
)
def test_a_langchain_runnable_or_graph_gets_the_history_as_messages(
    langchain: dict[str, Any], name: str, seen: list[tuple[str, str]]
) -> None:
    langchain["seen"].clear()
    _ask(langchain[name], FOLLOW_UP, HISTORY)
    assert langchain["seen"] == [seen]
    _assert_exchange(langchain[name])


@pytest.mark.parametrize(
    ("name", "takes"),
    [
        ("retriever", "LangChain retriever cannot take a conversation's history: it takes a query string alone"),
        ("text_chain", "LangChain runnable cannot take a conversation's history: it takes a single text input"),
        (
            "input_chain",
            "LangChain runnable cannot take a conversation's history: it takes an input of input, "
            "and no step of it takes chat_history or messages",
        ),
    ],
)
def test_a_langchain_object_without_a_history_input_refuses_a_turn_with_history(
    langchain: dict[str, Any], name: str, takes: str
) -> None:
    assert _call_error(langchain[name], FOLLOW_UP, HISTORY).startswith(takes)
    assert _ask(langchain[name], FOLLOW_UP).response.retrieved_chunks  # without history it answers as before


# --------------------------------------------------------------------------- Haystack


@pytest.fixture(scope="module")
def haystack() -> dict[str, Any]:
    need_module("haystack")
    from haystack import Document, Pipeline, component
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.preprocessors import MarkdownHeaderSplitter
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    documents = [Document(content=p.read_text(encoding="utf-8"), meta={"file_path": str(p)}) for p in FILES]
    store = InMemoryDocumentStore()
    store.write_documents(MarkdownHeaderSplitter().run(documents=documents)["documents"])
    seen: list[Any] = []

    def said(messages: list[ChatMessage]) -> list[tuple[str, str]]:
        return [(str(m.role.value), str(m.text)) for m in messages]

    @component
    class Rewriter:
        """A chat model's stand-in that rewrites the follow-up: the user's questions so far."""

        @component.output_types(query=str)
        def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
            seen.append(said(messages))
            return {"query": " ".join(str(m.text) for m in messages if m.is_from("user"))}

    @component
    class HistoryRewriter:
        """The same, taking the question and the history as inputs of their own."""

        @component.output_types(query=str)
        def run(self, query: str, chat_history: list[ChatMessage] | None = None) -> dict[str, Any]:
            seen.append(said(chat_history or []))
            asked = [str(m.text) for m in chat_history or [] if m.is_from("user")]
            return {"query": " ".join([*asked, query])}

    def pipeline(rewriter: Any, into: str) -> Any:
        built = Pipeline()
        built.add_component("rewriter", rewriter)
        built.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
        built.connect("rewriter.query", "retriever.query")
        if into:
            template = [
                ChatMessage.from_system("Rewrite the last question to stand alone."),
                ChatMessage.from_user("{{query}}"),
            ]
            built.add_component("prompt_builder", ChatPromptBuilder(template=template, required_variables=["query"]))
            built.connect("prompt_builder.prompt", into)
        return built

    plain = Pipeline()
    plain.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
    return {
        "seen": seen,
        "template": pipeline(Rewriter(), "rewriter.messages"),
        "chat_history": pipeline(HistoryRewriter(), ""),
        "plain": plain,
    }


@pytest.mark.parametrize(
    ("name", "seen"),
    [
        # the ChatPromptBuilder's template with the history after its system message, before the question's
        ("template", [("system", "Rewrite the last question to stand alone."), *HISTORY_SEEN, ("user", FOLLOW_UP)]),
        ("chat_history", HISTORY_SEEN),  # an open input typed list[ChatMessage]
    ],
)
def test_a_haystack_pipeline_gets_the_history_as_chat_messages(
    haystack: dict[str, Any], name: str, seen: list[tuple[str, str]]
) -> None:
    haystack["seen"].clear()
    _ask(haystack[name], FOLLOW_UP, HISTORY)
    roles = {"human": "user", "ai": "assistant"}
    assert haystack["seen"] == [[(roles.get(role, role), text) for role, text in seen]]
    _assert_exchange(haystack[name], section=False)


def test_a_haystack_pipeline_without_a_chat_message_input_refuses_a_turn_with_history(haystack: dict[str, Any]) -> None:
    message = _call_error(haystack["plain"], FOLLOW_UP, HISTORY)
    assert message.startswith(
        "Haystack Pipeline cannot take a conversation's history: it takes no list of ChatMessage among its open inputs"
        " (retriever.query, "
    )
    assert "ChatPromptBuilder" in message
    assert _ask(haystack["plain"], FOLLOW_UP).response.retrieved_chunks  # without history it answers as before


# --------------------------------------------------------------------------- what a turn sends


@pytest.mark.parametrize(
    "history",
    [
        "user: hi",
        [{"role": "system", "content": "be brief"}],
        [{"role": "user", "content": 3}],
    ],
)
def test_a_history_that_is_not_a_list_of_user_and_assistant_messages_errs_that_call(
    llamaindex: dict[str, Any], history: Any
) -> None:
    with pytest.raises(RagCallError, match=r"params history(\[0\])? is "):
        asyncio.run(_client(llamaindex["engine"]).aask(FOLLOW_UP, k=5, params={"history": history}))
