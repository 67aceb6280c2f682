"""LLM and lexical judges, prompts and the judge cache."""
