"""Adapters that put warren into agent frameworks: the OpenAI Agents SDK
(openai_agents) and LangChain (langchain). Each imports its framework
only when called, so the warren package itself needs neither."""
