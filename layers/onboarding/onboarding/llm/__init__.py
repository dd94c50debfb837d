"""Owns everything that talks to the model: the chat model factory (`chat_model`), Converse
normalisation (`converse`), prompts, tools, resilience and the summary's model call. The agents,
whose names the spec fixes, live in `onboarding.agents` and build on these.
"""
